import { createRequire } from 'node:module';

/** The package's version, as `package.json` says (the OpenAPI document and MCP's `serverInfo` carry it). */
export const VERSION = (createRequire(import.meta.url)('../../package.json') as { version: string }).version;
