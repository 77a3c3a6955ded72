import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdir, readFile, symlink, truncate, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { compileInputSchema } from '#src/core/validator.js';
import type { ToolDef, ToolResult } from '#src/core/types.js';
import { createReadTool } from '#src/tools/read.js';
import { contentVersion } from '#src/os/fs/regular-file.js';
import { Workspace } from '#src/os/fs/workspace.js';
import { toolContext } from '../support/tool-context.js';
import { temporaryDirectory } from '../support/workspace.js';

const base = await temporaryDirectory({ after }, 'toolport-read-');
let root: string;
let Read: ToolDef;

/** Calls Read; a successful result must end with the file's version, which is checked and taken off. */
async function read(input: Record<string, unknown>): Promise<ToolResult> {
  const result = await Read.execute(input, toolContext());
  if (result.isError) return result;
  const data = await readFile(path.resolve(root, String(input.file_path)));
  assert.deepEqual(result.content.pop(), { type: 'text', text: `(version ${contentVersion(data)})` });
  return result;
}
const textOf = (result: ToolResult): string => result.content.map((b) => (b.type === 'text' ? b.text : `[${b.type}]`)).join('\n');
const numbered = (lines: string[], first = 1): string => lines.map((l, i) => `${String(first + i).padStart(6)}\t${l}`).join('\n');

before(async () => {
  root = path.join(base, 'ws');
  await mkdir(root);
  await mkdir(path.join(base, 'outside'));
  await writeFile(path.join(base, 'outside', 'secret.txt'), 'top secret\n');
  await symlink(path.join(base, 'outside', 'secret.txt'), path.join(root, 'file-out'));
  await symlink(path.join(base, 'outside'), path.join(root, 'dir-out'));
  Read = createReadTool(await Workspace.open(root));
});

async function file(name: string, content: string | Uint8Array): Promise<string> {
  const absolute = path.join(root, name);
  await mkdir(path.dirname(absolute), { recursive: true });
  await writeFile(absolute, content);
  return absolute;
}

test('Read returns a text file with cat -n style line numbers', async () => {
  await file('hello.txt', 'one\ntwo\n\tthree\n');
  assert.deepEqual(await read({ file_path: 'hello.txt' }), {
    content: [{ type: 'text', text: numbered(['one', 'two', '\tthree']) }],
    isError: false,
  });
});

test('Read accepts an absolute path inside the workspace and a last line without newline', async () => {
  const absolute = await file('dir/no-eol.txt', 'a\nb');
  const result = await read({ file_path: absolute });
  assert.equal(result.isError, false);
  assert.equal(textOf(result), numbered(['a', 'b']));
});

test('Read starts at offset, stops after limit and says how to read on', async () => {
  await file('ten.txt', Array.from({ length: 10 }, (_, i) => `line ${i + 1}\n`).join(''));
  const result = await read({ file_path: 'ten.txt', offset: 3, limit: 2 });
  assert.equal(result.isError, false);
  assert.equal(textOf(result), `${numbered(['line 3', 'line 4'], 3)}\n\n(File has 10 lines; showing lines 3-4. Call Read with offset=5 to read on.)`);
});

test('Read with a limit that reaches the end adds no footer', async () => {
  const result = await read({ file_path: 'ten.txt', offset: 9, limit: 50 });
  assert.equal(textOf(result), numbered(['line 9', 'line 10'], 9));
});

test('Read shows the first 2000 lines by default and says how to read the rest', async () => {
  await file('long.txt', Array.from({ length: 2500 }, (_, i) => `${i + 1}`).join('\n'));
  const text = textOf(await read({ file_path: 'long.txt' }));
  const [body, footer] = text.split('\n\n');
  assert.equal(body!.split('\n').length, 2000);
  assert.equal(body!.split('\n')[1999], '  2000\t2000');
  assert.equal(footer, '(File has 2500 lines; showing lines 1-2000. Call Read with offset=2001 to read on.)');
});

test('Read cuts lines longer than 2000 characters and says how much was left out', async () => {
  await file('wide.txt', `${'x'.repeat(2500)}\nshort\n`);
  const text = textOf(await read({ file_path: 'wide.txt' }));
  assert.equal(text, `     1\t${'x'.repeat(2000)}... [line truncated, 500 more characters]\n     2\tshort`);
});

