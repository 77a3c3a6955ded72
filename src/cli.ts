#!/usr/bin/env node
import module from 'node:module';

// The command line (`toolport`), bin of the package. V8's compile cache first, as for the server
// (see server.ts), then the commands, which the build bundles into one file (scripts/bundle.ts):
// `toolport mcp` answers a desktop client's first message without resolving hundreds of files.
module.enableCompileCache?.();
await import('./main/run-cli.js');
