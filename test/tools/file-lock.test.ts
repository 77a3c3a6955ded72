import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { constants, existsSync, readFileSync, readlinkSync, watch, writeFileSync } from 'node:fs';
import { mkdir, mkdtemp, open, readdir, readFile, realpath, rm, stat, truncate, utimes, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { pino } from 'pino';
import type { ToolContext, ToolDef, ToolResult } from '../../src/core/types.js';
import { createEditTool } from '../../src/tools/edit.js';
import { lockKey, STALE_LOCK_MS, staleLock, takeOver } from '../../src/tools/file-lock.js';
import { removeLeftovers } from '../../src/tools/leftovers.js';
import { lockFileName, tempFileName } from '../../src/tools/own-files.js';
import { createReadTool } from '../../src/tools/read.js';
import { contentVersion, MAX_FILE_BYTES, readAtMost } from '../../src/tools/regular-file.js';
import { Workspace } from '../../src/tools/workspace.js';
import { createWriteTool } from '../../src/tools/write.js';

// The lock files and temporary files of Edit and Write, attacked as a client that also runs
// commands in the workspace would: it can plant anything under a lock's name.
let base: string;
let root: string;
let ws: Workspace;
let Edit: ToolDef;
let Write: ToolDef;
let Read: ToolDef;

const context = (signal = new AbortController().signal): ToolContext => ({ signal, log: pino({ level: 'silent' }), requestId: 'lock' });
const textOf = (result: ToolResult): string => result.content.map((b) => (b.type === 'text' ? b.text : '')).join('\n');
const old = new Date(Date.now() - STALE_LOCK_MS - 60_000);

before(async () => {
  base = await realpath(await mkdtemp(path.join(os.tmpdir(), 'toolport-lock-')));
  root = path.join(base, 'ws');
  await mkdir(root);
  ws = await Workspace.open(root);
  Edit = createEditTool(ws);
  Write = createWriteTool(ws);
  Read = createReadTool(ws);
});

after(() => rm(base, { recursive: true, force: true }));

/** A holder record for a process of this machine and PID namespace, as the server writes it. */
function holder(pid: number): Record<string, unknown> {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return {
    boot: readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim(),
    pidns: readlinkSync('/proc/self/ns/pid'),
    pid,
    start: stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19],
    nonce: '0123456789abcdef',
  };
}

/** The path of the lock file of `name` in the workspace root. */
async function lockOf(name: string): Promise<string> {
  const { dev, ino } = await stat(root, { bigint: true });
  return path.join(root, lockFileName(lockKey(dev, ino, name)));
}

test('a FIFO planted as a lock file is never opened to wait on: an old one is taken over, a fresh one only delays that file', async () => {
  await writeFile(path.join(root, 'fifo.txt'), 'one\n');
  const lock = await lockOf('fifo.txt');
  execFileSync('mkfifo', [lock]);
  await utimes(lock, old, old);
  assert.equal((await Edit.execute({ file_path: 'fifo.txt', old_string: 'one', new_string: 'two' }, context())).isError, false);
  assert.equal(await readFile(path.join(root, 'fifo.txt'), 'utf8'), 'two\n');

  // A fresh FIFO: the Edit waits (and is aborted here), while calls on other files go on: no
  // thread of the pool is stuck on it.
  execFileSync('mkfifo', [lock]);
  const controller = new AbortController();
  const waiting = Promise.resolve(Edit.execute({ file_path: 'fifo.txt', old_string: 'two', new_string: 'three' }, context(controller.signal)));
  await writeFile(path.join(root, 'other.txt'), 'other\n');
  for (let i = 0; i < 8; i += 1) assert.equal((await Read.execute({ file_path: 'other.txt' }, context())).isError, false);
  controller.abort(new Error('enough'));
  await assert.rejects(waiting, /enough/);
  assert.equal(await readFile(path.join(root, 'fifo.txt'), 'utf8'), 'two\n');
  await rm(lock);
});

test('a directory planted as an old lock file is moved aside and the Edit goes on, without spinning', async () => {
  await writeFile(path.join(root, 'dirlock.txt'), 'one\n');
  const lock = await lockOf('dirlock.txt');
  await mkdir(path.join(lock, 'inside'), { recursive: true });
  await utimes(lock, old, old);
  assert.equal((await Edit.execute({ file_path: 'dirlock.txt', old_string: 'one', new_string: 'two' }, context())).isError, false);
  assert.equal(existsSync(lock), false);
});

