import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { chmod, mkdir, readdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { test } from 'node:test';
import { PrivateDirectories } from '#src/os/sandbox/private-dirs.js';
import { temporaryDirectory } from '../../support/workspace.js';

test('each call gets a directory of its own, mode 0700, removed with what it left, even a directory without its write bit', async (t) => {
  const parent = await temporaryDirectory(t, 'toolport-private-');
  const dirs = await PrivateDirectories.open(parent);
  const a = await dirs.create();
  const b = await dirs.create();
  assert.notEqual(a.path, b.path);
  assert.ok(a.path.startsWith(`${dirs.base}/`));
  await mkdir(path.join(a.path, 'locked'));
  await writeFile(path.join(a.path, 'locked', 'file'), 'x');
  await chmod(path.join(a.path, 'locked'), 0o500);
  await a.remove();
  assert.equal(existsSync(a.path), false);
  await dirs.close();
  assert.equal(existsSync(dirs.base), false);
  await assert.rejects(dirs.create(), { message: 'the private directories were closed' });
});

test("a start removes the private directories of servers that are gone, and leaves a live server's", async (t) => {
  const parent = await temporaryDirectory(t, 'toolport-private-');
  // No process has pid 2^22 + 1 (above the kernel's pid_max); this process is alive.
  await mkdir(path.join(parent, 'toolport-calls-4194305-abc', 'call-x'), { recursive: true });
  await mkdir(path.join(parent, `toolport-calls-${process.pid}-def`));
  await mkdir(path.join(parent, 'unrelated'));
  const dirs = await PrivateDirectories.open(parent);
  t.after(() => dirs.close());
  const left = (await readdir(parent)).sort();
  assert.deepEqual(left, [path.basename(dirs.base), `toolport-calls-${process.pid}-def`, 'unrelated'].sort());
});
