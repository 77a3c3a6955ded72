import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdir, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { before, after, test } from 'node:test';
import { pino } from 'pino';
import { ToolExecutor } from '#src/core/executor.js';
import { ToolRegistry } from '#src/core/registry.js';
import type { ToolDef } from '#src/core/types.js';
import { createGrepTool, DEFAULT_HEAD_LIMIT, MAX_HEAD_LIMIT } from '#src/tools/grep/grep.js';
import { rgRunner, type GrepConfinement } from '#src/os/sandbox/rg-confined.js';
import { Workspace } from '#src/os/fs/workspace.js';
import { requireOrSkip } from '../../support/require.js';
import { temporaryDirectory } from '../../support/workspace.js';

const FILES: Record<string, string> = {
  'src/app.ts': ['export function hello() {', "  return 'Hello World';", '}', '// block start', '// middle', '// block end', "const flag = '-foo';"].join('\n'),
  'src/util.js': 'function helper() {\n  return "hello";\n}\n',
  'docs/notes.md': 'Notes\nhello from the docs\n',
  '.hidden/secret.ts': 'hello hidden\n',
  'node_modules/pkg/index.js': 'hello from node_modules\n',
  '.ignore': 'generated.ts\n',
  'generated.ts': 'hello generated\n',
  'many/lines.txt': Array.from({ length: 300 }, (_, i) => `match ${i + 1}`).join('\n'),
  'wide/long.txt': Array.from({ length: 200 }, (_, i) => `wide ${i} ${'x'.repeat(400)}`).join('\n'),
};

const base = await temporaryDirectory({ after }, 'toolport-grep-');
let root: string;
let outside: string;
let grep: ToolDef;

before(async () => {
  root = path.join(base, 'ws');
  outside = path.join(base, 'outside');
  for (const [name, text] of Object.entries(FILES)) {
    await mkdir(path.dirname(path.join(root, name)), { recursive: true });
    await writeFile(path.join(root, name), text);
  }
  await mkdir(outside);
  await writeFile(path.join(outside, 'secret.txt'), 'hello outside\n');
  await symlink(outside, path.join(root, 'dir-link-out'));
  await symlink(path.join(outside, 'secret.txt'), path.join(root, 'file-link-out.txt'));
  grep = createGrepTool(await Workspace.open(root));
});

async function search(input: Record<string, unknown>, tool = grep, signal?: AbortSignal): Promise<{ text: string; isError: boolean }> {
  const context = { signal: signal ?? new AbortController().signal, log: pino({ level: 'silent' }), requestId: 'test' };
  const result = await tool.execute(input, context);
  assert.equal(result.content.length, 1);
  const block = result.content[0]!;
  return { text: block.type === 'text' ? block.text : '', isError: result.isError === true };
}

test('Grep lists the files that match by default, sorted and relative to the workspace', async () => {
  assert.deepEqual(await search({ pattern: 'hello' }), {
    text: 'Found 3 files\ndocs/notes.md\nsrc/app.ts\nsrc/util.js',
    isError: false,
  });
});

test('Grep skips hidden files, node_modules, ignored files and symbolic links that leave the workspace', async () => {
  const { text } = await search({ pattern: 'hello', '-i': true });
  assert.doesNotMatch(text, /hidden|node_modules|generated|outside|link-out/);
});

test('Grep searches node_modules when the path points into it', async () => {
  assert.deepEqual(await search({ pattern: 'hello', path: 'node_modules' }), { text: 'Found 1 file\nnode_modules/pkg/index.js', isError: false });
});

test('Grep shows matching lines with line numbers in content mode', async () => {
  assert.deepEqual(await search({ pattern: 'hello', output_mode: 'content' }), {
    text: 'docs/notes.md:2:hello from the docs\nsrc/app.ts:1:export function hello() {\nsrc/util.js:2:  return "hello";',
    isError: false,
  });
});