test('a symlink planted as a lock file is not followed', async () => {
  await writeFile(path.join(root, 'linklock.txt'), 'one\n');
  const lock = await lockOf('linklock.txt');
  await writeFile(path.join(base, 'outside-holder'), JSON.stringify({ host: os.hostname(), pid: 999_999_999, start: '0' }));
  execFileSync('ln', ['-s', path.join(base, 'outside-holder'), lock]);
  // Fresh and not a regular file: judged by age alone, so it is waited for, never read.
  const controller = new AbortController();
  const waiting = Promise.resolve(Edit.execute({ file_path: 'linklock.txt', old_string: 'one', new_string: 'two' }, context(controller.signal)));
  controller.abort(new Error('enough'));
  await assert.rejects(waiting, /enough/);
  execFileSync('touch', ['-h', '-d', '2 minutes ago', lock]);
  assert.equal((await Edit.execute({ file_path: 'linklock.txt', old_string: 'one', new_string: 'two' }, context())).isError, false);
  assert.equal(await readFile(path.join(base, 'outside-holder'), 'utf8'), JSON.stringify({ host: os.hostname(), pid: 999_999_999, start: '0' }));
});

test('Write and Edit refuse names of the form the server gives its own files', async () => {
  for (const name of ['.toolport-0123456789abcdef.lock', '.toolport-0123456789abcdef.01234567.tmp', 'sub/.toolport-fedcba9876543210.76543210.tmp']) {
    const refusal = {
      content: [
        {
          type: 'text',
          text: `Path ${JSON.stringify(name)} has a name of the form the server gives its own temporary and lock files (.toolport-<hex>.tmp or .lock); Write and Edit leave those alone. Choose another name.`,
        },
      ],
      isError: true,
    };
    assert.deepEqual(await Write.execute({ file_path: name, content: 'x' }, context()), refusal);
  }
  await writeFile(path.join(root, '.toolport-0123456789abcdef.01234567.tmp'), 'planted\n');
  assert.equal((await Edit.execute({ file_path: '.toolport-0123456789abcdef.01234567.tmp', old_string: 'planted', new_string: 'x' }, context())).isError, true);
});

test('a Write with expected_version refuses when the file changes while it writes, and keeps that change', async () => {
  const dir = path.join(root, 'versioned-write');
  const file = path.join(dir, 'f.txt');
  await mkdir(dir);
  await writeFile(file, 'one\n');
  let before = false;
  const watcher = watch(dir, (_event, name) => {
    if (before || !name?.endsWith('.tmp') || !existsSync(path.join(dir, name))) return;
    before = true;
    writeFileSync(file, `${readFileSync(file, 'utf8')}appended\n`);
  });
  const result = await Write.execute({ file_path: 'versioned-write/f.txt', content: 'replaced\n', expected_version: contentVersion('one\n') }, context());
  watcher.close();
  if (before) {
    assert.equal(
      textOf(result),
      'Path "versioned-write/f.txt" is not at the expected version: it was changed by someone else while this write ran. Someone changed it since you read it; nothing was written. Read it again and redo the change on the current content.',
    );
    assert.equal(await readFile(file, 'utf8'), 'one\nappended\n');
  } else {
    assert.equal(result.isError, false);
  }
});

test('readAtMost gives up past its limit, whatever size the file reported', async () => {
  const file = path.join(base, 'sparse');
  await writeFile(file, '');
  const handle = await open(file, 'r+');
  try {
    // Grown after any size check: a sparse file far over the limit.
    await truncate(file, 4 * MAX_FILE_BYTES);
    assert.equal(await readAtMost(handle, MAX_FILE_BYTES), undefined);
    await truncate(file, 10);
    assert.equal((await readAtMost(handle, MAX_FILE_BYTES))?.length, 0, 'reads on from where it stopped');
  } finally {
    await handle.close();
  }
});

test('the start-up sweep keeps a live writer\'s lock and temporary file, and removes a dead one\'s', async () => {
  const dir = path.join(root, 'sweep');
  await mkdir(dir);
  const live = 'a'.repeat(64);
  const dead = 'b'.repeat(64);
  // A lock held by this very process counts as live; one older than the stale limit as dead.
  await writeFile(path.join(dir, lockFileName(live)), JSON.stringify(holder(process.pid)));
  const liveTemp = tempFileName(live);
  await writeFile(path.join(dir, liveTemp), 'in progress');
  await writeFile(path.join(dir, lockFileName(dead)), '');
  await utimes(path.join(dir, lockFileName(dead)), old, old);
  const deadTemp = tempFileName(dead);
  await writeFile(path.join(dir, deadTemp), 'left behind');
  const orphan = tempFileName('c'.repeat(64));
  await writeFile(path.join(dir, orphan), 'no lock at all');
  await writeFile(path.join(dir, 'client.txt'), 'a client file');

  const report = await removeLeftovers(ws);
  assert.deepEqual((await readdir(dir)).sort(), [lockFileName(live), liveTemp, 'client.txt'].sort());
  assert.ok(report.removed >= 3);
});

