import type { BuildOptions } from 'esbuild';

// CommonJS packages inside an ES module bundle still call require and read __dirname.
const BANNER = [
  "import { createRequire as __toolportCreateRequire } from 'node:module';",
  "import { fileURLToPath as __toolportFileURLToPath } from 'node:url';",
  "import { dirname as __toolportDirname } from 'node:path';",
  'const require = __toolportCreateRequire(import.meta.url);',
  'const __filename = __toolportFileURLToPath(import.meta.url);',
  'const __dirname = __toolportDirname(__filename);',
].join('\n');

/**
 * How the server and the command line are bundled (scripts/bundle.ts), and the bench's patched
 * variants with them (scripts/bench/subtract.ts). Left out, loaded from node_modules: packages that
 * read files of their own at run time, and ioredis, which only servers with Redis load.
 */
export const BUNDLE_OPTIONS = {
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node22',
  external: ['@fastify/swagger-ui', 'pino', 'pino-pretty', 'thread-stream', 'ioredis'],
  banner: { js: BANNER },
} as const satisfies BuildOptions;
