import assert from 'node:assert/strict';
import { lstat, mkdir, realpath, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import type { ToolResult } from '#src/core/types.js';
import { createReadTool } from '#src/tools/read.js';
import { Workspace, WorkspaceError } from '#src/os/fs/workspace.js';
import { createWriteTool } from '#src/tools/write.js';
import { toolContext } from '../../support/tool-context.js';
import { temporaryDirectory } from '../../support/workspace.js';

// Layout, under a fresh temp directory `base`:
//   base/ws/                 the workspace root
//   base/ws/a/b.txt
//   base/ws/link-in -> a     (stays inside)
//   base/ws/link-out -> base/outside
//   base/ws/file-out -> base/outside/secret.txt
//   base/ws/dangling -> a/missing.txt
//   base/ws/loop-1 <-> base/ws/loop-2
//   base/ws-evil/            a sibling whose name starts with the root's name
//   base/outside/secret.txt
const base = await temporaryDirectory({ after }, 'toolport-ws-');
let root: string;
let ws: Workspace;

before(async () => {
  root = path.join(base, 'ws');
  await mkdir(path.join(root, 'a'), { recursive: true });
  await writeFile(path.join(root, 'a', 'b.txt'), 'inside\n');
  await mkdir(path.join(base, 'ws-evil'));
  await writeFile(path.join(base, 'ws-evil', 'evil.txt'), 'evil\n');
  await mkdir(path.join(base, 'outside'));
  await writeFile(path.join(base, 'outside', 'secret.txt'), 'secret\n');
  await symlink('a', path.join(root, 'link-in'));
  await symlink(path.join(base, 'outside'), path.join(root, 'link-out'));
  await symlink(path.join(base, 'outside', 'secret.txt'), path.join(root, 'file-out'));
  await symlink(path.join(base, 'ws-evil'), path.join(root, 'link-evil'));
  await symlink('a/missing.txt', path.join(root, 'dangling'));
  await symlink('loop-2', path.join(root, 'loop-1'));
  await symlink('loop-1', path.join(root, 'loop-2'));
  await mkdir(path.join(root, 'sub'));
  await symlink(path.join(base, 'outside'), path.join(root, 'sub', 'link-out'));
  ws = await Workspace.open(root);
});

/** Asserts that `given` is refused with a WorkspaceError whose message matches `message`. */
async function refused(given: string, message: RegExp): Promise<void> {
  await assert.rejects(ws.resolve(given), (err: unknown) => {
    assert.ok(err instanceof WorkspaceError, `expected a WorkspaceError, got ${String(err)}`);
    assert.match(err.message, message);
    return true;
  });
}

const OUTSIDE = /is outside the workspace; file tools may only use paths under the workspace root\.$/;

describe('Workspace.open', () => {
  test('canonicalises the root through a symlink', async () => {
    const alias = path.join(base, 'alias');
    await symlink(root, alias);
    const opened = await Workspace.open(alias);
    assert.equal(opened.root, root);
  });

  test('refuses a root that does not exist or is a file', async () => {
    await assert.rejects(Workspace.open(path.join(base, 'nope')), /does not exist/);
    await assert.rejects(Workspace.open(path.join(root, 'a', 'b.txt')), /is not a directory/);
  });
});

describe('Workspace.contains', () => {
  test('accepts the root and paths below it, not a sibling that shares its prefix', () => {
    assert.equal(ws.contains(root), true);
    assert.equal(ws.contains(path.join(root, 'a')), true);
    assert.equal(ws.contains(`${root}-evil`), false);
    assert.equal(ws.contains(path.join(`${root}-evil`, 'evil.txt')), false);
    assert.equal(ws.contains(base), false);
  });
});

describe('Workspace.resolve', () => {
  test('resolves relative and absolute paths inside to canonical ones', async () => {
    assert.deepEqual(await ws.resolve('a/b.txt'), { absolute: path.join(root, 'a', 'b.txt'), relative: 'a/b.txt' });
    assert.deepEqual(await ws.resolve(path.join(root, 'a', 'b.txt')), { absolute: path.join(root, 'a', 'b.txt'), relative: 'a/b.txt' });
    assert.deepEqual(await ws.resolve('.'), { absolute: root, relative: '.' });
    assert.deepEqual(await ws.resolve(root), { absolute: root, relative: '.' });
    assert.deepEqual(await ws.resolve('a/../a/./b.txt'), { absolute: path.join(root, 'a', 'b.txt'), relative: 'a/b.txt' });
  });

  test('resolves a path that does not exist yet below existing directories', async () => {
    assert.deepEqual(await ws.resolve('a/new/deeper/file.txt'), {
      absolute: path.join(root, 'a', 'new', 'deeper', 'file.txt'),
      relative: 'a/new/deeper/file.txt',
    });
  });

  test('follows a symlink that stays inside to its canonical target', async () => {
    assert.deepEqual(await ws.resolve('link-in/b.txt'), { absolute: path.join(root, 'a', 'b.txt'), relative: 'a/b.txt' });
    assert.deepEqual(await ws.resolve('link-in/new.txt'), { absolute: path.join(root, 'a', 'new.txt'), relative: 'a/new.txt' });
  });

  test('refuses .. escapes', async () => {
    await refused('..', OUTSIDE);
    await refused('../outside/secret.txt', OUTSIDE);
    await refused('a/../../outside/secret.txt', OUTSIDE);
    await refused('../../../../../../../../etc/passwd', OUTSIDE);
    await refused('a/../..', OUTSIDE);
  });

  test('refuses absolute paths outside, existing or not', async () => {
    await refused('/etc/passwd', OUTSIDE);
    await refused(base, OUTSIDE);
    await refused(path.join(base, 'outside', 'secret.txt'), OUTSIDE);
    await refused('/no/such/dir/file.txt', OUTSIDE);
    await refused('/', OUTSIDE);
  });

  test('refuses a sibling directory whose name starts with the root name', async () => {
    await refused(path.join(base, 'ws-evil', 'evil.txt'), OUTSIDE);
    await refused(path.join(base, 'ws-evil', 'new.txt'), OUTSIDE);
    await refused('../ws-evil/evil.txt', OUTSIDE);
    await refused('link-evil/evil.txt', OUTSIDE);
  });

  test('refuses symlinks that point outside, for files and directories, existing and new', async () => {
    await refused('file-out', OUTSIDE);
    await refused('link-out', OUTSIDE);
    await refused('link-out/secret.txt', OUTSIDE);
    await refused('link-out/new.txt', OUTSIDE);
    await refused('link-out/new-dir/deeper/new.txt', OUTSIDE);
    await refused('sub/link-out/secret.txt', OUTSIDE);
    await refused('sub/link-out/new-dir/new.txt', OUTSIDE);
    await refused('file-out/below-a-file', OUTSIDE);
  });

  test('refuses an empty path', async () => {
    await refused('', /^The path is empty\.$/);
  });

  test('refuses a NUL byte', async () => {
    await refused('a/b.txt\0.png', /^Path "a\/b\.txt\\u0000\.png" contains a NUL byte\.$/);
  });

  test('refuses a path longer than 4096 characters and cuts it in the message', async () => {
    const long = 'x/'.repeat(2100);
    await assert.rejects(ws.resolve(long), (err: unknown) => {
      assert.ok(err instanceof WorkspaceError);
      assert.equal(err.message, `Path ${JSON.stringify(`${long.slice(0, 200)}...`)} is longer than 4096 characters.`);
      return true;
    });
  });

  test('accepts a long but valid path of existing directories', async () => {
    const parts = Array.from({ length: 14 }, (_, i) => `${String(i).padStart(2, '0')}${'d'.repeat(198)}`);
    const deep = path.join(root, ...parts);
    await mkdir(deep, { recursive: true });
    const relative = path.join(...parts, 'file.txt');
    assert.ok(relative.length > 2800 && relative.length < 4096);
    assert.deepEqual(await ws.resolve(relative), { absolute: path.join(deep, 'file.txt'), relative });
  });

  test('refuses a path component longer than the file system allows, as a WorkspaceError', async () => {
    await refused('n'.repeat(300), /cannot be resolved \(ENAMETOOLONG\)\.$/);
  });

  test('refuses a dangling symlink, also as a parent', async () => {
    await refused('dangling', /is a symbolic link whose target does not exist\.$/);
    await refused('dangling/child.txt', /is a symbolic link whose target does not exist\.$/);
  });

  test('refuses a symlink loop', async () => {
    await refused('loop-1', /has a symbolic link loop\.$/);
    await refused('loop-2/file.txt', /has a symbolic link loop\.$/);
  });

  // The message for a refused path must not depend on the state of the file system outside.
  test('gives the same refusal for an outside path whether or not it holds a symlink loop', async () => {
    await symlink('outside-loop', path.join(base, 'outside-loop'));
    await refused(path.join(base, 'outside-loop', 'x'), OUTSIDE);
  });

  test('gives the same refusal for a link to an outside path whether or not that path exists', async () => {
    await symlink(path.join(base, 'outside', 'no-such-file'), path.join(root, 'probe-missing'));
    await refused('probe-missing', OUTSIDE);
  });

  test('refuses a path that ends with "/" unless it names an existing directory, as the kernel would', async () => {
    for (const given of ['a/b.txt/', 'link-in/b.txt/', 'a/missing/', 'a/b.txt/new/', 'new-dir/', `${root}/a/b.txt/`]) {
      await assert.rejects(ws.resolve(given), new WorkspaceError(`Path ${JSON.stringify(given)} ends with "/" but is not a directory.`));
    }
    assert.deepEqual(await ws.resolve('a/'), { absolute: path.join(root, 'a'), relative: 'a' });
    assert.deepEqual(await ws.resolve('link-in/'), { absolute: path.join(root, 'a'), relative: 'a' });
    assert.deepEqual(await ws.resolve('./'), { absolute: root, relative: '.' });
    assert.deepEqual(await ws.resolve(`${root}/`), { absolute: root, relative: '.' });
  });

  test('either resolves inside the root or refuses (WorkspaceError, or ENOTDIR through a file), for any hostile path (property)', async () => {
    const segments = [
      '..',
      '.',
      '',
      'a',
      'b.txt',
      'new',
      'link-in',
      'link-out',
      'file-out',
      'link-evil',
      'sub',
      'dangling',
      'loop-1',
      'ws',
      'ws-evil',
      'outside',
      '/',
      '\0',
      ' ',
      '\\',
      '~',
      'é',
      '日本語',
      '😀',
      '\u202e',
      'x'.repeat(255),
      'y'.repeat(300),
    ];
    const prefixes = ['', `${root}/`, `${root}`, `${base}/`, '/', `${root}-evil/`];
    const hostile = fc
      .tuple(fc.constantFrom(...prefixes), fc.array(fc.constantFrom(...segments), { maxLength: 10 }), fc.boolean())
      .map(([prefix, parts, long]) => prefix + parts.join('/') + (long ? '/z'.repeat(2100) : ''));
    await fc.assert(
      fc.asyncProperty(hostile, async (given) => {
        let resolved;
        try {
          resolved = await ws.resolve(given);
        } catch (err) {
          // A refusal, or the kernel's answer for a path that goes on through a file.
          const throughFile = (err as NodeJS.ErrnoException).code === 'ENOTDIR';
          assert.ok(err instanceof WorkspaceError || throughFile, `${JSON.stringify(given)} threw ${String(err)}`);
          return;
        }
        const canonical = await canonicalise(resolved.absolute);
        assert.equal(resolved.absolute, canonical, 'the result is canonical');
        const relative = path.relative(root, canonical);
        assert.ok(!relative.startsWith('..') && !path.isAbsolute(relative), `${JSON.stringify(given)} resolved outside: ${canonical}`);
        assert.equal(resolved.relative, relative || '.');
      }),
      { numRuns: 400 },
    );
  });
});

describe('file tools given a path that ends with "/"', () => {
  const context = toolContext();
  const refusal = (given: string): ToolResult => ({
    content: [{ type: 'text', text: `Path "${given}" ends with "/" but is not a directory.` }],
    isError: true,
  });

  test('Read refuses a file named with a trailing "/" instead of reading it', async () => {
    assert.deepEqual(await createReadTool(ws).execute({ file_path: 'a/b.txt/' }, context), refusal('a/b.txt/'));
  });

  test('Write refuses a new path with a trailing "/" instead of creating a file by that name', async () => {
    assert.deepEqual(await createWriteTool(ws).execute({ file_path: 'newdir/', content: 'x' }, context), refusal('newdir/'));
    await assert.rejects(lstat(path.join(root, 'newdir')), { code: 'ENOENT' });
    assert.deepEqual(await createWriteTool(ws).execute({ file_path: 'a/b.txt/', content: 'x' }, context), refusal('a/b.txt/'));
  });
});

/** Independent of Workspace: realpath of the deepest existing ancestor, with the rest appended. */
async function canonicalise(absolute: string): Promise<string> {
  const rest: string[] = [];
  let existing = absolute;
  for (;;) {
    try {
      return path.join(await realpath(existing), ...rest);
    } catch {
      rest.unshift(path.basename(existing));
      existing = path.dirname(existing);
    }
  }
}
