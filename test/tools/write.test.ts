import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmod, lstat, mkdir, open, readdir, readFile, readlink, stat, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { compileInputSchema } from '#src/core/validator.js';
import type { ToolDef, ToolResult } from '#src/core/types.js';
import { contentVersion } from '#src/os/fs/regular-file.js';
import { createWriteTool } from '#src/tools/write.js';
import { Workspace } from '#src/os/fs/workspace.js';
import { toolContext } from '../support/tool-context.js';
import { temporaryDirectory } from '../support/workspace.js';

const base = await temporaryDirectory({ after }, 'toolport-write-');
let root: string;
let outside: string;
let Write: ToolDef;

/** Calls Write; a successful result must end with the version of the content written, which is checked and taken off. */
async function write(input: Record<string, unknown>): Promise<ToolResult> {
  const result = await Write.execute(input, toolContext());
  if (!result.isError) assert.deepEqual(result.content.pop(), { type: 'text', text: `(version ${contentVersion(String(input.content))})` });
  return result;
}
const result = (text: string, isError = false): ToolResult => ({ content: [{ type: 'text', text }], isError });
const outsideRefusal = (given: string): ToolResult =>
  result(`Path ${JSON.stringify(given)} is outside the workspace; file tools may only use paths under the workspace root.`, true);
const modeOf = async (file: string): Promise<number> => (await stat(file)).mode & 0o7777;

before(async () => {
  root = path.join(base, 'ws');
  outside = path.join(base, 'outside');
  await mkdir(root);
  await mkdir(outside);
  await writeFile(path.join(outside, 'secret.txt'), 'secret\n');
  await symlink(path.join(outside, 'secret.txt'), path.join(root, 'file-out'));
  await symlink(outside, path.join(root, 'dir-out'));
  await mkdir(path.join(root, 'nested'));
  await symlink(outside, path.join(root, 'nested', 'dir-out'));
  Write = createWriteTool(await Workspace.open(root));
});

/** The outside directory holds only what the fixture put there. */
async function assertOutsideUntouched(): Promise<void> {
  assert.deepEqual(await readdir(outside), ['secret.txt']);
  assert.equal(await readFile(path.join(outside, 'secret.txt'), 'utf8'), 'secret\n');
}

test('Write creates a file with mode 644 whatever the umask, and reports bytes and lines', async () => {
  const previous = process.umask(0o077);
  try {
    assert.deepEqual(await write({ file_path: 'new.txt', content: 'héllo\nworld\n' }), result('Created "new.txt" (13 bytes, 2 lines).'));
  } finally {
    process.umask(previous);
  }
  assert.equal(await readFile(path.join(root, 'new.txt'), 'utf8'), 'héllo\nworld\n');
  assert.equal(await modeOf(path.join(root, 'new.txt')), 0o644);
});

test('Write creates an empty file', async () => {
  assert.deepEqual(await write({ file_path: 'empty.txt', content: '' }), result('Created "empty.txt" (0 bytes, 0 lines).'));
  assert.equal(await readFile(path.join(root, 'empty.txt'), 'utf8'), '');
});

test('Write creates missing parent directories inside the workspace', async () => {
  const given = path.join(root, 'a', 'b', 'c.txt');
  assert.deepEqual(await write({ file_path: given, content: 'x' }), result(`Created ${JSON.stringify(given)} (1 byte, 1 line).`));
  assert.equal(await readFile(given, 'utf8'), 'x');
});

test('Write overwrites an existing file and keeps its mode', async () => {
  const target = path.join(root, 'script.sh');
  await writeFile(target, 'old\n');
  await chmod(target, 0o750);
  assert.deepEqual(await write({ file_path: 'script.sh', content: '#!/bin/sh\necho new\n' }), result('Overwrote "script.sh" (19 bytes, 2 lines).'));
  assert.equal(await readFile(target, 'utf8'), '#!/bin/sh\necho new\n');
  assert.equal(await modeOf(target), 0o750);
});

test('Write replaces the file by rename: a reader that opened the old file still sees the old content', async () => {
  const target = path.join(root, 'atomic.txt');
  await writeFile(target, 'old content\n');
  const reader = await open(target, 'r');
  try {
    await write({ file_path: 'atomic.txt', content: 'new content\n' });
    assert.equal(await reader.readFile('utf8'), 'old content\n');
  } finally {
    await reader.close();
  }
  assert.equal(await readFile(target, 'utf8'), 'new content\n');
});

test('Write leaves no temporary file behind', async () => {
  await mkdir(path.join(root, 'clean'));
  await write({ file_path: 'clean/one.txt', content: '1' });
  await write({ file_path: 'clean/one.txt', content: '2' });
  assert.deepEqual(await readdir(path.join(root, 'clean')), ['one.txt']);
});

test('Write removes its temporary file and keeps the target when the call is aborted', async () => {
  await mkdir(path.join(root, 'aborted'));
  await writeFile(path.join(root, 'aborted', 'keep.txt'), 'kept\n');
  const controller = new AbortController();
  controller.abort();
  await assert.rejects(Promise.resolve(Write.execute({ file_path: 'aborted/keep.txt', content: 'lost\n' }, toolContext(controller.signal))), {
    name: 'AbortError',
  });
  assert.deepEqual(await readdir(path.join(root, 'aborted')), ['keep.txt']);
  assert.equal(await readFile(path.join(root, 'aborted', 'keep.txt'), 'utf8'), 'kept\n');
});