test('Grep leaves line numbers out when -n is false', async () => {
  assert.deepEqual(await search({ pattern: 'helper', output_mode: 'content', '-n': false }), {
    text: 'src/util.js:function helper() {',
    isError: false,
  });
});

test('Grep counts matching lines per file in count mode', async () => {
  assert.deepEqual(await search({ pattern: 'o', output_mode: 'count', path: 'src' }), {
    text: 'Found 7 matching lines in 2 files\nsrc/app.ts:5\nsrc/util.js:2',
    isError: false,
  });
});

test('Grep ignores case with -i', async () => {
  assert.deepEqual(await search({ pattern: 'HELLO WORLD' }), { text: 'No matches found', isError: false });
  assert.deepEqual(await search({ pattern: 'HELLO WORLD', '-i': true }), { text: 'Found 1 file\nsrc/app.ts', isError: false });
});

test('Grep shows context lines with -A, -B and -C', async () => {
  const base = { pattern: 'middle', output_mode: 'content', path: 'src/app.ts' };
  assert.deepEqual(await search({ ...base, '-A': 1 }), { text: 'src/app.ts:5:// middle\nsrc/app.ts-6-// block end', isError: false });
  assert.deepEqual(await search({ ...base, '-B': 1 }), { text: 'src/app.ts-4-// block start\nsrc/app.ts:5:// middle', isError: false });
  assert.deepEqual(await search({ ...base, '-C': 1 }), {
    text: 'src/app.ts-4-// block start\nsrc/app.ts:5:// middle\nsrc/app.ts-6-// block end',
    isError: false,
  });
});

test('Grep filters files with glob and type', async () => {
  assert.deepEqual(await search({ pattern: 'hello', glob: '*.md' }), { text: 'Found 1 file\ndocs/notes.md', isError: false });
  // As in rg, a glob that names a file overrides ignore files (generated.ts is in .ignore).
  assert.deepEqual(await search({ pattern: 'hello', glob: '*.{ts,js}' }), {
    text: 'Found 3 files\ngenerated.ts\nsrc/app.ts\nsrc/util.js',
    isError: false,
  });
  assert.deepEqual(await search({ pattern: 'hello', type: 'js' }), { text: 'Found 1 file\nsrc/util.js', isError: false });
});

test('Grep matches across lines only in multiline mode', async () => {
  const input = { pattern: 'start.*end', output_mode: 'content', path: 'src' };
  assert.deepEqual(await search(input), { text: 'No matches found', isError: false });
  assert.deepEqual(await search({ ...input, multiline: true }), {
    text: 'src/app.ts:4:// block start\nsrc/app.ts:5:// middle\nsrc/app.ts:6:// block end',
    isError: false,
  });
});

test('Grep returns only the first head_limit entries and says how many there were', async () => {
  assert.deepEqual(await search({ pattern: 'hello', head_limit: 2 }), {
    text: 'Found 3 files\ndocs/notes.md\nsrc/app.ts\n[Showing the first 2 of 3 entries; raise head_limit or narrow the search to see more]',
    isError: false,
  });
  const lines = await search({ pattern: 'match', output_mode: 'content', path: 'many', head_limit: 3 });
  assert.equal(
    lines.text,
    'many/lines.txt:1:match 1\nmany/lines.txt:2:match 2\nmany/lines.txt:3:match 3\n[Showing the first 3 of 300 lines; raise head_limit or narrow the search to see more]',
  );
});

test('Grep returns at most 250 lines by default', async () => {
  const { text, isError } = await search({ pattern: 'match', output_mode: 'content', path: 'many' });
  assert.equal(isError, false);
  const lines = text.split('\n');
  assert.equal(lines.length, DEFAULT_HEAD_LIMIT + 1);
  assert.equal(lines[DEFAULT_HEAD_LIMIT - 1], 'many/lines.txt:250:match 250');
  assert.equal(lines[DEFAULT_HEAD_LIMIT], '[Showing the first 250 of 300 lines; raise head_limit or narrow the search to see more]');
});

