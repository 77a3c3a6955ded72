import assert from 'node:assert/strict';
import type { KeySpec } from '#src/auth/keyring.js';
import { mkdir, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Writable } from 'node:stream';
import { test, type TestContext } from 'node:test';
import { pino } from 'pino';
import { loadApiKeys } from '#src/config/api-keys.js';
import { buildApp } from '#src/http/app.js';
import { keysReloader } from '#src/main/key-reload.js';
import { tokenCallersAsKeys } from '#src/auth/workspaces.js';
import { openKeyWorkspaces } from '#src/assembly/key-workspaces.js';
import { Workspace } from '#src/os/fs/workspace.js';
import { createToolset, type ToolsetConfig } from '#src/assembly/toolset.js';
import { temporaryDirectory } from '../support/workspace.js';

// Tools that read no other workspace, so keys in two workspaces need no Bash sandbox here.
const TOOLS = ['Echo', 'Read', 'LS'];
const entry = (label: string, extra: Partial<KeySpec> = {}): KeySpec => ({ label, key: `${label}-secret-0123456789abcdef`, tools: TOOLS, ...extra });
const bearer = (key: KeySpec) => ({ authorization: `Bearer ${key.key}` });
const INVALID = {
  content: [{ type: 'text', text: 'The API key is not valid.' }],
  isError: true,
  error: { code: 'UNAUTHORIZED', message: 'The API key is not valid.' },
};

/**
 * A server built as `serve` builds it, in-process: a workspace, `a` and `b` for keys of their own,
 * a keys file beside them (`keys`), and a reloader whose log lines are collected.
 */
async function server(
  t: TestContext,
  keys: KeySpec[] | ((dir: (name: string) => string) => KeySpec[]),
  { keysFile = true, checkKeys }: { keysFile?: boolean; checkKeys?: (keys: readonly KeySpec[]) => void } = {},
) {
  const base = await temporaryDirectory(t, 'toolport-reload-');
  for (const name of ['server', 'a', 'b']) {
    await mkdir(path.join(base, name));
    await writeFile(path.join(base, name, `${name}.txt`), `the file of ${name}\n`);
  }
  const dir = (name: string): string => path.join(base, name);
  const file = path.join(base, 'keys.json');
  // As an operator's tools should: a new file renamed over the old, so no reload reads half of one.
  const write = async (entries: unknown): Promise<void> => {
    await writeFile(`${file}.new`, typeof entries === 'string' ? entries : JSON.stringify(entries));
    await rename(`${file}.new`, file);
  };
  await write(typeof keys === 'function' ? keys(dir) : keys);
  const workspace = await Workspace.open(path.join(base, 'server'));
  t.after(() => workspace.close());
  const config: ToolsetConfig & { apiKeys: string[]; apiKeysFile: string | undefined } = {
    workspace: workspace.root,
    bashSandbox: false,
    plugins: [],
    tools: undefined,
    apiKeys: [],
    apiKeysFile: keysFile ? file : undefined,
  };
  const served = await createToolset(config, base, undefined, workspace);
  const servedTools = served.list().map((tool) => tool.name);
  const loaded = keysFile ? await loadApiKeys(config, servedTools) : [entry('env')];
  const workspaces = await openKeyWorkspaces({ config, server: workspace, served, keys: loaded, cwd: base });
  t.after(() => workspaces.close());
  const app = await buildApp({ registry: workspaces.registry, toolsets: workspaces.toolsets, apiKeys: workspaces.keys });
  t.after(() => app.close());
  const lines: Array<Record<string, unknown>> = [];
  const destination = new Writable({
    write(chunk, _encoding, done) {
      lines.push(
        ...String(chunk)
          .split('\n')
          .filter(Boolean)
          .map((line) => JSON.parse(line) as Record<string, unknown>),
      );
      done();
    },
  });
  const reload = keysReloader({
    config,
    servedTools,
    keys: workspaces.keys,
    checkKeys,
    workspaces,
    replaceKeys: (next) => app.toolport.replaceKeys(next),
    log: pino({ level: 'info' }, destination),
  });
  return { app, reload, write, lines, dir, file, servedTools };
}