test('a full disk fails the Edit cleanly: no lock file left, no descriptor left for the garbage collector', async (t) => {
  const small = path.join(base, 'small');
  await mkdir(small);
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', small], { stdio: 'ignore' });
  } catch {
    t.skip('cannot mount a small tmpfs here (needs root)');
    return;
  }
  try {
    const dir = path.join(small, 'ws');
    await mkdir(dir);
    await writeFile(path.join(dir, 'f.txt'), 'one\n');
    // Fill the file system to the last block.
    try {
      await writeFile(path.join(small, 'filler'), Buffer.alloc(1024 * 1024));
    } catch {
      // ENOSPC: full, as intended.
    }
    const full = await Workspace.open(dir);
    t.after(() => full.close());
    const FullEdit = createEditTool(full);
    const result = await FullEdit.execute({ file_path: 'f.txt', old_string: 'one', new_string: 'two' }, context());
    assert.equal(result.isError, true);
    assert.match(textOf(result), /no space left on the device/);
    assert.deepEqual((await readdir(dir)).filter((n) => n.startsWith('.toolport-')), []);
    // Node 26 turns a FileHandle collected while open into an uncaught error: collect now.
    setFlagsFromString('--expose-gc');
    (runInNewContext('gc') as () => void)();
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(await readFile(path.join(dir, 'f.txt'), 'utf8'), 'one\n');
  } finally {
    // Lazily: the workspace's root descriptor closes after this test.
    execFileSync('umount', ['-l', small]);
  }
});

test('a young lock whose holder on this machine died is taken over at once; an old one of a live holder is not', async () => {
  await writeFile(path.join(root, 'dead.txt'), 'one\n');
  const lock = await lockOf('dead.txt');
  // A process that has exited: its pid is free (or reused, with another start time).
  const child = execFileSync('bash', ['-c', 'echo $$']).toString().trim();
  await writeFile(lock, JSON.stringify({ ...holder(process.pid), pid: Number(child), start: '1' }));
  assert.equal((await Edit.execute({ file_path: 'dead.txt', old_string: 'one', new_string: 'two' }, context())).isError, false);

  // This very process holds it (as another server in this PID namespace would), however old.
  await writeFile(lock, JSON.stringify(holder(process.pid)));
  await utimes(lock, old, old);
  const controller = new AbortController();
  const waiting = Promise.resolve(Edit.execute({ file_path: 'dead.txt', old_string: 'two', new_string: 'three' }, context(controller.signal)));
  await waitForLockWait(lock);
  controller.abort(new Error('enough'));
  await assert.rejects(waiting, /enough/);
  assert.equal(await readFile(path.join(root, 'dead.txt'), 'utf8'), 'two\n');
  await rm(lock);
});

/** Resolves once the lock at `path` has been looked at by a waiting Edit (its access time moved). */
async function waitForLockWait(lock: string): Promise<void> {
  const before = (await stat(lock)).atimeMs;
  const deadline = Date.now() + 5_000;
  while ((await stat(lock)).atimeMs === before && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5));
}

test('a takeover that finds a fresh lock where it judged a stale one puts the fresh one back', async () => {
  await writeFile(path.join(root, 'taken.txt'), 'x\n');
  const lock = await lockOf('taken.txt');
  const { dev, ino } = await stat(root, { bigint: true });
  const key = lockKey(dev, ino, 'taken.txt');
  const dir = await open(root, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    // A dead holder's lock, judged stale...
    const child = execFileSync('bash', ['-c', 'echo $$']).toString().trim();
    await writeFile(lock, JSON.stringify({ ...holder(process.pid), pid: Number(child), start: '1', nonce: 'aaaaaaaaaaaaaaaa' }));
    const stale = await staleLock(dir, path.basename(lock));
    assert.ok(stale !== undefined);
    // ...is replaced by another server's fresh lock before this one moves it aside.
    await rm(lock);
    await writeFile(lock, JSON.stringify({ ...holder(process.pid), nonce: 'bbbbbbbbbbbbbbbb' }));
    assert.equal(await takeOver(dir, path.basename(lock), key, stale), false);
    assert.equal(JSON.parse(await readFile(lock, 'utf8')).nonce, 'bbbbbbbbbbbbbbbb');
    assert.deepEqual((await readdir(root)).filter((n) => n.startsWith(`.toolport-${key.slice(0, 16)}.`) && n.endsWith('.tmp')), []);
  } finally {
    await dir.close();
    await rm(lock, { force: true });
  }
});
