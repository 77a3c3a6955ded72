import assert from 'node:assert/strict';
import { copyFile, mkdir, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, test } from 'node:test';
import type { ToolDef, ToolResult } from '#src/core/types.js';
import { createBashTool } from '#src/tools/bash.js';
import { createGlobTool } from '#src/tools/glob/glob.js';
import { createGrepTool } from '#src/tools/grep/grep.js';
import { createLsTool } from '#src/tools/ls.js';
import { sandboxUnavailableReason } from '#src/os/sandbox/bubblewrap.js';
import { Workspace } from '#src/os/fs/workspace.js';
import { startSwapper } from '../support/swapper.js';
import { toolContext } from '../support/tool-context.js';
import { requireOrSkip } from '../support/require.js';
import { temporaryDirectory } from '../support/workspace.js';

// The attack: `ws/d` is a real directory and `ws/.swap` a symlink to a directory outside with
// files of distinct names and secret content; another process exchanges the two entries in a
// tight loop while clients list and search paths through `d`. Every call must see the real `d`
// (or be refused): no outside name or content comes back, and no message names an outside path.
const ROUNDS_MS = 2_000;
const MAX_CALLS = 3_000;
const CLIENTS = 6;
const SECRET = 'SECRET-CONTENT';
const OUTSIDE_NAME = 'OUTSIDE-NAME';
const SWAPPER = path.join(import.meta.dirname, '..', 'fixtures', 'swapper.py');

const base = await temporaryDirectory({ after }, 'toolport-race-listing-');
let root: string;
let ws: Workspace;
let calls: [ToolDef, Record<string, unknown>][];

const textOf = (result: ToolResult): string => result.content.map((b) => (b.type === 'text' ? b.text : '[image]')).join('\n');

before(async () => {
  root = path.join(base, 'ws');
  const outside = path.join(base, 'elsewhere');
  // Both sides have `sub`, so "d/sub" leads somewhere whichever side `d` is.
  for (const dir of [path.join(root, 'd', 'sub'), path.join(outside, 'sub')]) await mkdir(dir, { recursive: true });
  await writeFile(path.join(root, 'd', 'a.txt'), 'needle inside\n');
  await writeFile(path.join(root, 'd', 'sub', 'b.txt'), 'needle inside too\n');
  await writeFile(path.join(outside, `${OUTSIDE_NAME}-1.txt`), `needle ${SECRET}\n`);
  await writeFile(path.join(outside, 'a.txt'), `needle ${SECRET}\n`);
  await writeFile(path.join(outside, 'sub', `${OUTSIDE_NAME}-2.txt`), `needle ${SECRET}\n`);
  await writeFile(path.join(outside, 'sub', 'b.txt'), `needle ${SECRET}\n`);
  await symlink(outside, path.join(root, '.swap'));
  ws = await Workspace.open(root);
  const LS = createLsTool(ws);
  const Glob = createGlobTool(ws);
  const Grep = createGrepTool(ws);
  // Without the sandbox, rg starts pinned but follows what it walks into; only paths whose
  // directories below are not swapped are safe then, and tested.
  const GrepDirect = createGrepTool(ws, { confine: 'off' });
  calls = [
    [LS, { path: 'd' }],
    [LS, { path: 'd/sub' }],
    [LS, { path: '.' }],
    [Glob, { pattern: 'd/**' }],
    [Glob, { pattern: '**/*.txt', path: 'd' }],
    [Glob, { pattern: '*', path: 'd/sub' }],
    [Grep, { pattern: 'needle', path: 'd' }],
    [Grep, { pattern: 'needle', path: '.', output_mode: 'content' }],
    [Grep, { pattern: 'needle', path: 'd/sub', output_mode: 'content' }],
    [Grep, { pattern: 'needle', path: 'd/a.txt', output_mode: 'content' }],
    [GrepDirect, { pattern: 'needle', path: 'd', output_mode: 'content' }],
    [GrepDirect, { pattern: 'needle', path: 'd/sub/b.txt', output_mode: 'count' }],
  ];
});

/** What the clients saw: how many calls, how many listed something real, and every leak. */
interface Seen {
  calls: number;
  listed: number;
  leaks: string[];
}

/** Runs the clients until `done()` or the call limit; every answer is checked for the outside. */
async function clients(done: () => boolean): Promise<Seen> {
  const seen: Seen = { calls: 0, listed: 0, leaks: [] };
  await Promise.all(
    Array.from({ length: CLIENTS }, async (_, client) => {
      for (let i = 0; !done() && seen.calls < MAX_CALLS; i += 1) {
        const [tool, input] = calls[(client + i) % calls.length]!;
        let text: string;
        try {
          const result = await tool.execute(input, toolContext());
          text = textOf(result);
          if (!result.isError && /needle inside|a\.txt/.test(text)) seen.listed += 1;
        } catch (err) {
          text = `threw ${String(err)}`;
          seen.leaks.push(`${tool.name} ${JSON.stringify(input)} ${text}`);
        }
        seen.calls += 1;
        // Any absolute path under the test's directory (the outside one included) counts.
        if (text.includes(SECRET) || text.includes(OUTSIDE_NAME) || text.includes(base) || text.includes('/proc/')) {
          seen.leaks.push(`${tool.name} ${JSON.stringify(input)}: ${text}`);
        }
      }
    }),
  );
  return seen;
}

test('LS, Glob and Grep never list or search outside while a directory on their path is swapped with a symlink to outside', async () => {
  const swapper = await startSwapper(path.join(root, 'd'), path.join(root, '.swap'));
  const deadline = Date.now() + ROUNDS_MS;
  let seen: Seen;
  try {
    seen = await clients(() => Date.now() >= deadline);
  } finally {
    await swapper.stop();
  }
  assert.deepEqual(seen.leaks, [], 'no call may return an outside name or content, or name an outside path');
  assert.ok(seen.calls > 50, `the clients made ${seen.calls} calls`);
  assert.ok(seen.listed > 0, 'some calls saw the real directory');
});

test('LS, Glob and Grep stay inside while a sandboxed Bash call swaps the directory', async (t) => {
  const reason = await sandboxUnavailableReason(root);
  if (!requireOrSkip(t, 'bubblewrap', reason)) return;
  const bash = await createBashTool({ workspace: ws, sandbox: true });
  // Inside the workspace: the sandbox hides /tmp and /run, where the checkout may be.
  await copyFile(SWAPPER, path.join(root, 'swapper.py'));
  // The swapper stops when its stdin closes: when sleep ends, so it leaves the pair as it found it.
  const command = `sleep ${ROUNDS_MS / 1000} | python3 swapper.py d .swap`;
  let finished = false;
  const swapping = Promise.resolve(bash.execute({ command }, toolContext())).finally(() => {
    finished = true;
  });
  const seen = await clients(() => finished);
  const swapped = textOf(await swapping);
  assert.match(swapped, /swapped \d+ times/, 'the swap ran inside the sandbox');
  assert.deepEqual(seen.leaks, [], 'no call may return an outside name or content, or name an outside path');
  assert.ok(seen.calls > 50, `the clients made ${seen.calls} calls`);
});