test('Grep stops at the output cap after whole lines and says how many it shows', async () => {
  // 200 lines of about 420 characters: 63 fill the 27000 characters kept for lines.
  const shown = Array.from({ length: 63 }, (_, i) => `wide/long.txt:${i + 1}:wide ${i} ${'x'.repeat(400)}`).join('\n');
  assert.deepEqual(await search({ pattern: 'wide', output_mode: 'content', path: 'wide' }), {
    text: `${shown}\n[Showing the first 63 of 200 lines: the output is limited to 30000 characters; narrow the search with path, glob or type to see more]`,
    isError: false,
  });
});

test('Grep keeps result lines only up to the output cap, in order, and says how many of all it shows', async () => {
  // A workspace of its own: 200000 short matching lines, far more text than the output cap.
  const big = path.join(path.dirname(root), 'big');
  await mkdir(big);
  await writeFile(path.join(big, 'lines.txt'), Array.from({ length: 200_000 }, (_, i) => `L${i + 1}`).join('\n'));
  const tool = createGrepTool(await Workspace.open(big));
  // Lines "lines.txt:N:LN" fill the 27000 characters kept for lines (the cap less room for notes) at N = 1391.
  const shown = Array.from({ length: 1391 }, (_, i) => `lines.txt:${i + 1}:L${i + 1}`).join('\n');
  const note = '[Showing the first 1391 of 200000 lines: the output is limited to 30000 characters; narrow the search with path, glob or type to see more]';
  const input = { pattern: 'L', output_mode: 'content', path: 'lines.txt' };
  assert.deepEqual(await search({ ...input, head_limit: MAX_HEAD_LIMIT }, tool), { text: `${shown}\n${note}`, isError: false });
  // Called directly, past the schema: a limit of a billion used to keep every line and overflow the stack.
  assert.deepEqual(await search({ ...input, head_limit: 1e9 }, tool), { text: `${shown}\n${note}`, isError: false });
});

test('Grep takes a pattern that starts with a dash as the pattern, not an option', async () => {
  assert.deepEqual(await search({ pattern: '-foo', output_mode: 'content' }), { text: "src/app.ts:7:const flag = '-foo';", isError: false });
  assert.deepEqual(await search({ pattern: '--files' }), { text: 'No matches found', isError: false });
});

test('Grep accepts absolute paths inside the workspace and searches single files', async () => {
  assert.deepEqual(await search({ pattern: 'hello', path: path.join(root, 'src', 'util.js'), output_mode: 'count' }), {
    text: 'Found 1 matching line in 1 file\nsrc/util.js:1',
    isError: false,
  });
});

test('Grep refuses a path outside the workspace', async () => {
  for (const given of ['/etc', '..', '../outside']) {
    const result = await search({ pattern: 'root', path: given });
    assert.equal(result.isError, true, given);
    assert.match(result.text, /is outside the workspace/);
  }
});

test('Grep refuses a path through a symbolic link that leaves the workspace', async () => {
  for (const given of ['dir-link-out', 'file-link-out.txt']) {
    assert.deepEqual(await search({ pattern: 'hello', path: given }), {
      text: `Path "${given}" is outside the workspace; file tools may only use paths under the workspace root.`,
      isError: true,
    });
  }
});

test("Grep reports an invalid pattern or file type as an error with ripgrep's message", async () => {
  const pattern = await search({ pattern: '(' });
  assert.equal(pattern.isError, true);
  assert.match(pattern.text, /^ripgrep failed: regex parse error/);
  const type = await search({ pattern: 'x', type: 'nosuchtype' });
  assert.equal(type.isError, true);
  assert.match(type.text, /unrecognized file type/);
});

test('Grep says how to install ripgrep when it is missing', async () => {
  const tool = createGrepTool(await Workspace.open(root), { rgPath: '/nonexistent/rg' });
  const result = await search({ pattern: 'x' }, tool);
  assert.equal(result.isError, true);
  assert.match(result.text, /^ripgrep \(\/nonexistent\/rg\) is not installed on the server/);
  assert.match(result.text, /apt-get install ripgrep/);
});

