import { realpathSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { descriptorsUnder } from '../../support/descriptors.js';
import assert from 'node:assert/strict';
import { mkdir, rename, rm, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { test, type TestContext } from 'node:test';
import { walkHeld } from '#src/os/fs/walk.js';
import type { Workspace } from '#src/os/fs/workspace.js';
import { temporaryWorkspace } from '../../support/workspace.js';

// The descriptors open on the test workspaces only: the process (the loader, the test runner) opens and closes others of its own at any time.
const openDescriptors = (): number => descriptorsUnder(path.join(realpathSync(tmpdir()), 'toolport-walk-'));

/** A workspace holding `tree` (relative paths; a trailing "/" makes a directory). */
async function workspaceWith(t: TestContext, tree: readonly string[]): Promise<Workspace> {
  const ws = await temporaryWorkspace(t, 'toolport-walk-');
  for (const entry of tree) {
    if (entry.endsWith('/')) await mkdir(path.join(ws.root, entry), { recursive: true });
    else await writeFile(path.join(ws.root, entry), '');
  }
  return ws;
}

test('walkHeld visits every entry depth first with its depth, and goes only into the directories the visitor says', async (t) => {
  const { rootDir } = await workspaceWith(t, ['a/b/', 'a/b/deep.txt', 'a/one.txt', 'skipped/', 'skipped/unseen.txt', 'top.txt']);
  const seen: string[] = [];
  const report = await walkHeld(rootDir, { maxDepth: 10 }, async (_dir, entry, depth) => {
    seen.push(`${depth}:${entry.name}`);
    return entry.isDirectory() && entry.name !== 'skipped';
  });
  assert.deepEqual(report, { partial: false });
  assert.deepEqual([...seen].sort(), ['0:a', '0:skipped', '0:top.txt', '1:b', '1:one.txt', '2:deep.txt']);
  // Depth first: a directory's entries come right after it, before its next sibling's.
  const a = seen.indexOf('0:a');
  assert.deepEqual(seen.slice(a + 1, a + 4).sort(), ['1:b', '1:one.txt', '2:deep.txt']);
});

test('walkHeld never follows a symlink, even to a directory the visitor asks to go into', async (t) => {
  const { root, rootDir } = await workspaceWith(t, ['outside/', 'outside/secret.txt', 'inside/']);
  await symlink(path.join(root, 'outside'), path.join(root, 'inside', 'link'));
  const seen: string[] = [];
  await walkHeld(rootDir, { maxDepth: 10 }, async (_dir, entry, depth) => {
    seen.push(`${depth}:${entry.name}`);
    return entry.name !== 'outside';
  });
  assert.deepEqual([...seen].sort(), ['0:inside', '0:outside', '1:link']);
});

test('walkHeld skips a directory swapped for a symlink after it was listed, and one removed', async (t) => {
  const { root, rootDir } = await workspaceWith(t, ['outside/', 'outside/secret.txt', 'swapped/', 'swapped/mine.txt', 'removed/', 'removed/gone.txt']);
  const seen: string[] = [];
  await walkHeld(rootDir, { maxDepth: 10 }, async (_dir, entry, depth) => {
    seen.push(`${depth}:${entry.name}`);
    if (entry.name === 'swapped') {
      // Listed as a directory; a link to another one by the time the walk goes in.
      await rename(path.join(root, 'swapped'), path.join(root, 'moved-away'));
      await symlink(path.join(root, 'outside'), path.join(root, 'swapped'));
    }
    if (entry.name === 'removed') await rm(path.join(root, 'removed'), { recursive: true });
    return entry.name === 'swapped' || entry.name === 'removed';
  });
  assert.ok(!seen.includes('1:secret.txt'), seen.join());
  assert.ok(!seen.includes('1:gone.txt'), seen.join());
  assert.deepEqual(
    seen.filter((name) => name.startsWith('1:')),
    [],
  );
});

test('walkHeld visits entries down to maxDepth and goes no deeper, holding at most two descriptors a level and none after', async (t) => {
  const maxDepth = 5;
  const chain = Array.from({ length: maxDepth + 3 }, () => 'd').join('/');
  const { rootDir } = await workspaceWith(t, [`${chain}/`]);
  const before = openDescriptors();
  let deepest = -1;
  let mostOpen = 0;
  await walkHeld(rootDir, { maxDepth }, async (_dir, entry, depth) => {
    deepest = Math.max(deepest, depth);
    mostOpen = Math.max(mostOpen, openDescriptors() - before);
    return entry.isDirectory();
  });
  assert.equal(deepest, maxDepth);
  assert.ok(mostOpen <= 2 * maxDepth + 1, `${mostOpen} descriptors open at once`);
  assert.equal(openDescriptors(), before, 'every descriptor the walk opened is closed');
});

test('walkHeld stops at maxEntries and says the walk is partial', async (t) => {
  const { rootDir } = await workspaceWith(t, ['a/', 'a/1', 'a/2', 'a/3', 'b/', 'b/1', 'b/2', 'c', 'd']);
  const before = openDescriptors();
  let visited = 0;
  const report = await walkHeld(rootDir, { maxDepth: 10, maxEntries: 4 }, async (_dir, entry) => {
    visited += 1;
    return entry.isDirectory();
  });
  assert.deepEqual(report, { partial: true });
  assert.equal(visited, 4);
  assert.equal(openDescriptors(), before);
  // With room for every entry, it is whole.
  assert.deepEqual(await walkHeld(rootDir, { maxDepth: 10, maxEntries: 9 }, async (_dir, entry) => entry.isDirectory()), { partial: false });
});

test("walkHeld ends with the visitor's error, closing what it opened", async (t) => {
  const { rootDir } = await workspaceWith(t, ['a/b/', 'a/b/c.txt']);
  const before = openDescriptors();
  await assert.rejects(
    walkHeld(rootDir, { maxDepth: 10 }, async (_dir, entry) => {
      if (entry.name === 'c.txt') throw new Error('visitor failed');
      return true;
    }),
    /^Error: visitor failed$/,
  );
  assert.equal(openDescriptors(), before);
});
