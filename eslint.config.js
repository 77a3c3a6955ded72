import js from '@eslint/js';
import tseslint from 'typescript-eslint';

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
  {
    // The core knows nothing of any transport or metrics library: adapters call it, never the reverse.
    files: ['src/core/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['fastify', 'fastify/*', '@fastify/*'], message: 'src/core/ is free of Fastify: put HTTP concerns in src/http/.' },
            { group: ['node:http', 'node:https', 'node:http2', 'http', 'https', 'http2'], message: 'src/core/ is free of HTTP: put it in an adapter.' },
            { group: ['prom-client'], message: 'src/core/ reports metrics through an observer interface.' },
            { group: ['../*', '!../core/*'], message: 'src/core/ imports nothing from the rest of src/ (adapters, config, tools).' },
          ],
        },
      ],
    },
  },
  {
    // The operating-system layer (pinned paths, locks, processes, the sandbox) sits below the
    // tools and knows nothing above it, so it can be read, tested and reused alone.
    files: ['src/os/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['../../*', '!../../os/*'], message: 'src/os/ imports nothing from the rest of src/ (core, tools, adapters): pass what it needs in.' },
            { group: ['fastify', 'fastify/*', '@fastify/*'], message: 'src/os/ is free of Fastify.' },
          ],
        },
      ],
    },
  },
  {
    // Tools are plain modules over the core and the OS layer: never an adapter, the process or its configuration.
    files: ['src/tools/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['../http/*', '../mcp/*', '../main/*', '../providers/*', '../config/*', '../assembly/*'],
              message: 'A tool never imports an adapter, an entry point or the configuration: it gets what it needs as options.',
            },
            { group: ['fastify', 'fastify/*', '@fastify/*'], message: 'Tools never import Fastify.' },
          ],
        },
      ],
    },
  },
  {
    // Access tokens (verification, the issuers' keys, introspection, claims to callers) are
    // transport-neutral, like the keyring: an adapter finds the token in its protocol and asks here.
    files: ['src/auth/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: [
                '../http/*',
                '../mcp/*',
                '../main/*',
                '../providers/*',
                '../config/*',
                '../assembly/*',
                '../tools/*',
                '../os/*',
                '../infra/*',
                '../upstreams/*',
                '../*.js',
              ],
              message: 'src/auth/ imports only src/core/: the HTTP parts (metadata routes, challenges, the guard) live in src/http/.',
            },
            { group: ['fastify', 'fastify/*', '@fastify/*'], message: 'src/auth/ is free of Fastify.' },
          ],
        },
      ],
    },
  },
  {
    // Upstream MCP servers are a source of tools, like the built-in ones: they feed the registry and
    // know no adapter; the HTTP app sees their states through its own interface.
    files: ['src/upstreams/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['../http/*', '../mcp/*', '../main/*', '../assembly/*', '../tools/*'],
              message: 'src/upstreams/ is a tool source: it never imports an adapter, an entry point, the assembly or the tools.',
            },
            { group: ['fastify', 'fastify/*', '@fastify/*'], message: 'src/upstreams/ never imports Fastify.' },
          ],
        },
      ],
    },
  },
);