test('Grep stops when the call is aborted', async () => {
  const controller = new AbortController();
  controller.abort(new Error('client went away'));
  assert.deepEqual(await search({ pattern: 'x' }, grep, controller.signal), { text: 'Grep was aborted: client went away', isError: true });
});

test('Grep is read-only and registers with its Claude Code input schema', async () => {
  assert.equal(grep.name, 'Grep');
  assert.equal(grep.annotations?.readOnlyHint, true);
  assert.deepEqual(Object.keys(grep.inputSchema.properties ?? {}), [
    'pattern',
    'path',
    'glob',
    'type',
    'output_mode',
    '-i',
    '-n',
    '-A',
    '-B',
    '-C',
    'multiline',
    'head_limit',
  ]);
  const executor = new ToolExecutor({ registry: new ToolRegistry().register(grep) });
  await assert.rejects(executor.call('Grep', { pattern: 'x', output_mode: 'lines' }), { code: 'INVALID_INPUT' });
  await assert.rejects(executor.call('Grep', { pattern: 'x', head_limit: 0 }), { code: 'INVALID_INPUT' });
  await assert.rejects(executor.call('Grep', { pattern: 'x', head_limit: 10_001 }), { code: 'INVALID_INPUT' });
  assert.equal((await executor.call('Grep', { pattern: 'helper', head_limit: 10_000 })).isError, false);
  await assert.rejects(executor.call('Grep', { pattern: 'x', include: '*.ts' }), { code: 'INVALID_INPUT' });
  assert.equal((await executor.call('Grep', { pattern: 'helper' })).isError, false);
});

test('Grep refuses a FIFO at once instead of waiting for a writer', { timeout: 10_000 }, async () => {
  await mkdir(path.join(root, 'special'));
  execFileSync('mkfifo', [path.join(root, 'special', 'pipe')]);
  for (const tool of [grep, createGrepTool(await Workspace.open(root), { confine: 'off' })]) {
    assert.deepEqual(await search({ pattern: 'x', path: 'special/pipe' }, tool), {
      text: 'Path "special/pipe" is not a regular file (it is a FIFO, socket or device); Grep searches regular files and directories.',
      isError: true,
    });
  }
  // Met while searching a directory, it is passed over.
  assert.deepEqual(await search({ pattern: 'x', path: 'special' }), { text: 'No matches found', isError: false });
});

test('Grep reports a missing path, and a path through a file, in the words of the other file tools', async () => {
  assert.deepEqual(await search({ pattern: 'x', path: 'nope' }), { text: 'Path "nope" does not exist.', isError: true });
  assert.deepEqual(await search({ pattern: 'x', path: 'src/app.ts/x' }), {
    text: 'Path "src/app.ts/x" does not exist: a part of it is a file, not a directory.',
    isError: true,
  });
});

test("Grep leaves out the server's own temporary and lock files, even when a glob names them", async () => {
  await mkdir(path.join(root, 'own'));
  for (const name of ['.toolport-0123456789abcdef.01234567.tmp', '.toolport-0123456789abcdef.lock', 'kept.txt']) {
    await writeFile(path.join(root, 'own', name), 'hello own\n');
  }
  assert.deepEqual(await search({ pattern: 'hello own', path: 'own', glob: '.toolport-*' }), { text: 'No matches found', isError: false });
  assert.deepEqual(await search({ pattern: 'hello own', path: 'own', glob: '*' }), { text: 'Found 1 file\nown/kept.txt', isError: false });
});

