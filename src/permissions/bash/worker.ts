/** The worker thread that reads command lines for the Bash rules (see `pool.ts`): `judgeLine`, off the event loop. */
import { parentPort } from 'node:worker_threads';
import { judgeLine, type CommandRules } from './line-check.js';

if (parentPort === null) throw new Error('the Bash rules worker runs as a worker thread');
const port = parentPort;

port.on('message', ({ line, rules }: { line: string; rules: CommandRules }) => port.postMessage(judgeLine(line, rules)));
port.postMessage('ready');
