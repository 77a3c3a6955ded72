import { serve } from './serve.js';

// What the entry point (server.ts) loads once the compile cache is on. The build bundles this
// module with its dependencies into one file (scripts/bundle.ts), which starts faster than the
// thousand files it replaces.
await serve();
