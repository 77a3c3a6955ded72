import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { readdir, realpath, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { Cleanups, temporaryDirectory, withTemporaryDirectory } from './workspace.js';

test('temporaryDirectory makes an empty directory with the prefix in the parent, by its real path, and removes it with its files when the cleanups run', async () => {
  const cleanups = new Cleanups();
  const dir = await temporaryDirectory(cleanups, 'toolport-support-');
  assert.equal(path.dirname(dir), await realpath(tmpdir()));
  assert.match(path.basename(dir), /^toolport-support-/);
  assert.equal(dir, await realpath(dir));
  assert.deepEqual(await readdir(dir), []);
  await writeFile(path.join(dir, 'left.txt'), 'behind');
  await cleanups.run();
  assert.equal(existsSync(dir), false);
});

test('Cleanups runs what it holds last registered first, and only once', async () => {
  const cleanups = new Cleanups();
  const ran: string[] = [];
  cleanups.after(() => void ran.push('first'));
  cleanups.after(async () => void ran.push('second'));
  await cleanups.run();
  await cleanups.run();
  assert.deepEqual(ran, ['second', 'first']);
});

test('withTemporaryDirectory gives fn a new directory and removes it once fn resolves, returning what fn returned', async () => {
  let seen = '';
  const result = await withTemporaryDirectory('toolport-support-', async (dir) => {
    seen = dir;
    await writeFile(path.join(dir, 'a.txt'), 'a');
    return 'done';
  });
  assert.equal(result, 'done');
  assert.notEqual(seen, '');
  assert.equal(existsSync(seen), false);
});

test('withTemporaryDirectory removes the directory when fn rejects, and rejects with its error', async () => {
  let seen = '';
  await assert.rejects(
    withTemporaryDirectory('toolport-support-', async (dir) => {
      seen = dir;
      throw new Error('failed on purpose');
    }),
    { message: 'failed on purpose' },
  );
  assert.notEqual(seen, '');
  assert.equal(existsSync(seen), false);
});
