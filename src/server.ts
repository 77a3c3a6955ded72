import module from 'node:module';

// V8's compiled code for what start-up loads, kept on disk (NODE_COMPILE_CACHE, or
// node-compile-cache in the temporary directory): a start after the first skips compiling it.
// Where the directory cannot be written the cache is off, and nothing else changes. Before the
// import it should cover, hence the dynamic import.
module.enableCompileCache?.();
// SIGHUP (reload the keys) must never end the server, which is its default: while the modules
// load, the keys have not been read yet, so there is nothing to reload; serve() takes it from there.
process.on('SIGHUP', ignoreUntilServing);
await import('./main/run-server.js');

function ignoreUntilServing(): void {}