test('Write through a symlink inside the workspace replaces the target and keeps the link', async () => {
  await writeFile(path.join(root, 'real.txt'), 'before\n');
  await symlink('real.txt', path.join(root, 'alias.txt'));
  assert.deepEqual(await write({ file_path: 'alias.txt', content: 'after\n' }), result('Overwrote "alias.txt" (6 bytes, 1 line).'));
  assert.equal(await readFile(path.join(root, 'real.txt'), 'utf8'), 'after\n');
  assert.equal(await readlink(path.join(root, 'alias.txt')), 'real.txt');
});

test('Write refuses a directory', async () => {
  await mkdir(path.join(root, 'folder'));
  assert.deepEqual(
    await write({ file_path: 'folder', content: 'x' }),
    result('Path "folder" is a directory; Write writes files. Name a file inside it instead.', true),
  );
  assert.ok((await lstat(path.join(root, 'folder'))).isDirectory());
});

test('Write refuses a FIFO', async () => {
  execFileSync('mkfifo', [path.join(root, 'pipe')]);
  assert.deepEqual(
    await write({ file_path: 'pipe', content: 'x' }),
    result('Path "pipe" is not a regular file (it is a FIFO, socket or device); Write only replaces regular files.', true),
  );
});

test('Write refuses a path whose parent is a file', async () => {
  await writeFile(path.join(root, 'plain.txt'), 'plain\n');
  for (const file_path of ['plain.txt/child.txt', 'plain.txt/deeper/child.txt']) {
    assert.deepEqual(
      await write({ file_path, content: 'x' }),
      result(`Cannot create ${JSON.stringify(file_path)}: a part of its directory is a file, not a directory.`, true),
    );
  }
  assert.equal(await readFile(path.join(root, 'plain.txt'), 'utf8'), 'plain\n');
});

test('Write refuses a symlinked file that points outside and leaves the outside file unchanged', async () => {
  assert.deepEqual(await write({ file_path: 'file-out', content: 'pwned' }), outsideRefusal('file-out'));
  await assertOutsideUntouched();
});

test('Write refuses a new file under a symlinked directory that points outside and creates nothing there', async () => {
  for (const file_path of ['dir-out/new.txt', 'dir-out/secret.txt', 'nested/dir-out/new.txt', 'dir-out/sub/dir/new.txt']) {
    assert.deepEqual(await write({ file_path, content: 'pwned' }), outsideRefusal(file_path));
  }
  await assertOutsideUntouched();
});

test('Write refuses .. escapes, absolute paths outside and a sibling that shares the root name', async () => {
  await mkdir(path.join(base, 'ws-evil'));
  for (const file_path of ['../outside/new.txt', '../ws-evil/new.txt', path.join(outside, 'new.txt'), path.join(base, 'ws-evil', 'x.txt'), 'a/../../x.txt']) {
    assert.deepEqual(await write({ file_path, content: 'pwned' }), outsideRefusal(file_path));
  }
  await assertOutsideUntouched();
  assert.deepEqual(await readdir(path.join(base, 'ws-evil')), []);
  assert.deepEqual((await readdir(base)).sort(), ['outside', 'ws', 'ws-evil']);
});

test('Write refuses a dangling symlink instead of creating its target', async () => {
  await symlink(path.join(outside, 'planted.txt'), path.join(root, 'dangling-out'));
  await symlink('nowhere.txt', path.join(root, 'dangling-in'));
  assert.deepEqual(await write({ file_path: 'dangling-in', content: 'x' }), result('Path "dangling-in" is a symbolic link whose target does not exist.', true));
  // Refused either way; which message it gets is workspace.ts's business (see its todo tests).
  const out = await write({ file_path: 'dangling-out', content: 'x' });
  assert.equal(out.isError, true);
  assert.ok(!JSON.stringify(out).includes(outside));
  await assertOutsideUntouched();
  await assert.rejects(lstat(path.join(root, 'nowhere.txt')), { code: 'ENOENT' });
});

test('Write refuses an empty path', async () => {
  assert.deepEqual(await write({ file_path: '', content: 'x' }), result('The path is empty.', true));
});

test('Write takes file_path and content and no other properties', () => {
  const validate = compileInputSchema(Write.inputSchema);
  assert.equal(validate({ file_path: 'a', content: '' }), true);
  assert.equal(validate({ file_path: 'a' }), false);
  assert.equal(validate({ file_path: 'a', content: 1 }), false);
  assert.equal(validate({ file_path: 'a', content: '', mode: 0o777 }), false);
  assert.deepEqual(Write.annotations, { title: 'Write file', readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false });
});

test('Write never keeps a setuid, setgid or sticky bit on the file it replaces', async () => {
  for (const [mode, kept] of [
    [0o4755, 0o755],
    [0o2750, 0o750],
    [0o1644, 0o644],
    [0o6777, 0o777],
  ] as const) {
    const target = path.join(root, `special-${mode.toString(8)}.sh`);
    await writeFile(target, 'old\n');
    await chmod(target, mode);
    assert.equal(await modeOf(target), mode, 'the fixture has the bits');
    assert.equal((await write({ file_path: path.basename(target), content: 'new\n' })).isError, false);
    assert.equal(await modeOf(target), kept);
  }
});
