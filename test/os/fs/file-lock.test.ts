import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readFileSync, readlinkSync, watch, writeFileSync } from 'node:fs';
import { mkdir, open, readdir, readFile, stat, symlink, truncate, utimes, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { ToolContext, ToolDef, ToolResult } from '#src/core/types.js';
import { createEditTool } from '#src/tools/edit.js';
import { FileLockLost, lockKey, withFileLock } from '#src/os/fs/file-lock.js';
import { flockTesting, flockUnavailableReason } from '#src/os/fs/flock.js';
import { removeLeftovers } from '#src/os/fs/leftovers.js';
import { lockFileName, tempFileName } from '#src/os/fs/own-files.js';
import { contentVersion, MAX_FILE_BYTES, readAtMost } from '#src/os/fs/regular-file.js';
import { Workspace } from '#src/os/fs/workspace.js';
import { createWriteTool } from '#src/tools/write.js';
import { toolContext } from '../../support/tool-context.js';
import { skipWithout } from '../../support/require.js';
import { temporaryDirectory } from '../../support/workspace.js';

// The lock files and temporary files of Edit and Write, attacked as a client that also runs
// commands in the workspace would: it can plant anything under a lock's name.
const base = await temporaryDirectory({ after }, 'toolport-lock-');
let root: string;
let ws: Workspace;
let Edit: ToolDef;
let Write: ToolDef;

const textOf = (result: ToolResult): string => result.content.map((b) => (b.type === 'text' ? b.text : '')).join('\n');
const FUTURE = new Date('2099-01-01T00:00:00Z');
// Planted locks must not delay a call: one that waits this long (the old stale limit was 30 s) fails the test.
const PROMPTLY_MS = 5_000;
const prompt = (): ToolContext => toolContext(AbortSignal.timeout(PROMPTLY_MS));
const SRC = path.resolve(import.meta.dirname, '../../../src');

before(async () => {
  root = path.join(base, 'ws');
  await mkdir(root);
  ws = await Workspace.open(root);
  Edit = createEditTool(ws);
  Write = createWriteTool(ws);
});

/** A holder record for a process of this machine and PID namespace, as earlier servers wrote it. */
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
    assert.deepEqual(await Write.execute({ file_path: name, content: 'x' }, toolContext()), refusal);
  }
  await writeFile(path.join(root, '.toolport-0123456789abcdef.01234567.tmp'), 'planted\n');
  assert.equal(
    (await Edit.execute({ file_path: '.toolport-0123456789abcdef.01234567.tmp', old_string: 'planted', new_string: 'x' }, toolContext())).isError,
    true,
  );
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
  const result = await Write.execute({ file_path: 'versioned-write/f.txt', content: 'replaced\n', expected_version: contentVersion('one\n') }, toolContext());
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