test('Read stops after about 100k characters and says where to read on', async () => {
  await file('heavy.txt', `${'y'.repeat(1000)}\n`.repeat(300));
  const text = textOf(await read({ file_path: 'heavy.txt' }));
  assert.match(text, /\n\n\(File has 300 lines; showing lines 1-100\. Call Read with offset=101 to read on\.\)$/);
});

test('Read hides a byte-order mark and CRLF line endings', async () => {
  await file('windows.txt', '\uFEFFfirst\r\nsecond\r\n');
  assert.equal(textOf(await read({ file_path: 'windows.txt' })), numbered(['first', 'second']));
});

test('Read says that an empty file is empty, without an error', async () => {
  await file('empty.txt', '');
  assert.deepEqual(await read({ file_path: 'empty.txt' }), {
    content: [{ type: 'text', text: 'File "empty.txt" is empty (0 bytes).' }],
    isError: false,
  });
});

test('Read refuses an offset past the end of the file', async () => {
  assert.deepEqual(await read({ file_path: 'ten.txt', offset: 11 }), {
    content: [{ type: 'text', text: 'Offset 11 is past the end of "ten.txt", which has 10 lines.' }],
    isError: true,
  });
});

const IMAGES = {
  'image/png': [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52],
  'image/jpeg': [0xff, 0xd8, 0xff, 0xe0, 0, 0x10, 0x4a, 0x46, 0x49, 0x46, 0],
  'image/gif': [...Buffer.from('GIF89a'), 1, 0, 1, 0, 0x80, 0, 0],
  'image/webp': [...Buffer.from('RIFF'), 26, 0, 0, 0, ...Buffer.from('WEBPVP8 '), 0, 0],
} as const;

for (const [mediaType, bytes] of Object.entries(IMAGES)) {
  test(`Read returns a ${mediaType.slice(6).toUpperCase()} image as an image block, recognised by content, not name`, async () => {
    const data = Buffer.from(bytes);
    await file(`picture-${mediaType.slice(6)}.dat`, data);
    const result = await read({ file_path: `picture-${mediaType.slice(6)}.dat` });
    assert.equal(result.isError, false);
    assert.deepEqual(result.content[0], { type: 'image', source: { type: 'base64', media_type: mediaType, data: data.toString('base64') } });
    assert.deepEqual(result.content[1], { type: 'text', text: `Image "picture-${mediaType.slice(6)}.dat" (${mediaType}, ${data.length} bytes).` });
  });
}

test('Read shows a text file named like an image as text', async () => {
  await file('not-really.png', 'just text\n');
  assert.equal(textOf(await read({ file_path: 'not-really.png' })), numbered(['just text']));
});

test('Read refuses a binary file with NUL bytes', async () => {
  await file('program.bin', Buffer.from([0x7f, 0x45, 0x4c, 0x46, 0, 0, 1]));
  assert.deepEqual(await read({ file_path: 'program.bin' }), {
    content: [{ type: 'text', text: 'Path "program.bin" is a binary file (7 bytes), not UTF-8 text; Read shows only text and PNG, JPEG, GIF or WebP images.' }],
    isError: true,
  });
});

test('Read refuses a file that is not valid UTF-8', async () => {
  await file('latin1.txt', Buffer.from('caf\xe9 cr\xe8me\n', 'latin1'));
  assert.deepEqual(await read({ file_path: 'latin1.txt' }), {
    content: [{ type: 'text', text: 'Path "latin1.txt" is a binary file (11 bytes), not UTF-8 text; Read shows only text and PNG, JPEG, GIF or WebP images.' }],
    isError: true,
  });
});

test('Read accepts UTF-8 whose multi-byte character is cut by the 8 KiB sniffing window', async () => {
  await file('cut.txt', `${'a'.repeat(8191)}é\n`);
  const result = await read({ file_path: 'cut.txt' });
  assert.equal(result.isError, false);
  assert.match(textOf(result), /^ {5}1\ta{2000}\.\.\. \[line truncated, 6192 more characters\]$/);
});

