/**
 * The worker thread that parses command lines for the Bash rules (see `bash-rules-parse.ts`), with
 * tree-sitter and its bash grammar. tree-sitter's error recovery is superlinear on some malformed
 * lines (64 KiB of `)` takes minutes; a long pipeline ending in `|` can abort the WebAssembly
 * module), so it runs where it can be stopped, and where it never holds up the event loop.
 */
import { createRequire } from 'node:module';
import { parentPort } from 'node:worker_threads';
import { Language, Parser, type Tree } from 'web-tree-sitter';
import { collectCommands } from './bash-rules-scan.js';
import type { ParseJob, ParseOutcome } from './bash-rules-parse.js';

if (parentPort === null) throw new Error('bash-rules-worker runs as a worker thread');
const port = parentPort;

const require = createRequire(import.meta.url);
// Found through the package rather than beside the module that loads it, which a bundler may move.
const runtime = require.resolve('web-tree-sitter/web-tree-sitter.wasm');
await Parser.init({ locateFile: () => runtime });
const parser = new Parser();
parser.setLanguage(await Language.load(require.resolve('tree-sitter-bash/tree-sitter-bash.wasm')));

port.on('message', (job: ParseJob) => port.postMessage(parse(job)));
port.postMessage({ kind: 'ready' } satisfies ParseOutcome);

function parse({ source, max, budgetMs }: ParseJob): ParseOutcome {
  const deadline = performance.now() + budgetMs;
  let tree: Tree | null;
  try {
    // Returning true cancels the parse; tree-sitter asks every hundred or so steps.
    tree = parser.parse(source, null, { progressCallback: () => performance.now() > deadline });
  } catch {
    // The WebAssembly module aborted and cannot be used again: end this thread; the line is refused and a fresh thread starts.
    process.exit(1);
  }
  if (tree === null) {
    // A cancelled parse would otherwise resume on the next call.
    parser.reset();
    return { kind: 'too-slow' };
  }
  try {
    return tree.rootNode.hasError ? { kind: 'unparsable' } : collectCommands(tree.rootNode, source, max);
  } finally {
    tree.delete();
  }
}
