/** The worker thread that compiles a source's schemas (see schema-compiler.ts): `compileListing`, off the event loop. */
import { parentPort } from 'node:worker_threads';
import { compileListing, transferablesOf, type ToolSchemas } from './compile.js';

if (parentPort === null) throw new Error('the schema compiler runs as a worker thread');
const port = parentPort;

port.on('message', (listing: ToolSchemas[]) => {
  const compilations = compileListing(listing);
  port.postMessage(compilations, transferablesOf(compilations));
});
port.postMessage('ready');
