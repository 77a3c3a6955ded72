import type { FastifyInstance } from 'fastify';

/** An API key and what it may use; `tools` undefined means every served tool. */
export interface ApiKey {
  label: string;
  key: string;
  tools?: string[];
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The key the request authenticated with; undefined when no keys are configured. */
    apiKey?: ApiKey;
  }
}

export interface AccessControlOptions {
  /** No keys: no authentication. */
  apiKeys: readonly ApiKey[];
  /** With keys configured, leave /docs and /openapi.json open. */
  publicDocs: boolean;
  /** The server listens on a loopback address: refuse non-local Host and Origin headers. */
  localOnly: boolean;
}

/** Authentication, tool scopes and the loopback guard. (Implementation in progress.) */
export function installAccessControl(_app: FastifyInstance, _options: AccessControlOptions): void {}
