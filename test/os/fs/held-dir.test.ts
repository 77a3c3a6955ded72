import { realpathSync } from 'node:fs';
import { descriptorsUnder } from '../../support/descriptors.js';
import assert from 'node:assert/strict';
import { mkdir, open, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { CHECKPOINT_LEVELS, HeldTree, listHeld, MAX_HELD_DIRECTORIES } from '#src/os/fs/held-dir.js';
import { temporaryDirectory } from '../../support/workspace.js';

const base = await temporaryDirectory({ after }, 'toolport-held-dir-');
// The descriptors open on this test's directories only: the process (the loader, the test runner) opens and closes others of its own at any time.
const openDescriptors = (): number => descriptorsUnder(realpathSync(base));
const DEPTH = 400;
const chain = (depth: number): string[] => Array.from({ length: depth }, () => 'a');

before(async () => {
  await mkdir(path.join(base, ...chain(DEPTH)), { recursive: true });
  await mkdir(path.join(base, 'outside'));
  await writeFile(path.join(base, 'outside', 'secret'), '');
  await symlink(path.join(base, 'outside'), path.join(base, 'a', 'link'));
  await writeFile(path.join(base, 'a', 'file'), '');
});

/** A tree over `base` and a count of the directories it opens. */
async function tree(): Promise<{ tree: HeldTree; opens: () => number; mayOpen: () => boolean; close: () => Promise<void> }> {
  const start = await open(base, 'r');
  const held = new HeldTree(start);
  let opens = 0;
  return {
    tree: held,
    opens: () => opens,
    mayOpen: () => ++opens > 0,
    close: async () => {
      await held.close();
      await start.close();
    },
  };
}

test('HeldTree opens a directory from its deepest held ancestor: a chain read top down costs one open a level', async () => {
  const { tree: held, opens, mayOpen, close } = await tree();
  const before = openDescriptors();
  for (let depth = 1; depth <= DEPTH; depth += 1) {
    const names = await held.with(chain(depth), async (dir) => (await listHeld(dir)).map((e) => e.name), mayOpen);
    assert.ok(names !== undefined);
  }
  assert.equal(opens(), DEPTH);
  assert.ok(openDescriptors() <= before + MAX_HELD_DIRECTORIES, `${openDescriptors() - before} descriptors held`);
  await close();
  assert.equal(openDescriptors(), before - 1);
});

test('HeldTree keeps checkpoints of what is wanted, so going back up a chain read first costs about one open a level', async () => {
  const { tree: held, opens, mayOpen, close } = await tree();
  const before = openDescriptors();
  // Down to the bottom, each level wanted again later (a crawl leaves a sibling of each for later).
  for (let depth = 1; depth <= DEPTH; depth += 1) {
    held.want(chain(depth).join('/'), 1);
    await held.with(chain(depth), async () => undefined, mayOpen);
  }
  assert.equal(opens(), DEPTH);
  assert.ok(openDescriptors() <= before + MAX_HELD_DIRECTORIES + DEPTH / CHECKPOINT_LEVELS + 1, `${openDescriptors() - before} descriptors held`);
  // Then back up, bottom first. Reopening each from the start would cost DEPTH * DEPTH / 2; least recently used alone, DEPTH * DEPTH / 64.
  for (let depth = DEPTH; depth >= 1; depth -= 1) {
    assert.equal(await held.with(chain(depth), async () => 'held', mayOpen), 'held');
    held.want(chain(depth).join('/'), -1);
  }
  assert.ok(opens() <= 2 * DEPTH, `${opens()} opens to go down and back up ${DEPTH} levels`);
  await close();
  assert.equal(openDescriptors(), before - 1);
});

test('HeldTree does not follow a symlink, go up with "..", or open a file, and opens nothing once closed', async () => {
  const { tree: held, mayOpen, close } = await tree();
  for (const parts of [['a', 'link'], ['a', 'link', 'x'], ['a', '..', 'outside'], ['..'], ['a', 'file'], ['a', 'missing']]) {
    assert.equal(await held.with(parts, async () => 'opened', mayOpen), undefined, parts.join('/'));
  }
  assert.equal(await held.with(['a', '.', '', 'a'], async () => 'opened', mayOpen), 'opened');
  assert.equal(await held.with([], async () => 'start', mayOpen), 'start');
  assert.equal(
    await held.with(
      ['outside'],
      async () => 'opened',
      () => false,
    ),
    undefined,
  );
  await close();
  assert.equal(await held.with(['a'], async () => 'opened', mayOpen), undefined);
});
