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
);
