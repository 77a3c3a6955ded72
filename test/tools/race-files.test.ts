import assert from 'node:assert/strict';
import { copyFile, lstat, mkdir, readdir, readFile, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, test } from 'node:test';
import type { ToolDef, ToolResult } from '#src/core/types.js';
import { createBashTool } from '#src/tools/bash.js';
import { createEditTool } from '#src/tools/edit.js';
import { createReadTool } from '#src/tools/read.js';
import { sandboxUnavailableReason } from '#src/os/sandbox/bubblewrap.js';
import { Workspace } from '#src/os/fs/workspace.js';
import { createWriteTool } from '#src/tools/write.js';
import { startSwapper } from '../support/swapper.js';
import { toolContext } from '../support/tool-context.js';
import { requireOrSkip } from '../support/require.js';
import { temporaryDirectory } from '../support/workspace.js';

// The attack: `ws/d` is a real directory and `ws/.swap` a symlink to a directory outside holding
// files of the same names; another process exchanges the two entries in a tight loop while
// clients call the file tools on paths through `d`. Every call must act on the real `d` or be
// refused: nothing outside is read, created or changed, and no message names the outside.
const ROUNDS_MS = 2_000;
const MAX_CALLS = 4_000;
const CLIENTS = 6;
const SECRET = 'SECRET-OUTSIDE';
const SWAPPER = path.resolve(import.meta.dirname, '../fixtures/swapper.py');

const base = await temporaryDirectory({ after }, 'toolport-race-');
let root: string;
let outside: string;
let tools: { Read: ToolDef; Write: ToolDef; Edit: ToolDef };

const textOf = (result: ToolResult): string => result.content.map((b) => (b.type === 'text' ? b.text : '[image]')).join('\n');

/** Every file below `dir` with its content and modification time, symlinks not followed. */
async function snapshot(dir: string): Promise<Record<string, string>> {
  const found: Record<string, string> = {};
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    const full = path.join(entry.parentPath, entry.name);
    const stats = await lstat(full);
    found[path.relative(dir, full)] = stats.isFile() ? `${await readFile(full, 'utf8')}@${stats.mtimeMs}` : stats.isDirectory() ? 'dir' : 'other';
  }
  return found;
}

before(async () => {
  root = path.join(base, 'ws');
  outside = path.join(base, 'OUTSIDE-zone');
  for (const dir of [path.join(root, 'd', 'sub'), path.join(outside, 'sub')]) await mkdir(dir, { recursive: true });
  await writeFile(path.join(root, 'd', 'f.txt'), 'inside\n');
  await writeFile(path.join(root, 'd', 'sub', 'g.txt'), 'inside too\n');
  await writeFile(path.join(root, 'd', 'e.txt'), 'x\n');
  await writeFile(path.join(outside, 'f.txt'), `${SECRET}\n`);
  await writeFile(path.join(outside, 'sub', 'g.txt'), `${SECRET}\n`);
  await writeFile(path.join(outside, 'e.txt'), 'x\n');
  await symlink(outside, path.join(root, '.swap'));
  const ws = await Workspace.open(root);
  tools = { Read: createReadTool(ws), Write: createWriteTool(ws), Edit: createEditTool(ws) };
});

/** Clients calling Read, Write and Edit through `d` until `done()` or the call budget; what leaked. */
async function clients(done: () => boolean): Promise<{ calls: number; leaks: string[] }> {
  const seen = { calls: 0, leaks: [] as string[] };
  await Promise.all(
    Array.from({ length: CLIENTS }, async (_, client) => {
      for (let i = 0; !done() && seen.calls < MAX_CALLS; i += 1) {
        const calls: [ToolDef, Record<string, unknown>][] = [
          [tools.Read, { file_path: 'd/f.txt' }],
          [tools.Read, { file_path: path.join(root, 'd', 'sub', 'g.txt') }],
          [tools.Write, { file_path: `d/new-${client}-${i}.txt`, content: 'written\n' }],
          [tools.Write, { file_path: `d/sub/deeper-${client}/w.txt`, content: 'written\n' }],
          [tools.Edit, { file_path: 'd/e.txt', old_string: i % 2 ? 'y' : 'x', new_string: i % 2 ? 'x' : 'y' }],
        ];
        const [tool, input] = calls[(client + i) % calls.length]!;
        const text = textOf(await tool.execute(input, toolContext()));
        seen.calls += 1;
        if (text.includes(SECRET) || text.includes('OUTSIDE-zone')) seen.leaks.push(`${tool.name} ${JSON.stringify(input)}: ${text}`);
      }
    }),
  );
  return seen;
}

async function assertNothingEscaped(outsideBefore: Record<string, string>, seen: { calls: number; leaks: string[] }): Promise<void> {
  assert.deepEqual(seen.leaks, [], 'no call may return outside content or name an outside path');
  assert.deepEqual(await snapshot(outside), outsideBefore, 'nothing outside may be created or changed');
  const leftovers = Object.keys(await snapshot(root)).filter((name) => /\.toolport-[0-9a-f]+\.(tmp|lock)$/.test(name));
  assert.deepEqual(leftovers, [], 'no temporary or lock file may be left behind');
  assert.ok(seen.calls > 100, `the clients made ${seen.calls} calls`);
}

test('Read, Write and Edit never act outside while a directory on their path is swapped with a symlink to outside', async () => {
  const outsideBefore = await snapshot(outside);
  const swapper = await startSwapper(path.join(root, 'd'), path.join(root, '.swap'));
  const deadline = Date.now() + ROUNDS_MS;
  let seen: { calls: number; leaks: string[] };
  try {
    seen = await clients(() => Date.now() >= deadline);
  } finally {
    await swapper.stop();
  }
  await assertNothingEscaped(outsideBefore, seen);
});

test('Read, Write and Edit never act outside while a sandboxed Bash call does the swapping', async (t) => {
  const reason = await sandboxUnavailableReason(root);
  if (!requireOrSkip(t, 'bubblewrap', reason)) return;
  const outsideBefore = await snapshot(outside);
  const bash = await createBashTool({ workspace: await Workspace.open(root), sandbox: true });
  // The sandbox binds the workspace writable, so the swap runs there while the file tools run outside it.
  let finished = false;
  // Inside the workspace: the sandbox hides /tmp and /run, where the checkout may be.
  await copyFile(SWAPPER, path.join(root, 'swapper.py'));
  const swapping = Promise.resolve(bash.execute({ command: `python3 swapper.py d .swap ${ROUNDS_MS / 1000}` }, toolContext())).finally(() => {
    finished = true;
  });
  const seen = await clients(() => finished);
  assert.match(textOf(await swapping), /swapped \d+ times/, 'the swap ran inside the sandbox');
  await assertNothingEscaped(outsideBefore, seen);
});
