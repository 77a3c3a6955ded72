import assert from 'node:assert/strict';
import { mkdir, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { createServer } from 'node:net';
import { after, before, test } from 'node:test';
import { compileInputSchema, compileOutputSchema } from '#src/core/validator.js';
import type { ObjectSchema, ToolDef, ToolResult } from '#src/core/types.js';
import { PATTERN_LIMITS } from '#src/tools/glob/limits.js';
import { createLsTool, LsOutputSchema, MAX_RESOLVED_LINKS, type LsOutput } from '#src/tools/ls.js';
import { Workspace } from '#src/os/fs/workspace.js';
import { toolContext } from '../support/tool-context.js';
import { temporaryDirectory } from '../support/workspace.js';

const base = await temporaryDirectory({ after }, 'toolport-ls-');
let root: string;
let LS: ToolDef;

const result = (text: string, isError = false): ToolResult => ({ content: [{ type: 'text', text }], isError });
const checkOutput = compileOutputSchema(LsOutputSchema as unknown as ObjectSchema);

/**
 * LS's result as the tests compare it (content, and isError as the pipeline sets it), once its
 * structured content was checked: matching the output schema on every success, none on a failure.
 */
function checked(r: ToolResult): ToolResult {
  if (r.isError === true) assert.equal(r.structuredContent, undefined, 'a failure has no structured content');
  else assert.ok(checkOutput(r.structuredContent), `structured content breaks the output schema: ${JSON.stringify(checkOutput.explain(r.structuredContent))}`);
  return { content: r.content, isError: r.isError === true };
}

/** The structured content of a successful listing. */
async function structured(tool: ToolDef, input: Record<string, unknown>): Promise<LsOutput> {
  const r = await tool.execute(input, toolContext());
  checked(r);
  assert.notEqual(r.isError, true, JSON.stringify(r.content));
  return r.structuredContent as LsOutput;
}

const ls = async (input: Record<string, unknown>): Promise<ToolResult> => checked(await LS.execute(input, toolContext()));

before(async () => {
  root = path.join(base, 'ws');
  await mkdir(path.join(base, 'outside', 'inner'), { recursive: true });
  await writeFile(path.join(base, 'outside', 'secret.txt'), 'secret\n');
  // The listing fixture: files, directories, and links of every kind.
  await mkdir(path.join(root, 'src', 'lib'), { recursive: true });
  await writeFile(path.join(root, 'src', 'b.ts'), '');
  await writeFile(path.join(root, 'src', 'a.ts'), '');
  await writeFile(path.join(root, 'src', '.hidden'), '');
  await writeFile(path.join(root, 'src', 'Z.md'), '');
  await writeFile(path.join(root, 'src', 'debug.log'), '');
  await symlink('a.ts', path.join(root, 'src', 'link-file'));
  await symlink('lib', path.join(root, 'src', 'link-dir'));
  await symlink(path.join(base, 'outside'), path.join(root, 'src', 'link-out'));
  await symlink(path.join(base, 'outside', 'secret.txt'), path.join(root, 'src', 'link-secret'));
  await symlink('gone.txt', path.join(root, 'src', 'link-broken'));
  await writeFile(path.join(root, 'file.txt'), 'text\n');
  LS = createLsTool(await Workspace.open(root));
});

const SRC_LISTING = [
  '.hidden',
  'Z.md',
  'a.ts',
  'b.ts',
  'debug.log',
  'lib/',
  'link-broken -> (outside the workspace or broken)',
  'link-dir -> src/lib/',
  'link-file -> src/a.ts',
  'link-out -> (outside the workspace or broken)',
  'link-secret -> (outside the workspace or broken)',
];

test('LS lists entries sorted by name, marks directories with "/" and shows where symlinks point', async () => {
  assert.deepEqual(await ls({ path: 'src' }), result(`Directory "src", 11 entries:\n${SRC_LISTING.join('\n')}`));
});

test('LS accepts the root as "." and as an absolute path', async () => {
  const listing = 'file.txt\nsrc/';
  assert.deepEqual(await ls({ path: '.' }), result(`Directory ".", 2 entries:\n${listing}`));
  assert.deepEqual(await ls({ path: root }), result(`Directory ${JSON.stringify(root)}, 2 entries:\n${listing}`));
});

test('LS leaves out entries that match ignore patterns and counts them', async () => {
  const r = await ls({ path: 'src', ignore: ['*.log', 'lib', 'link-*', '.*'] });
  assert.deepEqual(r, result('Directory "src", 3 entries (8 ignored):\nZ.md\na.ts\nb.ts'));
});

/** An LS tool over a workspace of its own holding `names` (empty files) in `dir`. */
async function lsWith(dir: string, names: string[]): Promise<(input: Record<string, unknown>) => Promise<ToolResult>> {
  const own = path.join(base, dir);
  await mkdir(own);
  for (const name of names) await writeFile(path.join(own, name), '');
  const tool = createLsTool(await Workspace.open(own));
  return async (input) => checked(await tool.execute(input, toolContext()));
}

test('LS refuses an ignore pattern with more than two "*" in one segment before matching it against a hostile name', async () => {
  // Matching this pattern against this name held the event loop for minutes: a missing refusal hangs the test.
  const ls = await lsWith('hostile', ['a'.repeat(100)]);
  assert.deepEqual(
    await ls({ path: '.', ignore: ['*.log', '*a*a*a*a*a*a*c'] }),
    result(
      `Ignore pattern "*a*a*a*a*a*a*c" has 7 "*" wildcards in one path segment. ${PATTERN_LIMITS} Use a simpler pattern, such as "*foo*" or "**/*.ts".`,
      true,
    ),
  );
  assert.deepEqual(
    await ls({ path: '.', ignore: ['{x,*a*a*c}'] }),
    result(
      `Ignore pattern "{x,*a*a*c}" has 3 "*" wildcards in one path segment (in "*a*a*c", one of its brace alternatives). ${PATTERN_LIMITS} Use a simpler pattern, such as "*foo*" or "**/*.ts".`,
      true,
    ),
  );
  assert.deepEqual(await ls({ path: '.', ignore: ['*a*'] }), result('Directory "." has no entries (1 ignored).'));
});

test('LS refuses extglob ignore patterns', async () => {
  for (const pattern of ['+(a|aa)', '*(a)c', '!(*.ts)', '@(x)', '?(y)']) {
    assert.deepEqual(
      await ls({ path: 'src', ignore: [pattern] }),
      result(
        `Ignore pattern ${JSON.stringify(pattern)} uses extglob syntax ("@(", "!(", "+(", "*(" or "?("), which is refused because it can make matching take minutes. Use braces such as "{a,b}" or a simpler pattern.`,
        true,
      ),
    );
  }
});

test('LS still ignores with ordinary patterns such as "*.test.*", "*foo*" and braces', async () => {
  const ls = await lsWith('plain', ['a.test.ts', 'my-foo.md', 'b.js', 'c.jsx', 'keep.txt']);
  assert.deepEqual(await ls({ path: '.', ignore: ['*.test.*', '*foo*', '*.{js,jsx}'] }), result('Directory ".", 1 entry (4 ignored):\nkeep.txt'));
});

test('LS states the pattern limits in its description', () => {
  assert.ok(LS.description.endsWith(` ${PATTERN_LIMITS}`), LS.description);
});

test('LS matches a directory ignore pattern written with a trailing slash', async () => {
  assert.deepEqual(await ls({ path: '.', ignore: ['src/'] }), result('Directory ".", 1 entry (1 ignored):\nfile.txt'));
});

test('LS says when a directory is empty', async () => {
  await mkdir(path.join(root, 'empty'));
  assert.deepEqual(await ls({ path: 'empty' }), result('Directory "empty" has no entries.'));
  assert.deepEqual(await ls({ path: 'src/lib', ignore: [] }), result('Directory "src/lib" has no entries.'));
});

test('LS shows at most 1000 entries and says how many were left out', async () => {
  const many = path.join(root, 'many');
  await mkdir(many);
  // In batches: 1005 files at once could hit the open-file limit.
  for (let start = 0; start < 1005; start += 100) {
    const names = Array.from({ length: Math.min(100, 1005 - start) }, (_, i) => `f${String(start + i).padStart(4, '0')}`);
    await Promise.all(names.map((name) => writeFile(path.join(many, name), '')));
  }
  const r = await ls({ path: 'many' });
  assert.equal(r.isError, false);
  const text = r.content[0]?.type === 'text' ? r.content[0].text : '';
  const lines = text.split('\n');
  assert.equal(lines[0], 'Directory "many", 1005 entries:');
  assert.equal(lines[1], 'f0000');
  assert.equal(lines[1000], 'f0999');
  assert.equal(lines[1001], '');
  assert.equal(lines[1002], '(5 more entries not shown; only the first 1000 by name are listed. Use Glob or ignore to narrow down.)');
  assert.equal(lines.length, 1003);
});

test('LS refuses a file and suggests Read', async () => {
  assert.deepEqual(await ls({ path: 'file.txt' }), result('Path "file.txt" is a file, not a directory; use Read to read it.', true));
});

test('LS reports a missing directory', async () => {
  assert.deepEqual(await ls({ path: 'nope' }), result('Path "nope" does not exist.', true));
});

test('LS refuses a symlinked directory that leaves the workspace, and .. escapes', async () => {
  for (const given of ['src/link-out', 'src/link-out/inner', '..', '../outside', path.join(base, 'outside')]) {
    assert.deepEqual(
      await ls({ path: given }),
      result(`Path ${JSON.stringify(given)} is outside the workspace; file tools may only use paths under the workspace root.`, true),
    );
  }
});

test('LS lists a symlinked directory that stays inside', async () => {
  assert.deepEqual(await ls({ path: 'src/link-dir' }), result('Directory "src/link-dir" has no entries.'));
});

test('LS stops when its signal is aborted', async () => {
  const controller = new AbortController();
  controller.abort();
  await assert.rejects(Promise.resolve(LS.execute({ path: 'src' }, toolContext(controller.signal))), { name: 'AbortError' });
});

test('LS takes path and an optional list of ignore patterns and no other properties', () => {
  const validate = compileInputSchema(LS.inputSchema);
  assert.equal(validate({ path: '.' }), true);
  assert.equal(validate({ path: '.', ignore: ['*.log'] }), true);
  assert.equal(validate({ path: '.', ignore: '*.log' }), false);
  assert.equal(validate({ path: '.', recursive: true }), false);
  assert.deepEqual(LS.annotations, { title: 'List directory', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false });
});

test("LS leaves out the server's own temporary and lock files, and nothing else", async () => {
  const ls = await lsWith('own', ['.toolport-0123456789abcdef.01234567.tmp', '.toolport-0123456789abcdef.lock', 'kept.txt', '.toolport-notours.tmp']);
  assert.deepEqual(await ls({ path: '.' }), result('Directory ".", 2 entries:\n.toolport-notours.tmp\nkept.txt'));
});

test('LS resolves at most 50 symbolic links per listing, the first by name, and says how to see the others', async () => {
  const own = path.join(base, 'links');
  await mkdir(own);
  await writeFile(path.join(own, 'target.txt'), '');
  const names = Array.from({ length: MAX_RESOLVED_LINKS + 2 }, (_, i) => `l${String(i).padStart(2, '0')}`);
  for (const name of names) await symlink('target.txt', path.join(own, name));
  const tool = createLsTool(await Workspace.open(own));
  const r = checked(await tool.execute({ path: '.' }, toolContext()));
  const lines = names.map((name, i) => `${name} -> ${i < MAX_RESOLVED_LINKS ? 'target.txt' : '(not resolved: too many links)'}`);
  assert.deepEqual(
    r,
    result(
      `Directory ".", ${names.length + 1} entries:\n${lines.join('\n')}\ntarget.txt\n\n` +
        `(Only the first ${MAX_RESOLVED_LINKS} of ${names.length} symbolic links were resolved. To see where another one leads, list this directory with ignore patterns that leave out the others.)`,
    ),
  );
  assert.ok(LS.description.includes(`At most ${MAX_RESOLVED_LINKS} links are resolved per listing`), LS.description);
});

test('LS resolves as many links as it is told to, and counts only links against the limit', async () => {
  const tool = createLsTool(await Workspace.open(root), { maxResolvedLinks: 2 });
  const r = checked(await tool.execute({ path: 'src' }, toolContext()));
  const limited = SRC_LISTING.map((line) =>
    ['link-file', 'link-out', 'link-secret'].some((name) => line.startsWith(`${name} `)) ? `${line.split(' -> ')[0]!} -> (not resolved: too many links)` : line,
  );
  assert.deepEqual(
    r,
    result(
      `Directory "src", 11 entries:\n${limited.join('\n')}\n\n(Only the first 2 of 5 symbolic links were resolved. To see where another one leads, list this directory with ignore patterns that leave out the others.)`,
    ),
  );
});

test('LS shows names with control or formatting characters, or with " -> ", as JSON strings', async () => {
  const own = path.join(base, 'names');
  await mkdir(path.join(own, 'dir\u202e'), { recursive: true });
  for (const name of ['a\nevil -> secret.txt', 'fake -> secret.txt', 'bell\u0007', '"quoted"', 'plain.txt', 'tab\tname.txt']) {
    await writeFile(path.join(own, name), '');
  }
  await symlink('tab\tname.txt', path.join(own, 'link\u2028'));
  await symlink('dir\u202e', path.join(own, 'dir-link'));
  const tool = createLsTool(await Workspace.open(own));
  const listing = [
    '"\\"quoted\\""',
    '"a\\nevil -> secret.txt"',
    '"bell\\u0007"',
    'dir-link -> "dir\\u202e"/',
    '"dir\\u202e"/',
    '"fake -> secret.txt"',
    '"link\\u2028" -> "tab\\tname.txt"',
    'plain.txt',
    '"tab\\tname.txt"',
  ];
  assert.deepEqual(checked(await tool.execute({ path: '.' }, toolContext())), result(`Directory ".", 9 entries:\n${listing.join('\n')}`));
  assert.ok(LS.description.includes('are shown as JSON strings'), LS.description);
});

test("LS returns the listing as structured content too: each entry's exact name and type, and where a link inside leads", async () => {
  assert.deepEqual(await structured(LS, { path: 'src' }), {
    path: 'src',
    entries: [
      { name: '.hidden', type: 'file' },
      { name: 'Z.md', type: 'file' },
      { name: 'a.ts', type: 'file' },
      { name: 'b.ts', type: 'file' },
      { name: 'debug.log', type: 'file' },
      { name: 'lib', type: 'directory' },
      // Broken or outside: no target, as the text says nothing of it either.
      { name: 'link-broken', type: 'symlink' },
      { name: 'link-dir', type: 'symlink', target: 'src/lib/' },
      { name: 'link-file', type: 'symlink', target: 'src/a.ts' },
      { name: 'link-out', type: 'symlink' },
      { name: 'link-secret', type: 'symlink' },
    ],
    total: 11,
    ignored: 0,
  });
  assert.deepEqual(LS.outputSchema, LsOutputSchema);
});

test("LS's structured content counts what ignore left out, and is an empty list for an empty directory", async () => {
  assert.deepEqual(await structured(LS, { path: 'src', ignore: ['*.log', 'lib', 'link-*', '.*'] }), {
    path: 'src',
    entries: [
      { name: 'Z.md', type: 'file' },
      { name: 'a.ts', type: 'file' },
      { name: 'b.ts', type: 'file' },
    ],
    total: 3,
    ignored: 8,
  });
  assert.deepEqual(await structured(LS, { path: 'src', ignore: ['*'] }), { path: 'src', entries: [], total: 0, ignored: 11 });
});

test('LS\'s structured content gives names as they are, a socket as "other", and no target for a link past the cap', async (t) => {
  const own = path.join(base, 'structured');
  await mkdir(own);
  for (const name of ['a\nevil -> secret.txt', 'bell\u0007', 'target.txt']) await writeFile(path.join(own, name), '');
  await symlink('target.txt', path.join(own, 'l1'));
  await symlink('target.txt', path.join(own, 'l2'));
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(path.join(own, 'sock'), resolve));
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const tool = createLsTool(await Workspace.open(own), { maxResolvedLinks: 1 });
  assert.deepEqual((await structured(tool, { path: own })).entries, [
    { name: 'a\nevil -> secret.txt', type: 'file' },
    { name: 'bell\u0007', type: 'file' },
    { name: 'l1', type: 'symlink', target: 'target.txt' },
    { name: 'l2', type: 'symlink' },
    { name: 'sock', type: 'other' },
    { name: 'target.txt', type: 'file' },
  ]);
});

test("LS's structured content holds the first 1000 entries and the total", async () => {
  // The directory of 1005 files the text test made.
  const listing = await structured(LS, { path: 'many' });
  assert.equal(listing.entries.length, 1000);
  assert.deepEqual(
    [listing.entries[0], listing.entries[999]],
    [
      { name: 'f0000', type: 'file' },
      { name: 'f0999', type: 'file' },
    ],
  );
  assert.deepEqual([listing.total, listing.ignored], [1005, 0]);
});
