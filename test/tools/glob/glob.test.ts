import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { mkdir, open, rm, symlink, utimes, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { compileInputSchema } from '#src/core/validator.js';
import type { ToolDef, ToolResult } from '#src/core/types.js';
import { createGlobTool, type SearchWork } from '#src/tools/glob/glob.js';
import { PATTERN_LIMITS } from '#src/tools/glob/limits.js';
import { Workspace } from '#src/os/fs/workspace.js';
import { toolContext } from '../../support/tool-context.js';
import { temporaryDirectory } from '../../support/workspace.js';

const base = await temporaryDirectory({ after }, 'toolport-glob-');
let root: string;
let Glob: ToolDef;

const glob = (input: Record<string, unknown>): Promise<ToolResult> => Promise.resolve(Glob.execute(input, toolContext()));
const result = (text: string, isError = false): ToolResult => ({ content: [{ type: 'text', text }], isError });

/** Writes a file with an explicit modification time (seconds since the epoch). */
async function file(name: string, mtime: number): Promise<void> {
  const absolute = path.join(root, name);
  await mkdir(path.dirname(absolute), { recursive: true });
  await writeFile(absolute, name);
  await utimes(absolute, mtime, mtime);
}

before(async () => {
  root = path.join(base, 'ws');
  await mkdir(root);
  await mkdir(path.join(base, 'outside'));
  await writeFile(path.join(base, 'outside', 'secret.ts'), '');
  await mkdir(path.join(base, 'ws-evil'));
  await writeFile(path.join(base, 'ws-evil', 'evil.ts'), '');
  await file('src/old.ts', 1_000_000);
  await file('src/new.ts', 3_000_000);
  await file('src/mid.ts', 2_000_000);
  await file('src/deep/deeper/x.ts', 1_500_000);
  await file('src/readme.md', 4_000_000);
  await file('.config/hidden.ts', 500_000);
  await file('node_modules/pkg/index.ts', 5_000_000);
  await file('.git/hooks/pre-commit.ts', 5_000_000);
  await symlink(path.join(base, 'outside'), path.join(root, 'link-out'));
  await symlink(path.join(base, 'outside', 'secret.ts'), path.join(root, 'secret-link.ts'));
  await symlink('src', path.join(root, 'link-in'));
  Glob = createGlobTool(await Workspace.open(root));
});

test('Glob lists matching files relative to the root, newest first', async () => {
  assert.deepEqual(
    await glob({ pattern: '**/*.ts' }),
    result(['src/new.ts', 'src/mid.ts', 'src/deep/deeper/x.ts', 'src/old.ts', '.config/hidden.ts'].join('\n')),
  );
});

test('Glob orders by modification time also the matches that its crawl did not take times for, such as those of "src/./*.ts"', async () => {
  // The crawl takes the times of files that match the pattern as picomatch reads it; the crawler
  // reads "src/./" and "src//" as "src/", so these are looked up again afterwards.
  assert.deepEqual(await glob({ pattern: 'src/./*.ts' }), result('src/new.ts\nsrc/mid.ts\nsrc/old.ts'));
  assert.deepEqual(await glob({ pattern: 'src//*.{md,ts}' }), result('src/readme.md\nsrc/new.ts\nsrc/mid.ts\nsrc/old.ts'));
});

test('Glob sorts files with the same mtime by path', async () => {
  await file('same/b.txt', 7_000_000);
  await file('same/a.txt', 7_000_000);
  await file('same/c.txt', 7_000_000);
  assert.deepEqual(await glob({ pattern: 'same/*' }), result('same/a.txt\nsame/b.txt\nsame/c.txt'));
});

test('Glob searches below path and still shows paths relative to the root', async () => {
  assert.deepEqual(await glob({ pattern: '*.ts', path: 'src' }), result('src/new.ts\nsrc/mid.ts\nsrc/old.ts'));
  assert.deepEqual(await glob({ pattern: '**/x.ts', path: path.join(root, 'src', 'deep') }), result('src/deep/deeper/x.ts'));
});

test('Glob expands braces', async () => {
  assert.deepEqual(await glob({ pattern: 'src/*.{md,ts}' }), result('src/readme.md\nsrc/new.ts\nsrc/mid.ts\nsrc/old.ts'));
});

test('Glob says "No files found" when nothing matches', async () => {
  assert.deepEqual(await glob({ pattern: '**/*.rs' }), result('No files found'));
});

test('Glob returns files only, not directories', async () => {
  assert.deepEqual(await glob({ pattern: 'src/*', path: '.' }), result('src/readme.md\nsrc/new.ts\nsrc/mid.ts\nsrc/old.ts'));
});

test('Glob skips .git and node_modules unless the pattern names them', async () => {
  const all = await glob({ pattern: '**/*' });
  const text = all.content[0]?.type === 'text' ? all.content[0].text : '';
  assert.ok(!text.includes('node_modules') && !text.includes('.git/'), text);
  assert.deepEqual(await glob({ pattern: 'node_modules/**/*.ts' }), result('node_modules/pkg/index.ts'));
  assert.deepEqual(await glob({ pattern: '.git/**' }), result('.git/hooks/pre-commit.ts'));
});

test("Glob neither follows nor lists symlinks, even in the pattern's leading directories, so nothing outside shows up", async () => {
  for (const pattern of ['link-out/**', 'link-out/*.ts', 'link-out/**/*.ts', 'secret-link.ts', '*.ts', 'link-in/*.ts', 'link-in/**/x.ts']) {
    assert.deepEqual(await glob({ pattern }), result('No files found'), pattern);
  }
});

test('Glob caps the result at 100 files and says how many matched', async () => {
  await Promise.all(Array.from({ length: 120 }, (_, i) => file(`many/f${String(i).padStart(3, '0')}.txt`, 10_000_000 + i)));
  const r = await glob({ pattern: 'many/*.txt' });
  const lines = (r.content[0]?.type === 'text' ? r.content[0].text : '').split('\n');
  assert.equal(r.isError, false);
  assert.equal(lines[0], 'many/f119.txt');
  assert.equal(lines[99], 'many/f020.txt');
  assert.equal(lines[100], '');
  assert.equal(lines[101], '(Showing the 100 most recently modified of 120 matching files. Use a more specific pattern or path to narrow the search.)');
  assert.equal(lines.length, 102);
});

test('Glob refuses patterns that climb out with ..', async () => {
  for (const pattern of ['../**/*.ts', 'src/../../outside/*.ts', '{..,src}/*.ts', '**/..', '+(..)/*']) {
    assert.deepEqual(
      await glob({ pattern }),
      result(`Pattern ${JSON.stringify(pattern)} uses "..". Glob searches below path only; pass the directory to search as path instead.`, true),
    );
  }
});

test('Glob accepts names that merely start with two dots', async () => {
  await file('..notes.txt', 8_000_000);
  assert.deepEqual(await glob({ pattern: '..notes.txt' }), result('..notes.txt'));
  assert.deepEqual(await glob({ pattern: './..notes.txt' }), result('..notes.txt'));
  assert.deepEqual(await glob({ pattern: '..*' }), result('..notes.txt'));
  await file('..dir/inner.txt', 8_000_000);
  assert.deepEqual(await glob({ pattern: '..dir/*.txt' }), result('..dir/inner.txt'));
  assert.deepEqual(await glob({ pattern: '**/inner.txt' }), result('..dir/inner.txt'));
});

test('Glob refuses ".." and absolute patterns hidden behind backslash escapes, which the crawler unescapes', async () => {
  for (const pattern of ['\\.\\./\\.\\./\\.\\./etc/passwd', 'src/\\.\\./\\.\\./outside/*.ts', '.\\./*', '{\\.\\.,src}/*.ts']) {
    assert.deepEqual(
      await glob({ pattern }),
      result(`Pattern ${JSON.stringify(pattern)} uses "..". Glob searches below path only; pass the directory to search as path instead.`, true),
    );
  }
  assert.deepEqual(
    await glob({ pattern: '\\/etc/passwd' }),
    result('Pattern "\\\\/etc/passwd" is absolute. Give a pattern relative to path, and pass the directory to search as path.', true),
  );
});

test('Glob refuses absolute and empty patterns', async () => {
  assert.deepEqual(
    await glob({ pattern: `${base}/outside/*.ts` }),
    result(`Pattern ${JSON.stringify(`${base}/outside/*.ts`)} is absolute. Give a pattern relative to path, and pass the directory to search as path.`, true),
  );
  assert.deepEqual(await glob({ pattern: '' }), result('The pattern is empty; give a glob pattern such as "**/*.ts".', true));
});

test('Glob refuses a path outside the workspace, also through a symlink or a sibling with the same prefix', async () => {
  for (const given of ['..', 'link-out', path.join(base, 'outside'), path.join(base, 'ws-evil'), '../ws-evil']) {
    assert.deepEqual(
      await glob({ pattern: '**/*.ts', path: given }),
      result(`Path ${JSON.stringify(given)} is outside the workspace; file tools may only use paths under the workspace root.`, true),
    );
  }
});

test('Glob refuses a path that is a file or does not exist', async () => {
  assert.deepEqual(await glob({ pattern: '*', path: 'src/new.ts' }), result('Path "src/new.ts" is a file, not a directory; Glob searches directories.', true));
  assert.deepEqual(await glob({ pattern: '*', path: 'nope' }), result('Path "nope" does not exist.', true));
});

test('Glob stops when its signal is aborted', async () => {
  const controller = new AbortController();
  controller.abort();
  await assert.rejects(Promise.resolve(Glob.execute({ pattern: '**/*' }, toolContext(controller.signal))), { name: 'AbortError' });
});

test('Glob takes a pattern and an optional path and no other properties', () => {
  const validate = compileInputSchema(Glob.inputSchema);
  assert.equal(validate({ pattern: '*' }), true);
  assert.equal(validate({ pattern: '*', path: 'src' }), true);
  assert.equal(validate({ path: 'src' }), false);
  assert.equal(validate({ pattern: '*', ignore: [] }), false);
  assert.deepEqual(Glob.annotations, { title: 'Find files', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false });
});

// A name that a pattern with many wildcards backtracks on for minutes: found by the crawler, it would
// block the event loop, so these tests hang instead of failing if a refusal goes missing.
const HOSTILE = 'a'.repeat(100);
const tooMany = (pattern: string, what: string): ToolResult =>
  result(`Pattern ${JSON.stringify(pattern)} ${what}. ${PATTERN_LIMITS} Use a simpler pattern, such as "*foo*" or "**/*.ts".`, true);

test('Glob refuses a pattern with more than two "*" in one path segment before matching any name', async () => {
  await file(`hostile/${HOSTILE}`, 9_000_000);
  assert.deepEqual(await glob({ pattern: '*a*a*a*a*a*a*c', path: 'hostile' }), tooMany('*a*a*a*a*a*a*c', 'has 7 "*" wildcards in one path segment'));
  assert.deepEqual(await glob({ pattern: 'hostile/*a*a*c' }), tooMany('hostile/*a*a*c', 'has 3 "*" wildcards in one path segment'));
  assert.deepEqual(
    await glob({ pattern: 'hostile/{x,*a*a*c}' }),
    tooMany('hostile/{x,*a*a*c}', 'has 3 "*" wildcards in one path segment (in "hostile/*a*a*c", one of its brace alternatives)'),
  );
  // A brace alternative next to a "*" adds a wildcard: picomatch compiles the two apart.
  assert.deepEqual(
    await glob({ pattern: 'hostile/*{*a,b}*c' }),
    tooMany('hostile/*{*a,b}*c', 'has 3 "*" wildcards in one path segment (in "hostile/**a*c", one of its brace alternatives)'),
  );
});

test('Glob refuses wildcards spread over segments, a third "**", "**" inside a segment and braces past 16 alternatives', async () => {
  assert.deepEqual(await glob({ pattern: '*a*/*a*/x' }), tooMany('*a*/*a*/x', 'has 4 "*" wildcards in all'));
  assert.deepEqual(await glob({ pattern: '**/a/**/b/**/c' }), tooMany('**/a/**/b/**/c', 'has 3 "**" globstars'));
  assert.deepEqual(
    await glob({ pattern: 'src/**.ts' }),
    result('Pattern "src/**.ts" uses "**" inside a path segment. "**" must be a whole segment, as in "src/**/*.ts"; within a name use "*".', true),
  );
  assert.deepEqual(
    await glob({ pattern: '{a,b}{c,d}{e,f}{g,h}{i,j}' }),
    result(
      `Pattern "{a,b}{c,d}{e,f}{g,h}{i,j}" has braces that expand to more than 16 alternatives. ${PATTERN_LIMITS} Use fewer alternatives, or several calls.`,
      true,
    ),
  );
});

test('Glob refuses extglobs, which can backtrack for minutes however few their wildcards', async () => {
  for (const pattern of ['@(a|b)', 'hostile/+(a)', '*(a|aa)c', '?(x).ts', '!(*.ts)', 'src/\\\\*(a)']) {
    assert.deepEqual(
      await glob({ pattern }),
      result(
        `Pattern ${JSON.stringify(pattern)} uses extglob syntax ("@(", "!(", "+(", "*(" or "?("), which is refused because it can make matching take minutes. Use braces such as "{a,b}" or a simpler pattern.`,
        true,
      ),
    );
  }
});

test('Glob still matches ordinary patterns within the limits, and escaped stars do not count', async () => {
  for (const name of ['src/a.js', 'src/b.jsx', 'src/c.ts', 'x.test.ts', 'my-foo-bar.md', 'star*star*star.txt']) await file(`plain/${name}`, 9_500_000);
  const inPlain = (pattern: string): Promise<ToolResult> => glob({ pattern, path: 'plain' });
  assert.deepEqual(await inPlain('**/*.ts'), result('plain/src/c.ts\nplain/x.test.ts'));
  assert.deepEqual(await inPlain('src/**/*.{js,jsx}'), result('plain/src/a.js\nplain/src/b.jsx'));
  assert.deepEqual(await inPlain('*.test.*'), result('plain/x.test.ts'));
  assert.deepEqual(await inPlain('*foo*'), result('plain/my-foo-bar.md'));
  assert.deepEqual(await inPlain('**/*.test.*'), result('plain/x.test.ts'));
  assert.deepEqual(await inPlain('star\\*star\\*star*'), result('plain/star*star*star.txt'));
  assert.deepEqual(await glob({ pattern: '*a*', path: 'hostile' }), result(`hostile/${HOSTILE}`));
});

test('Glob states the pattern limits in its description', () => {
  assert.ok(Glob.description.endsWith(` ${PATTERN_LIMITS}`), Glob.description);
});

test("Glob leaves out the server's own temporary and lock files, even when the pattern names them", async () => {
  for (const name of ['.toolport-0123456789abcdef.01234567.tmp', '.toolport-0123456789abcdef.lock', 'kept.txt']) await file(`own/${name}`, 9_600_000);
  assert.deepEqual(await glob({ pattern: '**', path: 'own' }), result('own/kept.txt'));
  assert.deepEqual(await glob({ pattern: 'own/.toolport-*' }), result('No files found'));
});

test('Glob stops reading after its entry budget and says so, instead of holding a huge tree in memory', async () => {
  const dir = path.join(root, 'budget');
  await mkdir(path.join(dir, 'a'), { recursive: true });
  await mkdir(path.join(dir, 'b'), { recursive: true });
  for (let i = 0; i < 30; i += 1) await writeFile(path.join(dir, i < 15 ? 'a' : 'b', `f${i}.txt`), '');
  const Small = createGlobTool(await Workspace.open(root), { maxCrawledEntries: 10 });
  const result = await Small.execute({ pattern: '**/*.txt', path: 'budget' }, toolContext());
  assert.equal(result.isError, false);
  const text = result.content[0]!.type === 'text' ? result.content[0]!.text : '';
  assert.match(
    text,
    /\n\n\(The search stopped after opening \d+ directories and reading \d+ directory entries; files further on were not looked at\. Pass a narrower path or pattern\.\)$/,
  );
  const found = text.split('\n\n')[0]!.split('\n');
  assert.ok(found.length > 0 && found.length < 30, `found ${found.length} of 30`);
});

/** A Glob tool over a workspace of its own, `base/<dir>`, that records the work of its last search. */
async function globIn(
  dir: string,
  maxCrawledEntries?: number,
): Promise<{ root: string; glob: (input: Record<string, unknown>, signal?: AbortSignal) => Promise<ToolResult>; work: () => SearchWork }> {
  const own = path.join(base, dir);
  await mkdir(own, { recursive: true });
  let last: SearchWork = { opens: -1, entries: -1 };
  const tool = createGlobTool(await Workspace.open(own), { maxCrawledEntries, onSearched: (work) => (last = work) });
  return { root: own, glob: (input, signal) => Promise.resolve(tool.execute(input, toolContext(signal))), work: () => last };
}

const textOf = (r: ToolResult): string => (r.content[0]?.type === 'text' ? r.content[0].text : '');
const DEPTH = 1500;
const CHAIN = Array.from({ length: DEPTH }, () => 'a').join('/');
let chain: Promise<void> | undefined;
/** `base/deep`: a chain of DEPTH directories with a file at the bottom, made once. */
function deepChain(): Promise<void> {
  chain ??= (async () => {
    await mkdir(path.join(base, 'deep', CHAIN), { recursive: true });
    await writeFile(path.join(base, 'deep', CHAIN, 'bottom.txt'), '');
  })();
  return chain;
}

test('Glob finds a file at the bottom of a chain 1500 directories deep, opening each directory once', async () => {
  await deepChain();
  const { glob, work } = await globIn('deep');
  assert.deepEqual(await glob({ pattern: '**/bottom.txt' }), result(`${CHAIN}/bottom.txt`));
  // Each directory opened from the start, one component at a time, took 1500 * 1501 / 2 = 1125750 opens.
  assert.ok(work().opens <= DEPTH, `opened ${work().opens} directories for a chain ${DEPTH} deep`);
  assert.equal(work().entries, DEPTH + 1);
  assert.deepEqual(await glob({ pattern: `**/*.txt`, path: CHAIN.slice(0, 1999) }), result(`${CHAIN}/bottom.txt`));
  assert.ok(work().opens <= 2 * DEPTH, `opened ${work().opens} directories`);
});

test('Glob counts the directories it opens against its budget, so a deep chain ends in the note, not in a long search', async () => {
  await deepChain();
  const { glob, work } = await globIn('deep', 100);
  const r = await glob({ pattern: '**/bottom.txt' });
  assert.deepEqual(
    r,
    result(
      `No files found\n\n(The search stopped after opening ${work().opens} directories and reading ${work().entries} directory entries; files further on were not looked at. Pass a narrower path or pattern.)`,
    ),
  );
  assert.equal(work().opens + work().entries, 100);
});

test('Glob does not read directories whose paths are longer than 4096 characters, and says so', async () => {
  const { root: own, glob } = await globIn('long');
  // Sixteen names of 255 characters make a path of 4095: read. The seventeenth is made below it through
  // a descriptor, as the whole path is too long to name.
  const names = Array.from({ length: 17 }, (_, i) => String.fromCharCode(97 + i).repeat(255));
  const readable = path.join(own, ...names.slice(0, 15));
  await mkdir(readable, { recursive: true });
  const parent = await open(readable, 'r');
  try {
    const last = `/proc/self/fd/${parent.fd}/${names[15]}`;
    await mkdir(`${last}/${names[16]}`, { recursive: true });
    await writeFile(`${last}/found.txt`, '');
    await writeFile(`${last}/${names[16]}/lost.txt`, '');
    const found = `${names.slice(0, 16).join('/')}/found.txt`;
    assert.deepEqual(
      await glob({ pattern: '**/*.txt' }),
      result(`${found}\n\n(Directories whose paths are longer than 4096 characters were not searched; no file tool takes such paths.)`),
    );
    // The limit is on the path from the workspace root, wherever the search starts.
    assert.deepEqual(
      await glob({ pattern: '**/*.txt', path: names.slice(0, 3).join('/') }),
      result(`${found}\n\n(Directories whose paths are longer than 4096 characters were not searched; no file tool takes such paths.)`),
    );
    await rm(last, { recursive: true });
  } finally {
    await parent.close();
  }
});

test('Glob closes every directory it opens, when the search ends and when it is aborted halfway', async () => {
  await deepChain();
  const { glob } = await globIn('deep');
  const open = (): number => readdirSync('/proc/self/fd').length;
  const before = open();
  assert.deepEqual(await glob({ pattern: '**/nothing' }), result('No files found'));
  assert.equal(open(), before);
  // Aborted once the crawl holds directories open.
  const controller = new AbortController();
  const watch = (): void => {
    if (open() > before + 1) controller.abort();
    else setImmediate(watch);
  };
  setImmediate(watch);
  await assert.rejects(glob({ pattern: '**/nothing' }, controller.signal), { name: 'AbortError' });
  assert.equal(open(), before);
});

test('Glob shows paths that hold control or formatting characters as JSON strings', async () => {
  const names = ['a\nevil -> secret.txt', 'bell\u0007', 'del\u007f', 'right-to-left\u202etxt.exe', 'line\u2028break', 'plain -> fine', '"quoted"'];
  for (const name of names) await file(`names/${name}`, 9_700_000);
  await file('names/sub\r/inner', 9_700_000);
  await file('names/trailing /inner', 9_700_000);
  // ("**" does not match names with line breaks: picomatch compiles it to ".", which stops at them.)
  const lines = textOf(await glob({ pattern: 'names/{*,*/inner}' })).split('\n');
  assert.deepEqual(lines, [
    'names/"quoted"',
    '"names/a\\nevil -> secret.txt"',
    '"names/bell\\u0007"',
    '"names/del\\u007f"',
    '"names/line\\u2028break"',
    'names/plain -> fine',
    '"names/right-to-left\\u202etxt.exe"',
    '"names/sub\\r/inner"',
    'names/trailing /inner',
  ]);
  const decoded = lines.map((line) => (line.startsWith('"') ? (JSON.parse(line) as string) : line));
  assert.deepEqual(decoded, [...names, 'sub\r/inner', 'trailing /inner'].map((name) => `names/${name}`).sort());
  assert.ok(Glob.description.includes('are shown as JSON strings'), Glob.description);
});
