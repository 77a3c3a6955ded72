import assert from 'node:assert/strict';
import { chmod, mkdir, readdir, readFile, stat, symlink, truncate, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { compileInputSchema } from '#src/core/validator.js';
import type { ToolDef, ToolResult } from '#src/core/types.js';
import { createEditTool } from '#src/tools/edit.js';
import { contentVersion } from '#src/os/fs/regular-file.js';
import { Workspace } from '#src/os/fs/workspace.js';
import { toolContext } from '../support/tool-context.js';
import { temporaryDirectory } from '../support/workspace.js';

const base = await temporaryDirectory({ after }, 'toolport-edit-');
let root: string;
let outside: string;
let Edit: ToolDef;

/** Calls Edit; a successful result must end with the version of the file as edited, which is checked and taken off. */
async function edit(input: Record<string, unknown>): Promise<ToolResult> {
  const result = await Edit.execute(input, toolContext());
  if (!result.isError) {
    const data = await readFile(path.resolve(root, String(input.file_path)));
    assert.deepEqual(result.content.pop(), { type: 'text', text: `(version ${contentVersion(data)})` });
  }
  return result;
}
const result = (text: string, isError = false): ToolResult => ({ content: [{ type: 'text', text }], isError });
const numbered = (lines: string[], first = 1): string => lines.map((l, i) => `${String(first + i).padStart(6)}\t${l}`).join('\n');
const contentOf = (name: string): Promise<string> => readFile(path.join(root, name), 'utf8');

before(async () => {
  root = path.join(base, 'ws');
  outside = path.join(base, 'outside');
  await mkdir(root);
  await mkdir(outside);
  await writeFile(path.join(outside, 'secret.txt'), 'secret = 1\n');
  await symlink(path.join(outside, 'secret.txt'), path.join(root, 'file-out'));
  await symlink(outside, path.join(root, 'dir-out'));
  Edit = createEditTool(await Workspace.open(root));
});

async function file(name: string, content: string | Uint8Array): Promise<void> {
  await mkdir(path.dirname(path.join(root, name)), { recursive: true });
  await writeFile(path.join(root, name), content);
}

const TEN = Array.from({ length: 10 }, (_, i) => `line ${i + 1}`);

test('Edit replaces a unique occurrence and shows the edited region with line numbers', async () => {
  await file('ten.txt', `${TEN.join('\n')}\n`);
  const r = await edit({ file_path: 'ten.txt', old_string: 'line 5\n', new_string: 'five\nand a half\n' });
  const after = [...TEN.slice(0, 4), 'five', 'and a half', ...TEN.slice(5)];
  assert.deepEqual(r, result(`Replaced 1 occurrence in "ten.txt". The edited region now reads:\n${numbered(after.slice(1, 9), 2)}`));
  assert.equal(await contentOf('ten.txt'), `${after.join('\n')}\n`);
});

test('Edit keeps $& and other replacement patterns in new_string literal', async () => {
  await file('dollar.txt', 'price: X\n');
  await edit({ file_path: 'dollar.txt', old_string: 'X', new_string: "$& $1 $$ $` $'" });
  assert.equal(await contentOf('dollar.txt'), "price: $& $1 $$ $` $'\n");
});

test('Edit refuses an old_string that occurs more than once and says how often', async () => {
  await file('twice.txt', 'a = 1\nb = 1\nc = 1\n');
  assert.deepEqual(
    await edit({ file_path: 'twice.txt', old_string: ' = 1', new_string: ' = 2' }),
    result(
      'old_string occurs 3 times in "twice.txt". Add surrounding lines to old_string so that it matches exactly once, or set replace_all to true to replace all 3.',
      true,
    ),
  );
  assert.equal(await contentOf('twice.txt'), 'a = 1\nb = 1\nc = 1\n');
});

test('Edit with replace_all replaces every occurrence and shows the first', async () => {
  const r = await edit({ file_path: 'twice.txt', old_string: ' = 1', new_string: ' = 2', replace_all: true });
  assert.deepEqual(r, result(`Replaced all 3 occurrences in "twice.txt". The first edited region now reads:\n${numbered(['a = 2', 'b = 2', 'c = 2'])}`));
  assert.equal(await contentOf('twice.txt'), 'a = 2\nb = 2\nc = 2\n');
});

test('Edit with replace_all on a single occurrence replaces it', async () => {
  await file('once.txt', 'only here\n');
  const r = await edit({ file_path: 'once.txt', old_string: 'here', new_string: 'there', replace_all: true });
  assert.deepEqual(r, result(`Replaced 1 occurrence in "once.txt". The edited region now reads:\n${numbered(['only there'])}`));
});

test('Edit deletes text when new_string is empty', async () => {
  await file('delete.txt', 'keep\ndrop\nkeep too\n');
  const r = await edit({ file_path: 'delete.txt', old_string: 'drop\n', new_string: '' });
  assert.deepEqual(r, result(`Replaced 1 occurrence in "delete.txt". The edited region now reads:\n${numbered(['keep', 'keep too'])}`));
  assert.equal(await contentOf('delete.txt'), 'keep\nkeep too\n');
});

test('Edit refuses an empty old_string', async () => {
  assert.deepEqual(
    await edit({ file_path: 'once.txt', old_string: '', new_string: 'x' }),
    result('old_string is empty. Give the exact text to replace; to create a file or replace all of it, use Write.', true),
  );
});

test('Edit refuses identical old_string and new_string', async () => {
  assert.deepEqual(
    await edit({ file_path: 'once.txt', old_string: 'only', new_string: 'only' }),
    result('old_string and new_string are identical, so the edit would change nothing.', true),
  );
});

test('Edit refuses an old_string that is not in the file', async () => {
  assert.deepEqual(
    await edit({ file_path: 'once.txt', old_string: 'nowhere', new_string: 'x' }),
    result(
      'old_string was not found in "once.txt". It must match the file exactly, including whitespace and indentation; Read the file and copy the text to replace.',
      true,
    ),
  );
});

test('Edit refuses a missing file and points to Write', async () => {
  assert.deepEqual(
    await edit({ file_path: 'missing.txt', old_string: 'a', new_string: 'b' }),
    result('Path "missing.txt" does not exist. Edit changes existing files; use Write to create one.', true),
  );
  await assert.rejects(stat(path.join(root, 'missing.txt')), { code: 'ENOENT' });
});

test('Edit refuses a directory', async () => {
  await mkdir(path.join(root, 'folder'));
  assert.deepEqual(await edit({ file_path: 'folder', old_string: 'a', new_string: 'b' }), result('Path "folder" is a directory, not a file.', true));
});

test('Edit refuses a binary file', async () => {
  await file('blob.bin', Buffer.from([0x61, 0, 0x62]));
  assert.deepEqual(
    await edit({ file_path: 'blob.bin', old_string: 'a', new_string: 'c' }),
    result('Path "blob.bin" is a binary file, not UTF-8 text; Edit only changes text files.', true),
  );
});

test('Edit refuses a file over 10 MiB', async () => {
  await file('huge.txt', '');
  await truncate(path.join(root, 'huge.txt'), 11 * 1024 * 1024);
  assert.deepEqual(
    await edit({ file_path: 'huge.txt', old_string: 'a', new_string: 'b' }),
    result('Path "huge.txt" is 11.0 MiB, over the 10 MiB Edit accepts.', true),
  );
});

test('Edit matches LF old_string in a CRLF file and writes CRLF', async () => {
  await file('crlf.txt', 'one\r\ntwo\r\nthree\r\n');
  const r = await edit({ file_path: 'crlf.txt', old_string: 'one\ntwo\n', new_string: 'uno\ndos\nmás\n' });
  assert.deepEqual(r, result(`Replaced 1 occurrence in "crlf.txt". The edited region now reads:\n${numbered(['uno', 'dos', 'más', 'three'])}`));
  assert.equal(await contentOf('crlf.txt'), 'uno\r\ndos\r\nmás\r\nthree\r\n');
});

test('Edit writes new lines as CRLF in a CRLF file even when old_string has no line break', async () => {
  await file('crlf2.txt', 'alpha\r\nomega\r\n');
  await edit({ file_path: 'crlf2.txt', old_string: 'alpha', new_string: 'alpha\nbeta' });
  assert.equal(await contentOf('crlf2.txt'), 'alpha\r\nbeta\r\nomega\r\n');
});

test('Edit leaves an LF file with LF line endings', async () => {
  await file('lf.txt', 'one\ntwo\n');
  await edit({ file_path: 'lf.txt', old_string: 'one\n', new_string: 'zero\none\n' });
  assert.equal(await contentOf('lf.txt'), 'zero\none\ntwo\n');
});

test('Edit keeps a UTF-8 byte-order mark', async () => {
  await file('bom.txt', '\uFEFFfirst\nsecond\n');
  const r = await edit({ file_path: 'bom.txt', old_string: 'first', new_string: 'erste' });
  assert.deepEqual(r, result(`Replaced 1 occurrence in "bom.txt". The edited region now reads:\n${numbered(['erste', 'second'])}`));
  assert.deepEqual([...(await readFile(path.join(root, 'bom.txt'))).subarray(0, 3)], [0xef, 0xbb, 0xbf]);
  assert.equal(await contentOf('bom.txt'), '\uFEFFerste\nsecond\n');
});

test('Edit keeps the file mode and leaves no temporary file', async () => {
  await mkdir(path.join(root, 'modes'));
  await file('modes/run.sh', '#!/bin/sh\necho old\n');
  await chmod(path.join(root, 'modes', 'run.sh'), 0o700);
  await edit({ file_path: 'modes/run.sh', old_string: 'old', new_string: 'new' });
  assert.equal((await stat(path.join(root, 'modes', 'run.sh'))).mode & 0o7777, 0o700);
  assert.deepEqual(await readdir(path.join(root, 'modes')), ['run.sh']);
});

test('Edit cuts a long edited region to 40 lines', async () => {
  await file('grow.txt', 'start\nend\n');
  const added = Array.from({ length: 60 }, (_, i) => `added ${i + 1}`);
  const r = await edit({ file_path: 'grow.txt', old_string: 'start\n', new_string: `start\n${added.join('\n')}\n` });
  const text = r.content[0]?.type === 'text' ? r.content[0].text : '';
  const lines = text.split('\n');
  assert.equal(lines.length, 1 + 40 + 1);
  assert.equal(lines[1], numbered(['start']));
  assert.equal(lines[41], '       ... (22 more lines)');
});

test('Edit refuses a symlink that leaves the workspace and leaves the outside file unchanged', async () => {
  for (const file_path of ['file-out', 'dir-out/secret.txt', 'dir-out/new.txt', '../outside/secret.txt']) {
    assert.deepEqual(
      await edit({ file_path, old_string: '1', new_string: '2' }),
      result(`Path ${JSON.stringify(file_path)} is outside the workspace; file tools may only use paths under the workspace root.`, true),
    );
  }
  assert.equal(await readFile(path.join(outside, 'secret.txt'), 'utf8'), 'secret = 1\n');
  assert.deepEqual(await readdir(outside), ['secret.txt']);
});

test('Edit stops before writing when its signal is aborted', async () => {
  await file('abort.txt', 'stay\n');
  const controller = new AbortController();
  controller.abort();
  await assert.rejects(Promise.resolve(Edit.execute({ file_path: 'abort.txt', old_string: 'stay', new_string: 'go' }, toolContext(controller.signal))), {
    name: 'AbortError',
  });
  assert.equal(await contentOf('abort.txt'), 'stay\n');
});

test('Edit takes file_path, old_string, new_string and replace_all and no other properties', () => {
  const validate = compileInputSchema(Edit.inputSchema);
  assert.equal(validate({ file_path: 'a', old_string: 'x', new_string: 'y' }), true);
  assert.equal(validate({ file_path: 'a', old_string: 'x', new_string: 'y', replace_all: true }), true);
  assert.equal(validate({ file_path: 'a', old_string: 'x', new_string: 'y', replace_all: 'yes' }), false);
  assert.equal(validate({ file_path: 'a', old_string: 'x' }), false);
  assert.equal(validate({ file_path: 'a', old_string: 'x', new_string: 'y', regex: true }), false);
  assert.deepEqual(Edit.annotations, { title: 'Edit file', readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false });
});

test('Edit never keeps a setuid, setgid or sticky bit on the file it changes', async () => {
  for (const [mode, kept] of [
    [0o4755, 0o755],
    [0o2750, 0o750],
    [0o1644, 0o644],
  ] as const) {
    const name = `special-${mode.toString(8)}.sh`;
    await file(name, 'old\n');
    await chmod(path.join(root, name), mode);
    assert.equal((await stat(path.join(root, name))).mode & 0o7777, mode, 'the fixture has the bits');
    assert.equal((await edit({ file_path: name, old_string: 'old', new_string: 'new' })).isError, false);
    assert.equal((await stat(path.join(root, name))).mode & 0o7777, kept);
  }
});