const readFirstLine = async (app: Awaited<ReturnType<typeof server>>['app'], key: KeySpec, file: string) => {
  const res = await app.inject({ method: 'POST', url: '/tools/Read', headers: bearer(key), payload: { file_path: file } });
  return {
    status: res.statusCode,
    text: res.statusCode === 200 ? (res.json() as { content: Array<{ text: string }> }).content[0]!.text.split('\n')[0]! : res.body,
  };
};

test("a reload puts the file's keys in place: a removed key is refused, a changed scope applies, a new key works, and the log names only labels", async (t) => {
  const admin = entry('admin');
  const bot = entry('bot');
  const s = await server(t, [admin, bot]);
  assert.equal((await s.app.inject({ url: '/tools', headers: bearer(bot) })).statusCode, 200);
  const newcomer = entry('newcomer', { tools: ['LS'] });
  await s.write([{ ...admin, tools: ['Echo'] }, newcomer]);
  assert.equal(await s.reload(), 'reloaded');

  const removed = await s.app.inject({ url: '/tools', headers: bearer(bot) });
  assert.equal(removed.statusCode, 401);
  assert.deepEqual(removed.json(), INVALID);
  assert.equal((await s.app.inject({ method: 'POST', url: '/tools/Read', headers: bearer(admin), payload: { file_path: 'server.txt' } })).statusCode, 403);
  assert.equal((await s.app.inject({ method: 'POST', url: '/tools/Echo', headers: bearer(admin), payload: { text: 'hi' } })).statusCode, 200);
  const listed = await s.app.inject({ url: '/tools', headers: bearer(newcomer) });
  assert.deepEqual(
    (listed.json() as Array<{ name: string }>).map((tool) => tool.name),
    ['LS'],
  );

  assert.deepEqual(
    s.lines.map(({ level, msg, keyLabels, added, removed: gone, changed }) => ({ level, msg, keyLabels, added, removed: gone, changed })),
    [{ level: 30, msg: 'API keys reloaded', keyLabels: ['admin', 'newcomer'], added: ['newcomer'], removed: ['bot'], changed: ['admin'] }],
  );
  assert.doesNotMatch(JSON.stringify(s.lines), /secret/);
});

test('a broken keys file keeps the keys in use, with one warning that says why and shows no key', async (t) => {
  const admin = entry('admin');
  const bot = entry('bot');
  const s = await server(t, [admin, bot]);
  const file = JSON.stringify(s.file);
  const broken: Array<[string, unknown, string]> = [
    ['bad JSON', `[{"label": "admin",, "key": "${admin.key}"}]`, `Invalid TOOLPORT_API_KEYS_FILE ${file}: it is not valid JSON (line 1, column 20).`],
    ['a duplicate key', [admin, { ...bot, key: admin.key }], `Invalid TOOLPORT_API_KEYS_FILE ${file}: entry 2 ("bot") has the same key as entry 1 ("admin").`],
    [
      'an unknown tool',
      [admin, { ...bot, tools: ['Nope'] }],
      `Invalid TOOLPORT_API_KEYS_FILE ${file}: entry 2 ("bot"): "tools" names "Nope", which is not served (served tools: ${s.servedTools.join(', ')}).`,
    ],
    [
      'a short key',
      [{ ...admin, key: 'short' }],
      `Invalid TOOLPORT_API_KEYS_FILE ${file}: entry 1 ("admin"): the key is shorter than 16 characters (use a long random secret, e.g. \`openssl rand -hex 32\`).`,
    ],
    ['no keys', [], `Invalid TOOLPORT_API_KEYS_FILE ${file}: it holds no keys; list at least one {"label": ..., "key": ...} entry.`],
    [
      'a workspace not open',
      [admin, { ...bot, workspace: s.dir('a') }],
      `Invalid TOOLPORT_API_KEYS_FILE ${file}: the workspace ${JSON.stringify(s.dir('a'))} of key "bot" was not open at start-up, and a reload opens no workspace; restart the server to add it.`,
    ],
  ];
  for (const [what, contents, reason] of broken) {
    s.lines.length = 0;
    await s.write(contents);
    assert.equal(await s.reload(), 'kept', what);
    assert.deepEqual(
      s.lines,
      [{ level: 40, time: s.lines[0]?.time, pid: process.pid, hostname: s.lines[0]?.hostname, reason, msg: 'API keys not reloaded; the keys in use are kept' }],
      what,
    );
    assert.doesNotMatch(JSON.stringify(s.lines), /secret-0123456789/, what);
    for (const key of [admin, bot]) assert.equal((await s.app.inject({ url: '/tools', headers: bearer(key) })).statusCode, 200, `${what}: ${key.label}`);
  }
  s.lines.length = 0;
  await rm(s.file);
  assert.equal(await s.reload(), 'kept');
  assert.equal(s.lines[0]?.reason, `Cannot read TOOLPORT_API_KEYS_FILE ${file}: no such file.`);
  assert.equal((await s.app.inject({ url: '/tools', headers: bearer(bot) })).statusCode, 200);
});

