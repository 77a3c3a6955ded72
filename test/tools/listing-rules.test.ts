import assert from 'node:assert/strict';
import { link, mkdir, readFile, stat, symlink, utimes, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { PermissionDenied, type Permissions } from '#src/core/permissions.js';
import type { ToolDef, ToolResult } from '#src/core/types.js';
import { createEditTool } from '#src/tools/edit.js';
import { createGlobTool } from '#src/tools/glob/glob.js';
import { createGrepTool } from '#src/tools/grep/grep.js';
import { createLsTool, type LsOutput } from '#src/tools/ls.js';
import { createReadTool } from '#src/tools/read.js';
import { createWriteTool } from '#src/tools/write.js';
import { rgRunner } from '#src/os/sandbox/rg-confined.js';
import { Workspace } from '#src/os/fs/workspace.js';
import { requiredOptions } from '../support/require.js';
import { ruledContext, rules, toolContext } from '../support/tool-context.js';
import { temporaryDirectory } from '../support/workspace.js';

// The rules deny `.env` and what `secrets/` holds; every test reaches for them by another
// spelling: `./.env`, `sub/../.env`, the absolute path, a symlink to the file, a hard link, a
// symlink to the directory, a case variation, a glob, and Grep's pattern. On Linux `.ENV` is
// another file: the rules match names exactly, so it is read, listed and searched like any other.

const ENV = 'TOKEN=hunter2-env\n';
const KEY = 'TOKEN=hunter2-key\n';
const FILES: Record<string, string> = {
  '.env': ENV,
  '.ENV': 'TOKEN=upper-case-file\n',
  'secrets/key.txt': KEY,
  'secrets/deep/more.txt': 'TOKEN=hunter2-deep\n',
  'pub/readme.txt': 'TOKEN=public\n',
  'sub/note.txt': 'TOKEN=public-sub\n',
};
// Deny wins; Edit rules govern Write too, Read rules Edit's reading.
const RULES = rules({ deny: ['Read(.env)', 'Edit(.env)', 'Read(secrets/**)', 'Write(secrets/**)'] });
// The directory itself denied, rather than what it holds.
const DIRECTORY_RULES = rules({ deny: ['Read(secrets/)'] });

const base = await temporaryDirectory({ after }, 'toolport-listing-rules-');
const root = path.join(base, 'ws');
let ws: Workspace;

before(async () => {
  for (const [name, content] of Object.entries(FILES)) {
    await mkdir(path.dirname(path.join(root, name)), { recursive: true });
    await writeFile(path.join(root, name), content);
  }
  await symlink('.env', path.join(root, 'link'));
  await symlink('secrets', path.join(root, 'secrets-link'));
  await symlink('../secrets/key.txt', path.join(root, 'pub', 'key-link.txt'));
  await link(path.join(root, '.env'), path.join(root, 'hard.txt'));
  // One time for every file: Glob lists the newest first, and then by path.
  for (const name of [...Object.keys(FILES), 'hard.txt']) await utimes(path.join(root, name), 1_700_000_000, 1_700_000_000);
  ws = await Workspace.open(root);
});
after(() => ws.close());

const ENV_SPELLINGS = ['.env', './.env', 'sub/../.env', 'link', `${root}/.env`, 'pub/../sub/../.env'];
const KEY_SPELLINGS = ['secrets/key.txt', './secrets/deep/../key.txt', 'secrets-link/key.txt', 'pub/key-link.txt', `${root}/secrets-link/key.txt`];
const ENV_DENIED = 'Path ".env" is denied by Read(.env).';
const KEY_DENIED = 'Path "secrets/key.txt" is denied by Read(secrets/**).';
const HARD_LINK =
  'Path "hard.txt" has 2 names (hard links); under rules for Read a file with more than one name is refused, since a rule cannot tell which of its names it is reached by.';

const textOf = (result: ToolResult): string => result.content.map((block) => (block.type === 'text' ? block.text : '[image]')).join('\n');

/** Runs a tool under `permissions` (`'none'`: without rules) and returns its text. */
async function call(tool: ToolDef, input: Record<string, unknown>, permissions: Permissions | 'none' = RULES): Promise<string> {
  return textOf(await tool.execute(input, permissions === 'none' ? toolContext() : ruledContext(permissions)));
}

/**
 * Asserts that the call is refused by the rules with exactly `message`, whose path is the one the
 * rules matched (written for readability) and is checked as the client spelled it: a refusal never
 * tells where a symlink leads.
 */
async function refused(tool: ToolDef, input: Record<string, unknown>, message: string, permissions: Permissions = RULES): Promise<void> {
  const given = String(input.file_path ?? input.path ?? '.');
  const expected = message.replace(/^Path "[^"]*"/, `Path ${JSON.stringify(given)}`);
  await assert.rejects(
    async () => tool.execute(input, ruledContext(permissions)),
    (err: unknown) => err instanceof PermissionDenied && err.message === expected,
    `${tool.name} ${JSON.stringify(input)} must be refused with ${expected}`,
  );
}

/** The lines of a Glob result, sorted (files of one time are listed by path anyway). */
const paths = (text: string): string[] => text.split('\n').sort();

describe('Read, Edit and Write under rules, through every spelling', () => {
  it('Read refuses the denied file by every spelling, naming the path as given and the rule', async () => {
    const read = createReadTool(ws);
    for (const file_path of ENV_SPELLINGS) await refused(read, { file_path }, ENV_DENIED);
    for (const file_path of KEY_SPELLINGS) await refused(read, { file_path }, KEY_DENIED);
  });

  it('Read refuses a file with a second name, whichever name it is reached by', async () => {
    await refused(createReadTool(ws), { file_path: 'hard.txt' }, HARD_LINK);
  });

  it('Read reads .ENV, another file than .env on a case-sensitive file system', async () => {
    assert.match(await call(createReadTool(ws), { file_path: '.ENV' }), /TOKEN=upper-case-file/);
  });

  it('Edit refuses the denied files by every spelling, and they keep their bytes', async () => {
    const edit = createEditTool(ws);
    for (const file_path of ENV_SPELLINGS) await refused(edit, { file_path, old_string: 'hunter2', new_string: 'changed' }, ENV_DENIED);
    for (const file_path of KEY_SPELLINGS) await refused(edit, { file_path, old_string: 'hunter2', new_string: 'changed' }, KEY_DENIED);
    await refused(edit, { file_path: 'hard.txt', old_string: 'hunter2', new_string: 'changed' }, HARD_LINK);
    assert.equal(await readFile(path.join(root, '.env'), 'utf8'), ENV);
    assert.equal(await readFile(path.join(root, 'secrets/key.txt'), 'utf8'), KEY);
  });

  it('Write refuses the denied files by every spelling, and they keep their bytes', async () => {
    const write = createWriteTool(ws);
    for (const file_path of ENV_SPELLINGS) await refused(write, { file_path, content: 'changed' }, 'Path ".env" is denied by Edit(.env).');
    for (const file_path of KEY_SPELLINGS) await refused(write, { file_path, content: 'changed' }, 'Path "secrets/key.txt" is denied by Write(secrets/**).');
    await refused(write, { file_path: 'secrets-link/new.txt', content: 'x' }, 'Path "secrets/new.txt" is denied by Write(secrets/**).');
    await assert.rejects(stat(path.join(root, 'secrets/new.txt')), { code: 'ENOENT' });
    assert.equal(await readFile(path.join(root, '.env'), 'utf8'), ENV);
    assert.equal(await readFile(path.join(root, 'secrets/key.txt'), 'utf8'), KEY);
  });

  it('Write through a hard link replaces that name only: the denied file keeps its bytes', async () => {
    const other = path.join(base, 'hard-ws');
    await mkdir(other);
    await writeFile(path.join(other, '.env'), ENV);
    await link(path.join(other, '.env'), path.join(other, 'hard.txt'));
    const otherWs = await Workspace.open(other);
    try {
      assert.match(await call(createWriteTool(otherWs), { file_path: 'hard.txt', content: 'replaced\n' }), /hard\.txt/);
      assert.equal(await readFile(path.join(other, 'hard.txt'), 'utf8'), 'replaced\n');
      assert.equal(await readFile(path.join(other, '.env'), 'utf8'), ENV);
    } finally {
      await otherWs.close();
    }
  });
});

describe('Glob and LS under rules', () => {
  it('Glob lists no denied file, whatever the pattern, and every other file', async () => {
    const glob = createGlobTool(ws);
    assert.deepEqual(paths(await call(glob, { pattern: '**/*' }, 'none')), [
      '.ENV',
      '.env',
      'hard.txt',
      'pub/readme.txt',
      'secrets/deep/more.txt',
      'secrets/key.txt',
      'sub/note.txt',
    ]);
    assert.deepEqual(paths(await call(glob, { pattern: '**/*' })), ['.ENV', 'hard.txt', 'pub/readme.txt', 'sub/note.txt']);
    for (const pattern of ['.env', '**/.env*', 'secrets/**', 'secrets/*', '**/key.txt', '{.env,secrets/key.txt}', 'secrets/deep/more.txt']) {
      assert.equal(await call(glob, { pattern }), 'No files found', pattern);
    }
    assert.equal(await call(glob, { pattern: '.{env,ENV}' }), '.ENV');
  });

  it('Glob finds nothing in a directory whose files are denied, by its name or through a symlink to it, and refuses one below it', async () => {
    const glob = createGlobTool(ws);
    for (const path of ['secrets', 'secrets-link', `${root}/secrets-link`]) assert.equal(await call(glob, { pattern: '**/*', path }), 'No files found', path);
    // `secrets/**` matches what secrets/ holds, directories included, but not secrets/ itself.
    for (const path of ['secrets/deep', `${root}/secrets-link/deep`])
      await refused(glob, { pattern: '**/*', path }, 'Path "secrets/deep" is denied by Read(secrets/**).');
  });

  it('Glob refuses a denied directory, by its name or through a symlink to it', async () => {
    const glob = createGlobTool(ws);
    const message = 'Path "secrets" is denied by Read(secrets/).';
    for (const path of ['secrets', 'secrets-link', './pub/../secrets']) await refused(glob, { pattern: '*', path }, message, DIRECTORY_RULES);
    assert.deepEqual(paths(await call(glob, { pattern: '**/*' }, DIRECTORY_RULES)), ['.ENV', '.env', 'hard.txt', 'pub/readme.txt', 'sub/note.txt']);
  });

  it('LS of the root leaves out the denied file and shows a link to it as broken, with the counts of what it shows', async () => {
    const result = await createLsTool(ws).execute({ path: '.' }, ruledContext(RULES));
    assert.equal(
      textOf(result),
      [
        'Directory ".", 7 entries:',
        '.ENV',
        'hard.txt',
        'link -> (outside the workspace or broken)',
        'pub/',
        'secrets/',
        'secrets-link -> secrets/',
        'sub/',
      ].join('\n'),
    );
    const listing = result.structuredContent as LsOutput;
    assert.equal(listing.total, 7);
    assert.deepEqual(
      listing.entries.find((entry) => entry.name === 'link'),
      { name: 'link', type: 'symlink' },
    );
  });

  it('LS shows a link to a denied file as broken, never naming its target', async () => {
    const result = await createLsTool(ws).execute({ path: 'pub' }, ruledContext(RULES));
    assert.equal(textOf(result), 'Directory "pub", 2 entries:\nkey-link.txt -> (outside the workspace or broken)\nreadme.txt');
    assert.deepEqual((result.structuredContent as LsOutput).entries[0], { name: 'key-link.txt', type: 'symlink' });
  });

  it('LS of a directory whose files are denied shows no entries, by its name or through a symlink to it', async () => {
    const ls = createLsTool(ws);
    assert.equal(await call(ls, { path: 'secrets' }), 'Directory "secrets" has no entries.');
    assert.equal(await call(ls, { path: 'secrets-link' }), 'Directory "secrets-link" has no entries.');
    assert.equal(await call(ls, { path: 'secrets', ignore: ['*.md'] }), 'Directory "secrets" has no entries.');
  });

  it('LS refuses a denied directory and a denied file, by any spelling, and leaves the directory out of the root', async () => {
    const ls = createLsTool(ws);
    for (const path of ['secrets', 'secrets-link', `${root}/sub/../secrets`])
      await refused(ls, { path }, 'Path "secrets" is denied by Read(secrets/).', DIRECTORY_RULES);
    for (const path of ENV_SPELLINGS) await refused(ls, { path }, ENV_DENIED);
    assert.equal(
      await call(ls, { path: '.' }, DIRECTORY_RULES),
      ['Directory ".", 7 entries:', '.ENV', '.env', 'hard.txt', 'link -> .env', 'pub/', 'secrets-link -> (outside the workspace or broken)', 'sub/'].join('\n'),
    );
  });

  it('Glob and LS show everything to a caller whose rules do not govern reading', async () => {
    const writeOnly = rules({ deny: ['Write(secrets/**)'] });
    assert.equal((await call(createGlobTool(ws), { pattern: '**/*' }, writeOnly)).split('\n').length, 7);
    assert.match(await call(createLsTool(ws), { path: '.' }, writeOnly), /^Directory "\.", 8 entries:\n\.ENV\n\.env\n/);
  });
});

const probe = await Workspace.open(base);
const runner = await rgRunner(probe, 'rg', 'off');
await probe.close();

describe('Grep under rules', requiredOptions('ripgrep', runner.found ? undefined : 'rg was not found on PATH'), () => {
  it('refuses a path that leads to the denied file, by every spelling, and a file with a second name', async () => {
    const grep = createGrepTool(ws);
    for (const path of ENV_SPELLINGS) await refused(grep, { pattern: 'hunter2', path }, ENV_DENIED);
    for (const path of KEY_SPELLINGS) await refused(grep, { pattern: 'hunter2', path }, KEY_DENIED);
    await refused(grep, { pattern: 'hunter2', path: 'hard.txt' }, HARD_LINK);
  });

  it('never shows a denied file whose content matches, whatever the glob, and finds the others', async () => {
    const grep = createGrepTool(ws);
    // Without rules, each of these finds hunter2 in a denied file (or its second name).
    assert.equal(await call(grep, { pattern: 'hunter2', glob: '.env' }, 'none'), 'Found 1 file\n.env');
    assert.equal(await call(grep, { pattern: 'hunter2' }, 'none'), 'Found 3 files\nhard.txt\nsecrets/deep/more.txt\nsecrets/key.txt');
    for (const glob of [undefined, '.env', '**/.env*', 'secrets/**', '*', '{.env,hard.txt}']) {
      for (const output_mode of ['files_with_matches', 'content', 'count']) {
        assert.equal(await call(grep, { pattern: 'hunter2', output_mode, ...(glob !== undefined && { glob }) }), 'No matches found', `${glob} ${output_mode}`);
      }
    }
    assert.equal(await call(grep, { pattern: 'TOKEN', glob: '.*', output_mode: 'content' }), '.ENV:1:TOKEN=upper-case-file');
    assert.equal(await call(grep, { pattern: 'TOKEN', output_mode: 'count' }), 'Found 2 matching lines in 2 files\npub/readme.txt:1\nsub/note.txt:1');
  });

  it('searches a directory whose files are denied as an empty one, by its name or through a symlink to it', async () => {
    const grep = createGrepTool(ws);
    for (const path of ['secrets', 'secrets-link']) assert.equal(await call(grep, { pattern: 'TOKEN', path }), 'No matches found', path);
    await refused(grep, { pattern: 'TOKEN', path: 'secrets-link/deep' }, 'Path "secrets/deep" is denied by Read(secrets/**).');
  });

  it('refuses a denied directory, by its name or through a symlink to it', async () => {
    const grep = createGrepTool(ws);
    for (const path of ['secrets', 'secrets-link'])
      await refused(grep, { pattern: 'TOKEN', path }, 'Path "secrets" is denied by Read(secrets/).', DIRECTORY_RULES);
    assert.equal(await call(grep, { pattern: 'hunter2' }, DIRECTORY_RULES), 'No matches found');
  });

  it('with an allow list, searches only the files it allows, in directories it does not name', async () => {
    const allowPub = rules({ allow: ['Read(pub/**)', 'Read(*.md)'] });
    assert.equal(await call(createGrepTool(ws), { pattern: 'TOKEN', glob: '*' }, allowPub), 'Found 1 file\npub/readme.txt');
    assert.deepEqual(paths(await call(createGlobTool(ws), { pattern: '**/*' }, allowPub)), ['pub/readme.txt']);
    assert.equal(await call(createLsTool(ws), { path: 'sub' }, allowPub), 'Directory "sub" has no entries.');
    await refused(createReadTool(ws), { file_path: 'sub/note.txt' }, 'Path "sub/note.txt" is not allowed by any rule for Read.', allowPub);
  });
});