test('Grep finds the same inside its sandbox as without it', async (t) => {
  const ws = await Workspace.open(root);
  const runner = await rgRunner(ws, 'rg', 'on');
  const missing = !runner.found ? 'rg was not found on PATH' : runner.sandbox === undefined ? (runner.problem ?? 'bubblewrap does not work') : undefined;
  if (!requireOrSkip(t, 'ripgrep in the bubblewrap sandbox', missing)) return;
  const inside = createGrepTool(ws, { confine: 'on' });
  const direct = createGrepTool(ws, { confine: 'off' });
  const inputs = [
    { pattern: 'hello' },
    { pattern: 'hello', path: 'src', output_mode: 'content' },
    { pattern: 'middle', path: 'src/app.ts', output_mode: 'content', '-C': 1 },
    { pattern: 'o', path: 'src', output_mode: 'count' },
    { pattern: 'hello', path: 'node_modules' },
    { pattern: 'hello', glob: '*.{ts,js}' },
    { pattern: 'match', path: 'many/lines.txt', output_mode: 'content', head_limit: 2 },
    { pattern: '(' },
  ];
  for (const input of inputs) assert.deepEqual(await search(input, inside), await search(input, direct), JSON.stringify(input));
});

test('Grep with confine "on" refuses to search when the sandbox does not work, and says so without details', async () => {
  const ws = await Workspace.open(root);
  const { rg } = await rgRunner(ws, 'rg', 'off');
  const saved = process.env.PATH;
  // bwrap is looked up on PATH; rg is given by its path.
  process.env.PATH = '/nonexistent';
  try {
    const tool = createGrepTool(ws, { confine: 'on', rgPath: rg });
    assert.deepEqual(await search({ pattern: 'hello' }, tool), {
      text: 'Grep runs ripgrep only inside its sandbox (bubblewrap), and the sandbox does not work on this server. The server log says why.',
      isError: true,
    });
  } finally {
    process.env.PATH = saved;
  }
});

test('Grep shows paths with control or formatting characters as JSON strings, one line each, in every mode and both confinements', async () => {
  const own = path.join(path.dirname(root), 'names');
  await mkdir(path.join(own, 'dir\u202e'), { recursive: true });
  await writeFile(path.join(own, 'a\nevil -> secret.txt:1:fake'), 'x\nneedle here\ny\n');
  await writeFile(path.join(own, 'dir\u202e', 'plain.txt'), 'needle\n');
  await writeFile(path.join(own, 'tab\there.dat'), 'needle\0binary\n');
  const ws = await Workspace.open(own);
  const evil = '"a\\nevil -> secret.txt:1:fake"';
  const cases: [Record<string, unknown>, string][] = [
    [{ pattern: 'needle' }, `Found 2 files\n${evil}\n"dir\\u202e/plain.txt"`],
    [{ pattern: 'needle', output_mode: 'count' }, `Found 2 matching lines in 2 files\n${evil}:1\n"dir\\u202e/plain.txt":1`],
    [{ pattern: 'needle', output_mode: 'content' }, `${evil}:2:needle here\n"dir\\u202e/plain.txt":1:needle`],
    [{ pattern: 'needle', output_mode: 'content', '-n': false, '-C': 1 }, `${evil}-x\n${evil}:needle here\n${evil}-y\n--\n"dir\\u202e/plain.txt":needle`],
    [{ pattern: 'needle', output_mode: 'content', '-C': 1, path: 'a\nevil -> secret.txt:1:fake' }, `${evil}-1-x\n${evil}:2:needle here\n${evil}-3-y`],
    [{ pattern: 'needle', path: 'dir\u202e', output_mode: 'count' }, 'Found 1 matching line in 1 file\n"dir\\u202e/plain.txt":1'],
    // rg's note on a binary file searched by name has no NUL after the path.
    [{ pattern: 'needle', path: 'tab\there.dat', output_mode: 'content' }, '"tab\\there.dat": binary file matches (found "\\0" byte around offset 6)'],
  ];
  const confinements: GrepConfinement[] = ['off', ...((await rgRunner(ws, 'rg', 'on')).sandbox === undefined ? [] : (['on'] as const))];
  for (const confine of confinements) {
    const tool = createGrepTool(ws, { confine });
    for (const [input, text] of cases) assert.deepEqual(await search(input, tool), { text, isError: false }, `${confine} ${JSON.stringify(input)}`);
  }
  assert.ok(grep.description.includes('are shown as JSON strings'), grep.description);
});