test("a key moved to another workspace open works there from its next request on; a removed key's workspace stays open for a later reload", async (t) => {
  const s = await server(t, (dir) => [entry('admin'), entry('team-a', { workspace: dir('a') }), entry('team-b', { workspace: dir('b') })]);
  const teamA = entry('team-a');
  assert.deepEqual(await readFirstLine(s.app, teamA, 'a.txt'), { status: 200, text: '     1\tthe file of a' });
  await s.write([entry('admin'), entry('team-a', { workspace: s.dir('b') })]);
  assert.equal(await s.reload(), 'reloaded');
  assert.deepEqual(await readFirstLine(s.app, teamA, 'b.txt'), { status: 200, text: '     1\tthe file of b' });
  assert.match((await readFirstLine(s.app, teamA, s.dir('a/a.txt'))).text, /outside the workspace/);
  assert.equal((await readFirstLine(s.app, entry('team-b'), 'b.txt')).status, 401);
  // team-a's old workspace was kept open: a later reload may hand it to a key again.
  await s.write([entry('admin'), entry('team-a', { workspace: s.dir('a') }), entry('team-c', { workspace: s.dir('b') })]);
  assert.equal(await s.reload(), 'reloaded');
  assert.deepEqual(await readFirstLine(s.app, teamA, 'a.txt'), { status: 200, text: '     1\tthe file of a' });
  assert.deepEqual(await readFirstLine(s.app, entry('team-c'), 'b.txt'), { status: 200, text: '     1\tthe file of b' });
});

test("with OAuth on, a reload refuses a key labelled as an access token's caller would be, as start-up does", async (t) => {
  const admin = entry('admin');
  const s = await server(t, [admin], { checkKeys: (keys) => void tokenCallersAsKeys(undefined, keys) });
  s.lines.length = 0;
  const alice = { ...entry('alice'), label: 'sub:alice' };
  await s.write([admin, alice]);
  assert.equal(await s.reload(), 'kept');
  assert.equal(s.lines[0]?.reason, 'Invalid key label "sub:alice": with TOOLPORT_OAUTH_ISSUER set, labels starting "sub:" name the callers of access tokens');
  assert.equal((await s.app.inject({ url: '/tools', headers: bearer(alice) })).statusCode, 401);
});

test('without a keys file, a reload changes nothing and says there is nothing to reload', async (t) => {
  const s = await server(t, [], { keysFile: false });
  assert.equal(await s.reload(), 'no keys file');
  assert.deepEqual(
    s.lines.map(({ level, msg }) => ({ level, msg })),
    [{ level: 40, msg: 'nothing to reload: no keys file is configured (TOOLPORT_API_KEYS_FILE)' }],
  );
  assert.equal((await s.app.inject({ url: '/tools', headers: bearer(entry('env')) })).statusCode, 200);
});

test('twenty reloads asked for while the file keeps changing all put keys in place, the file as it is last winning', async (t) => {
  const s = await server(t, [entry('admin')]);
  const outcomes: Array<Promise<string>> = [];
  for (let i = 0; i < 20; i++) {
    await s.write([entry('admin'), entry(`k${i}`)]);
    outcomes.push(s.reload());
  }
  assert.deepEqual(new Set(await Promise.all(outcomes)), new Set(['reloaded']));
  assert.equal(s.lines.length, 20);
  assert.equal((await s.app.inject({ url: '/tools', headers: bearer(entry('k19')) })).statusCode, 200);
  assert.equal((await s.app.inject({ url: '/tools', headers: bearer(entry('k18')) })).statusCode, 401);
  assert.deepEqual(s.lines.at(-1)?.keyLabels, ['admin', 'k19']);
});
