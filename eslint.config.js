import { readdirSync } from 'node:fs';
import path from 'node:path';
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const FOLDERS = readdirSync(path.join(import.meta.dirname, 'src'), { withFileTypes: true })
  .filter((entry) => entry.isDirectory())
  .map((entry) => entry.name);
/**
 * Every folder of src/ but `allowed`, and src/'s own files, as patterns from `up`. Listed rather
 * than `${up}*` with exceptions: as in .gitignore, a path under an excluded folder cannot be let
 * back in.
 */
const except = (up, ...allowed) => [...FOLDERS.filter((folder) => !allowed.includes(folder)).map((folder) => `${up}${folder}/*`), `${up}*.js`];

/** How deep a folder's files may sit below it: src/<folder>/a/b/c/x.ts. */
const DEPTHS = [0, 1, 2, 3];

/**
 * A layer's import rule at every depth of its folder. Patterns are written against `up`, the
 * relative way from a file back to src/ ('../' beside the folder's top, '../../' one folder down):
 * a rule written for one depth alone lets a file one folder deeper import around it.
 */
function layer(folder, patterns) {
  return DEPTHS.map((depth) => ({
    files: [`src/${folder}/${'*/'.repeat(depth)}*.ts`],
    rules: { '@typescript-eslint/no-restricted-imports': ['error', { patterns: patterns('../'.repeat(depth + 1)) }] },
  }));
}
const noFastify = (where) => ({ group: ['fastify', 'fastify/*', '@fastify/*'], message: `${where} is free of Fastify.` });

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', 'coverage/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
    },
  },
  {
    files: ['src/**/*.ts'],
    rules: { 'no-console': 'error' },
  },
  // The core knows nothing of any transport or metrics library: adapters call it, never the reverse.
  ...layer('core', (up) => [
    { group: ['fastify', 'fastify/*', '@fastify/*'], message: 'src/core/ is free of Fastify: put HTTP concerns in src/http/.' },
    { group: ['node:http', 'node:https', 'node:http2', 'http', 'https', 'http2'], message: 'src/core/ is free of HTTP: put it in an adapter.' },
    { group: ['prom-client'], message: 'src/core/ reports metrics through an observer interface.' },
    {
      group: ['@opentelemetry/*', '@fastify/otel'],
      message: 'src/core/ traces through the CallTracer interface (tracer.ts), which src/telemetry/ implements.',
    },
    { group: except(up, 'core'), message: 'src/core/ imports nothing from the rest of src/ (adapters, config, tools).' },
  ]),
  // The operating-system layer (pinned paths, locks, processes, the sandbox) sits below the
  // tools and knows nothing above it, so it can be read, tested and reused alone.
  ...layer('os', (up) => [
    { group: except(up, 'os'), message: 'src/os/ imports nothing from the rest of src/ (core, tools, adapters): pass what it needs in.' },
    noFastify('src/os/'),
  ]),
  // Permission rules (the loading, the catalog, the Bash checker) are read against the core's
  // rule language and nothing else, so every adapter and tool can ask them the same way.
  ...layer('permissions', (up) => [
    { group: except(up, 'core', 'permissions'), message: 'src/permissions/ imports only src/core/: pass what it needs in.' },
    noFastify('src/permissions/'),
  ]),
  // Tools are plain modules over the core, the permissions and the OS layer: never an adapter,
  // the process or its configuration.
  ...layer('tools', (up) => [
    {
      group: ['http', 'mcp', 'main', 'providers', 'config', 'assembly'].map((folder) => `${up}${folder}/*`),
      message: 'A tool never imports an adapter, an entry point or the configuration: it gets what it needs as options.',
    },
    noFastify('A tool'),
  ]),
  // Access tokens (verification, the issuers' keys, introspection, claims to callers) are
  // transport-neutral, like the keyring: an adapter finds the token in its protocol and asks here.
  ...layer('auth', (up) => [
    {
      group: except(up, 'core', 'auth'),
      message: 'src/auth/ imports only src/core/: the HTTP parts (metadata routes, challenges, the guard) live in src/http/.',
    },
    noFastify('src/auth/'),
  ]),
  // Tracing is loaded only when it is on: it implements the core's contract and knows no adapter,
  // so nothing that runs without tracing has a reason to import it.
  ...layer('telemetry', (up) => [
    {
      group: ['http', 'mcp', 'main', 'assembly', 'tools', 'upstreams', 'auth', 'providers', 'permissions', 'os'].map((folder) => `${up}${folder}/*`),
      message: 'src/telemetry/ implements the core contract (core/tracer.ts) over OpenTelemetry: it imports only core/, config/ and infra/.',
    },
  ]),
  // Upstream MCP servers are a source of tools, like the built-in ones: they feed the registry and
  // know no adapter; the HTTP app sees their states through its own interface.
  ...layer('upstreams', (up) => [
    {
      group: ['http', 'mcp', 'main', 'assembly', 'tools'].map((folder) => `${up}${folder}/*`),
      message: 'src/upstreams/ is a tool source: it never imports an adapter, an entry point, the assembly or the tools.',
    },
    noFastify('src/upstreams/'),
  ]),
);
