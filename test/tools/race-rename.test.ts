import assert from 'node:assert/strict';
import { copyFile, lstat, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, test } from 'node:test';
import type { ToolDef, ToolResult } from '#src/core/types.js';
import { createBashTool } from '#src/tools/bash.js';
import { createEditTool } from '#src/tools/edit.js';
import { sandboxUnavailableReason } from '#src/os/sandbox/bubblewrap.js';
import { Workspace } from '#src/os/fs/workspace.js';
import { createWriteTool } from '#src/tools/write.js';
import { startTempSwapper } from '../support/swapper.js';
import { toolContext } from '../support/tool-context.js';
import { temporaryDirectory } from '../support/workspace.js';

// The attack: another process (a command in the workspace) replaces the temporary file of a
// Write or Edit with a symlink to a file outside just before the rename, so that the rename puts
// the symlink where the file was. A call may fail then, but it may never report success unless
// the file is a regular file holding exactly the new content; nothing outside may change.
const ROUNDS = 100;
const SWAPPER = path.resolve(import.meta.dirname, '../fixtures/swapper.py');
const SECRET = 'SECRET-OUTSIDE\n';

const base = await temporaryDirectory({ after }, 'toolport-race-rename-');
let root: string;
let outside: string;
let ws: Workspace;
let Write: ToolDef;
let Edit: ToolDef;

const textOf = (result: ToolResult): string => result.content.map((b) => (b.type === 'text' ? b.text : '')).join('\n');

before(async () => {
  root = path.join(base, 'ws');
  outside = path.join(base, 'outside.txt');
  await mkdir(path.join(root, 'd'), { recursive: true });
  await writeFile(outside, SECRET);
  ws = await Workspace.open(root);
  Write = createWriteTool(ws);
  Edit = createEditTool(ws);
});

interface Tally {
  successes: number;
  refusals: number;
  falseSuccesses: string[];
}

/** Runs ROUNDS Writes and ROUNDS Edits of `d/<name>` while the attacker runs, and checks every success against the file. */
async function attackRounds(name: string): Promise<Tally> {
  const file = path.join(root, 'd', name);
  const tally: Tally = { successes: 0, refusals: 0, falseSuccesses: [] };
  for (let round = 0; round < 2 * ROUNDS; round += 1) {
    // Fresh each round: a refused call may have left the attacker's symlink in its place.
    await rm(file, { force: true });
    await writeFile(file, 'original line\n');
    const edit = round % 2 === 1;
    const expected = edit ? `edited ${round}\n` : `written ${round}\n`;
    const result = edit
      ? await Edit.execute({ file_path: `d/${name}`, old_string: 'original line', new_string: `edited ${round}` }, toolContext())
      : await Write.execute({ file_path: `d/${name}`, content: expected }, toolContext());
    if (result.isError) {
      tally.refusals += 1;
      assert.match(textOf(result), /another process replaced the server's temporary file|was changed by another process while this write ran/, textOf(result));
      continue;
    }
    tally.successes += 1;
    const stats = await lstat(file);
    const content = stats.isFile() ? await readFile(file, 'utf8') : undefined;
    if (content !== expected)
      tally.falseSuccesses.push(`${edit ? 'Edit' : 'Write'} round ${round}: ${stats.isSymbolicLink() ? 'a symlink' : JSON.stringify(content)}`);
  }
  return tally;
}

test('Write and Edit never report success while another process swaps their temporary file for a symlink to outside', async (t) => {
  const swapper = await startTempSwapper(path.join(root, 'd'), outside);
  let tally: Tally;
  try {
    tally = await attackRounds('host.txt');
  } finally {
    const said = await swapper.stop();
    t.diagnostic(said.trim().split('\n').at(-1) ?? '');
  }
  t.diagnostic(`${tally.successes} successes, ${tally.refusals} refusals`);
  assert.deepEqual(tally.falseSuccesses, []);
  assert.ok(tally.refusals >= 10, `the attack must land to prove anything: ${tally.refusals} of ${2 * ROUNDS} calls were refused`);
  assert.equal(await readFile(outside, 'utf8'), SECRET, 'nothing outside is written');
});

test('Write and Edit never report success while a sandboxed Bash command swaps their temporary file for a symlink', async (t) => {
  const reason = await sandboxUnavailableReason(root);
  assert.equal(reason, undefined, `bubblewrap must work here for this test: ${reason}`);
  const bash = await createBashTool({ workspace: ws, sandbox: true });
  await copyFile(SWAPPER, path.join(root, 'swapper.py'));
  // Runs until the rounds are done: aborting the call ends its sandbox, and the swapper with it.
  const controller = new AbortController();
  let finished = false;
  const swapping = Promise.resolve(
    bash.execute({ command: `python3 swapper.py --temp d ${outside} 600`, timeout: 600_000 }, { ...toolContext(), signal: controller.signal }),
  )
    .then(
      (result) => textOf(result),
      (err: unknown) => String(err),
    )
    .finally(() => {
      finished = true;
    });
  let tally: Tally;
  try {
    // Until the swapper watches: a probe Write it gets in the way of (refused, or its file made a symlink).
    const probe = path.join(root, 'd', 'probe.txt');
    const deadline = Date.now() + 10_000;
    for (;;) {
      assert.ok(!finished && Date.now() < deadline, `the sandboxed swapper did not start${finished ? `: ${await swapping}` : ''}`);
      await rm(probe, { force: true });
      const result = await Write.execute({ file_path: 'd/probe.txt', content: 'probe\n' }, toolContext());
      if (result.isError || (await lstat(probe)).isSymbolicLink()) break;
    }
    tally = await attackRounds('sandboxed.txt');
  } finally {
    controller.abort(new Error('rounds done'));
    await swapping;
  }
  t.diagnostic(`${tally.successes} successes, ${tally.refusals} refusals`);
  assert.deepEqual(tally.falseSuccesses, []);
  assert.ok(tally.refusals >= 10, `the attack must land to prove anything: ${tally.refusals} of ${2 * ROUNDS} calls were refused`);
  assert.equal(await readFile(outside, 'utf8'), SECRET, 'nothing outside is written');
});
