/**
 * The worker thread that parses command lines for the Bash rules (see `bash-rules-parse.ts`), with
 * tree-sitter and its bash grammar. tree-sitter's error recovery is superlinear on some malformed
 * lines (64 KiB of `)` takes minutes; a long pipeline ending in `|` can abort the WebAssembly
 * module), so it runs where it can be stopped, and where it never holds up the event loop.
 */
import { createRequire } from 'node:module';
import { parentPort } from 'node:worker_threads';
import { Language, Parser, type Tree } from 'web-tree-sitter';
import { joinContinuations } from './bash-rules-join.js';
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
  const first = parseTree(source, deadline);
  if (first.kind !== 'tree') return first;
  let tree: Tree | undefined = first.tree;
  let line = source;
  try {
    if (tree.rootNode.hasError) return { kind: 'unparsable' };
    // Bash joins backslash-newline before it splits words: check the line it reads.
    const joined = joinContinuations(tree.rootNode, source);
    if (joined !== undefined) {
      tree.delete();
      tree = undefined;
      const second = parseTree(joined, deadline);
      if (second.kind !== 'tree') return second;
      tree = second.tree;
      line = joined;
      if (tree.rootNode.hasError) return { kind: 'unparsable' };
      if (joinContinuations(tree.rootNode, joined) !== undefined) return { kind: 'unreadable', detail: 'a backslash-newline that joins lines twice' };
    }
    return collectCommands(tree.rootNode, line, max);
  } finally {
    tree?.delete();
  }
}

function parseTree(source: string, deadline: number): { readonly kind: 'tree'; readonly tree: Tree } | ParseOutcome {
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
  return { kind: 'tree', tree };
}
