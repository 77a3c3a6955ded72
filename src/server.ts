import module from 'node:module';

// V8's compiled code for the thousand modules start-up loads, kept on disk (NODE_COMPILE_CACHE, or
// node-compile-cache in the temporary directory): a start after the first skips compiling them,
// about 50 ms. Where the directory cannot be written the cache is off, and nothing else changes.
// Before the imports it should cover, hence the dynamic import.
module.enableCompileCache?.();
const { serve } = await import('./serve.js');
await serve();