test('Read refuses a directory and suggests LS', async () => {
  await mkdir(path.join(root, 'folder'), { recursive: true });
  assert.deepEqual(await read({ file_path: 'folder' }), {
    content: [{ type: 'text', text: 'Path "folder" is a directory, not a file; use LS to list its entries.' }],
    isError: true,
  });
});

test('Read refuses a file over 10 MiB without reading it', async () => {
  const big = await file('big.log', '');
  await truncate(big, 12 * 1024 * 1024);
  assert.deepEqual(await read({ file_path: 'big.log' }), {
    content: [{ type: 'text', text: 'Path "big.log" is 12.0 MiB, over the 10 MiB Read accepts; search it with Grep instead.' }],
    isError: true,
  });
});

test('Read refuses a FIFO instead of waiting for a writer', async () => {
  execFileSync('mkfifo', [path.join(root, 'pipe')]);
  assert.deepEqual(await read({ file_path: 'pipe' }), {
    content: [{ type: 'text', text: 'Path "pipe" is not a regular file (it is a FIFO, socket or device); Read only reads regular files.' }],
    isError: true,
  });
});

test('Read reports a missing file by the path it was given', async () => {
  assert.deepEqual(await read({ file_path: 'missing/nothing.txt' }), {
    content: [{ type: 'text', text: 'Path "missing/nothing.txt" does not exist.' }],
    isError: true,
  });
});

test('Read reports a path below a file as not existing', async () => {
  assert.deepEqual(await read({ file_path: 'hello.txt/child' }), {
    content: [{ type: 'text', text: 'Path "hello.txt/child" does not exist: a part of it is a file, not a directory.' }],
    isError: true,
  });
});

test('Read refuses a symlink that leaves the workspace, to a file or through a directory', async () => {
  for (const file_path of ['file-out', 'dir-out/secret.txt', path.join(root, 'dir-out', 'secret.txt')]) {
    const result = await read({ file_path });
    assert.deepEqual(result, {
      content: [{ type: 'text', text: `Path ${JSON.stringify(file_path)} is outside the workspace; file tools may only use paths under the workspace root.` }],
      isError: true,
    });
  }
});

test('Read refuses .. escapes and absolute paths outside, revealing nothing about them', async () => {
  for (const file_path of ['../outside/secret.txt', path.join(base, 'outside', 'secret.txt'), '../outside/missing.txt']) {
    const result = await read({ file_path });
    assert.equal(result.isError, true);
    assert.equal(textOf(result), `Path ${JSON.stringify(file_path)} is outside the workspace; file tools may only use paths under the workspace root.`);
  }
});

test('Read follows a symlink that stays inside the workspace', async () => {
  await symlink('hello.txt', path.join(root, 'hello-link'));
  assert.equal(textOf(await read({ file_path: 'hello-link' })), numbered(['one', 'two', '\tthree']));
});

test('Read refuses an empty path and a NUL byte', async () => {
  assert.deepEqual(await read({ file_path: '' }), { content: [{ type: 'text', text: 'The path is empty.' }], isError: true });
  assert.deepEqual(await read({ file_path: 'hello.txt\0' }), {
    content: [{ type: 'text', text: 'Path "hello.txt\\u0000" contains a NUL byte.' }],
    isError: true,
  });
});

test('Read stops when its signal is aborted', async () => {
  const controller = new AbortController();
  controller.abort();
  await assert.rejects(Promise.resolve(Read.execute({ file_path: 'long.txt' }, toolContext(controller.signal))), { name: 'AbortError' });
});

test('Read takes positive integer offset and limit and no other properties', () => {
  const validate = compileInputSchema(Read.inputSchema);
  assert.equal(validate({ file_path: 'a', offset: 1, limit: 1 }), true);
  assert.equal(validate({ file_path: 'a', offset: 0 }), false);
  assert.equal(validate({ file_path: 'a', limit: 1.5 }), false);
  assert.equal(validate({ file_path: 'a', encoding: 'utf8' }), false);
  assert.equal(validate({}), false);
  assert.deepEqual(Read.annotations, { title: 'Read file', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false });
});