test('a full disk fails the Edit cleanly: no lock file left, no descriptor left for the garbage collector', async (t) => {
  const small = path.join(base, 'small');
  await mkdir(small);
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', small], { stdio: 'ignore' });
  } catch (err) {
    skipWithout(t, 'mounting a small tmpfs (needs root)', (err as Error).message);
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
    const result = await FullEdit.execute({ file_path: 'f.txt', old_string: 'one', new_string: 'two' }, toolContext());
    assert.equal(result.isError, true);
    assert.match(textOf(result), /no space left on the device/);
    assert.deepEqual(
      (await readdir(dir)).filter((n) => n.startsWith('.toolport-')),
      [],
    );
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

/** Every form of lock file a client could plant, each beside a file of its own: the name to use with it. */
async function plantLocks(dir: string): Promise<string[]> {
  const { dev, ino } = await stat(dir, { bigint: true });
  const plant = async (name: string, make: (lock: string) => Promise<void>): Promise<string> => {
    await writeFile(path.join(dir, name), 'one\n');
    await make(path.join(dir, lockFileName(lockKey(dev, ino, name))));
    return name;
  };
  const record = async (lock: string, content: Record<string, unknown>): Promise<void> => {
    await writeFile(lock, JSON.stringify(content));
    await utimes(lock, FUTURE, FUTURE);
  };
  return Promise.all([
    plant('future-file.txt', async (lock) => {
      await writeFile(lock, '');
      await utimes(lock, FUTURE, FUTURE);
    }),
    plant('future-symlink.txt', async (lock) => {
      await symlink(path.join(base, 'outside-holder'), lock);
      execFileSync('touch', ['-h', '-d', '2099-01-01', lock]);
    }),
    plant('fifo.txt', async (lock) => {
      execFileSync('mkfifo', [lock]);
    }),
    plant('future-directory.txt', async (lock) => {
      await mkdir(path.join(lock, 'inside'), { recursive: true });
      await utimes(lock, FUTURE, FUTURE);
    }),
    plant('pid-one.txt', (lock) => record(lock, holder(1))),
    plant('own-pid.txt', (lock) => record(lock, holder(process.pid))),
    plant('foreign.txt', (lock) => record(lock, { ...holder(process.pid), boot: 'another-boot', pidns: 'pid:[1]', host: 'elsewhere' })),
  ]);
}

/** Edits then Writes each named file through `tools`, each within PROMPTLY_MS; what each call said. */
async function useAll(tools: { Edit: ToolDef; Write: ToolDef }, names: readonly string[]): Promise<string[]> {
  const said: string[] = [];
  for (const name of names) {
    const edit = await tools.Edit.execute({ file_path: name, old_string: 'one', new_string: 'two' }, prompt());
    const write = await tools.Write.execute({ file_path: name, content: 'three\n' }, prompt());
    said.push(`${name}: ${edit.isError ? textOf(edit) : 'edited'}, ${write.isError ? textOf(write) : 'written'}`);
  }
  return said;
}

test('no lock file planted in the workspace delays an Edit or a Write: future-dated, symlink, FIFO, directory, or a record naming pid 1, this server or another machine', async () => {
  const dir = path.join(root, 'planted');
  await mkdir(dir);
  await writeFile(path.join(base, 'outside-holder'), JSON.stringify({ pid: 1 }));
  const names = (await plantLocks(dir)).map((name) => `planted/${name}`);
  assert.deepEqual(
    await useAll({ Edit, Write }, names),
    names.map((name) => `${name}: edited, written`),
  );
  for (const name of names) assert.equal(await readFile(path.join(root, name), 'utf8'), 'three\n');
  assert.equal(readFileSync(path.join(base, 'outside-holder'), 'utf8'), JSON.stringify({ pid: 1 }), 'the symlink is not followed');
});

test('planted lock files delay nothing after a restart either: a new workspace in this process, and a new server process', async () => {
  const dir = path.join(root, 'planted-restart');
  await mkdir(dir);
  await writeFile(path.join(base, 'outside-holder'), '{}');
  const names = (await plantLocks(dir)).map((name) => `planted-restart/${name}`);
  const reopened = await Workspace.open(root);
  try {
    assert.deepEqual(
      await useAll({ Edit: createEditTool(reopened), Write: createWriteTool(reopened) }, names),
      names.map((name) => `${name}: edited, written`),
    );
  } finally {
    await reopened.close();
  }
  for (const name of names) await writeFile(path.join(root, name), 'one\n');
  // Another process, as a restarted server: the same calls, with the same deadline.
  const script = `
    const { Workspace } = await import(${JSON.stringify(path.join(SRC, 'os/fs/workspace.ts'))});
    const { createEditTool } = await import(${JSON.stringify(path.join(SRC, 'tools/edit.ts'))});
    const { createWriteTool } = await import(${JSON.stringify(path.join(SRC, 'tools/write.ts'))});
    const ws = await Workspace.open(${JSON.stringify(root)});
    const Edit = createEditTool(ws), Write = createWriteTool(ws);
    const context = () => ({ signal: AbortSignal.timeout(${PROMPTLY_MS}), log: { info() {}, warn() {}, debug() {}, error() {} }, requestId: 'restart' });
    const said = [];
    for (const name of ${JSON.stringify(names)}) {
      const edit = await Edit.execute({ file_path: name, old_string: 'one', new_string: 'two' }, context());
      const write = await Write.execute({ file_path: name, content: 'three\\n' }, context());
      said.push(name + ': ' + (edit.isError ? edit.content[0].text : 'edited') + ', ' + (write.isError ? write.content[0].text : 'written'));
    }
    process.stdout.write(JSON.stringify(said));
    process.exit(0);
  `;
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  const [code] = (await once(child, 'exit')) as [number | null];
  assert.equal(code, 0, out);
  assert.deepEqual(
    JSON.parse(out),
    names.map((name) => `${name}: edited, written`),
  );
  for (const name of names) assert.equal(await readFile(path.join(root, name), 'utf8'), 'three\n');
});

/** Starts `flock(1)` holding an exclusive lock on `file` until its stdin closes; resolves once it holds it. */
async function holdFlock(file: string): Promise<{ release(): Promise<void>; kill(): Promise<void> }> {
  const child = spawn('flock', ['--exclusive', file, 'sh', '-c', 'echo held; exec cat >/dev/null'], { stdio: ['pipe', 'pipe', 'inherit'] });
  child.stdout.setEncoding('utf8');
  const [first] = (await once(child.stdout, 'data')) as [string];
  assert.equal(first.trim(), 'held');
  const exited = once(child, 'exit');
  return {
    async release() {
      child.stdin.end();
      await exited;
    },
    async kill() {
      // flock(1) dies at once; the command it runs shares the lock's open file and ends with its stdin.
      child.kill('SIGKILL');
      await exited;
      child.stdin.destroy();
    },
  };
}

test("a process holding the file's flock delays Edit and Write; once it is killed they go on at once", async () => {
  await writeFile(path.join(root, 'held.txt'), 'one\n');
  const holder = await holdFlock(path.join(root, 'held.txt'));
  const controller = new AbortController();
  const waiting = Promise.resolve(Edit.execute({ file_path: 'held.txt', old_string: 'one', new_string: 'two' }, toolContext(controller.signal)));
  let settled = false;
  void waiting.finally(() => (settled = true));
  // A bounded look: an Edit that does not wait would have finished within it.
  for (let i = 0; i < 20 && !settled; i += 1) await new Promise((resolve) => setTimeout(resolve, 10));
  assert.equal(settled, false, 'the Edit waits for the holder');
  assert.equal(await readFile(path.join(root, 'held.txt'), 'utf8'), 'one\n');
  await holder.kill();
  assert.equal((await waiting).isError, false);
  assert.equal(await readFile(path.join(root, 'held.txt'), 'utf8'), 'two\n');
  assert.equal((await Write.execute({ file_path: 'held.txt', content: 'three\n' }, prompt())).isError, false);
});

test('a file being created is locked through its directory: a Write waits while another process holds the directory', async () => {
  const dir = path.join(root, 'creating');
  await mkdir(dir);
  const holder = await holdFlock(dir);
  let settled = false;
  const waiting = Promise.resolve(Write.execute({ file_path: 'creating/new.txt', content: 'new\n' }, toolContext()));
  void waiting.finally(() => (settled = true));
  for (let i = 0; i < 20 && !settled; i += 1) await new Promise((resolve) => setTimeout(resolve, 10));
  assert.equal(settled, false, 'the Write waits for the holder');
  assert.equal(existsSync(path.join(dir, 'new.txt')), false);
  await holder.release();
  assert.equal((await waiting).isError, false);
  assert.equal(await readFile(path.join(dir, 'new.txt'), 'utf8'), 'new\n');
});

test('the lock helper runs here (perl), and takes flocks that exclude another process', async () => {
  assert.equal(await flockUnavailableReason(ws.rootDir), undefined);
});

test('a lock lost while held (its helper died) is reported to the writer, which checks just before its rename', async () => {
  await writeFile(path.join(root, 'lost.txt'), 'one\n');
  const dir = await open(root, 'r');
  try {
    await assert.rejects(
      withFileLock(dir, 'lost.txt', new AbortController().signal, async (lock) => {
        flockTesting.killHelper();
        const deadline = Date.now() + 5_000;
        // Until the server has seen the helper go.
        for (;;) {
          lock.assertHeld();
          assert.ok(Date.now() < deadline, "the helper's death was not noticed");
          await new Promise((resolve) => setTimeout(resolve, 5));
        }
      }),
      (err: unknown) => err instanceof FileLockLost,
    );
  } finally {
    await dir.close();
  }
  // The next lock starts a new helper.
  assert.equal((await Edit.execute({ file_path: 'lost.txt', old_string: 'one', new_string: 'two' }, prompt())).isError, false);
});

test('without perl, Edits and Writes still run, ordered within the process, and the reason is given', async (t) => {
  flockTesting.usePerl(path.join(base, 'no-such-perl'));
  t.after(() => flockTesting.usePerl('perl'));
  assert.match((await flockUnavailableReason(ws.rootDir)) ?? '', /^the lock helper \(.*no-such-perl\) cannot run: spawn .* ENOENT$/);
  await writeFile(path.join(root, 'no-perl.txt'), 'line 0\nline 1\nline 2\nline 3\n');
  const results = await Promise.all(
    [0, 1, 2, 3].map((i) => Edit.execute({ file_path: 'no-perl.txt', old_string: `line ${i}`, new_string: `edited ${i}` }, prompt())),
  );
  assert.deepEqual(results.filter((r) => r.isError).map(textOf), []);
  assert.equal(await readFile(path.join(root, 'no-perl.txt'), 'utf8'), 'edited 0\nedited 1\nedited 2\nedited 3\n');
});

test("the start-up sweep keeps a live writer's temporary file (it holds its flock), and removes a dead one's and every old lock file", async () => {
  const dir = path.join(root, 'sweep');
  await mkdir(dir);
  const liveTemp = tempFileName('a'.repeat(64));
  await writeFile(path.join(dir, liveTemp), 'in progress');
  const writer = await holdFlock(path.join(dir, liveTemp));
  try {
    const deadTemp = tempFileName('b'.repeat(64));
    await writeFile(path.join(dir, deadTemp), 'left behind');
    // An old server's lock file, however fresh and whoever it names.
    await writeFile(path.join(dir, lockFileName('c'.repeat(64))), JSON.stringify(holder(process.pid)));
    await writeFile(path.join(dir, 'client.txt'), 'a client file');
    const report = await removeLeftovers(ws);
    assert.deepEqual((await readdir(dir)).sort(), [liveTemp, 'client.txt'].sort());
    assert.ok(report.removed >= 2);
  } finally {
    await writer.release();
  }
  await removeLeftovers(ws);
  assert.deepEqual(await readdir(dir), ['client.txt']);
});
