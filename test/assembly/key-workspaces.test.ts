import assert from 'node:assert/strict';
import type { KeySpec } from '#src/auth/keyring.js';
import { mkdir, readlink, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test, type TestContext } from 'node:test';
import type { ToolRegistry } from '#src/core/registry.js';
import type { ToolDef } from '#src/core/types.js';
import { openKeyWorkspaces, type KeyWorkspacesOptions } from '#src/assembly/key-workspaces.js';
import { sandboxUnavailableReason } from '#src/os/sandbox/bubblewrap.js';
import { Workspace } from '#src/os/fs/workspace.js';
import { createToolset, type ToolsetConfig } from '#src/assembly/toolset.js';
import { requireOrSkip } from '../support/require.js';
import { toolContext } from '../support/tool-context.js';
import { temporaryDirectory } from '../support/workspace.js';

const SANDBOX_MISSING = await sandboxUnavailableReason(tmpdir());
const CONTEXT = toolContext();

interface Setup {
  base: string;
  server: Workspace;
  served: ToolRegistry;
  config: ToolsetConfig;
  dir(name: string): string;
  open(keys: KeySpec[], overrides?: Partial<KeyWorkspacesOptions>): ReturnType<typeof openKeyWorkspaces>;
}

/** A base directory with `server`, `a` and `b` (each holding `<name>.txt`) and a keys file beside them. */
async function setup(t: TestContext, config: Partial<ToolsetConfig> = {}): Promise<Setup> {
  const base = await temporaryDirectory(t, 'toolport-keyws-');
  for (const name of ['server', 'a', 'b']) {
    await mkdir(path.join(base, name));
    await writeFile(path.join(base, name, `${name}.txt`), `the file of ${name}\n`);
  }
  await writeFile(path.join(base, 'keys.json'), '[]');
  const server = await Workspace.open(path.join(base, 'server'));
  t.after(() => server.close());
  const full: ToolsetConfig = {
    workspace: server.root,
    bashSandbox: false,
    plugins: [],
    tools: undefined,
    apiKeysFile: path.join(base, 'keys.json'),
    ...config,
  };
  const served = await createToolset(full, base, undefined, server);
  return {
    base,
    server,
    served,
    config: full,
    dir: (name) => path.join(base, name),
    async open(keys, overrides = {}) {
      const opened = await openKeyWorkspaces({ config: full, server, served, keys, cwd: base, ...overrides });
      t.after(() => opened.close());
      return opened;
    },
  };
}

const key = (label: string, extra: Partial<KeySpec> = {}): KeySpec => ({ label, key: `${label}-secret-0123456789abcdef`, ...extra });
const text = (result: { content: Array<{ type: string; text?: string }> }): string => result.content.map((c) => c.text ?? '').join('\n');

async function rejection(promise: Promise<unknown>): Promise<string> {
  return promise.then(
    () => assert.fail('the workspaces opened'),
    (err: unknown) => (err as Error).message,
  );
}

test("keys without a workspace of their own use the server's tools, and no others are made", async (t) => {
  const s = await setup(t);
  const opened = await s.open([key('admin'), key('reader', { tools: ['Read'] })]);
  assert.equal(opened.registry, s.served);
  assert.equal(opened.toolsets.size, 0);
  assert.deepEqual(opened.keys, [key('admin'), key('reader', { tools: ['Read'] })]);
});

test("a key's workspace gets the served tools in their order, bound to it, made canonical; plug-in tools are shared", async (t) => {
  const Plugin: ToolDef = { name: 'Plugin', description: 'A plug-in.', inputSchema: { type: 'object' }, execute: () => ({ content: [] }) };
  const s = await setup(t);
  s.served.register(Plugin);
  await symlink(s.dir('a'), s.dir('a-link'));
  // Without Bash in either scope, keys in two workspaces need no sandbox (below).
  const tools = ['Read', 'LS', 'Plugin'];
  const opened = await s.open([key('team-a', { workspace: s.dir('a-link'), tools }), key('same-as-server', { workspace: `${s.dir('server')}/`, tools })]);
  assert.deepEqual(opened.keys, [key('team-a', { workspace: s.dir('a'), tools }), key('same-as-server', { tools })]);
  const toolset = opened.toolsets.get(s.dir('a'))!;
  assert.deepEqual([...opened.toolsets.keys()], [s.dir('a')]);
  assert.deepEqual(
    toolset.list().map((tool) => tool.name),
    s.served.list().map((tool) => tool.name),
  );
  assert.equal(toolset.get('Plugin'), Plugin);
  assert.equal(toolset.get('Echo'), s.served.get('Echo'));
  assert.notEqual(toolset.get('Read'), s.served.get('Read'));
  assert.equal(text(await toolset.get('Read')!.execute({ file_path: 'a.txt' }, CONTEXT)).split('\n')[0], '     1\tthe file of a');
  assert.equal(text(await toolset.get('LS')!.execute({ path: '.' }, CONTEXT)).includes('server.txt'), false);
  // A key uses the server's workspace beside team-a's: its tools are made anew (so that its Bash hides team-a's), plug-ins still shared.
  assert.notEqual(opened.registry, s.served);
  assert.equal(opened.registry.get('Plugin'), Plugin);
  assert.equal(text(await opened.registry.get('Read')!.execute({ file_path: 'server.txt' }, CONTEXT)).split('\n')[0], '     1\tthe file of server');
});

test('a workspace that does not exist or is not a directory stops start-up naming the key', async (t) => {
  const s = await setup(t);
  const file = s.dir('keys.json');
  assert.equal(
    await rejection(s.open([key('team-a', { workspace: s.dir('missing') })])),
    `Invalid TOOLPORT_API_KEYS_FILE ${JSON.stringify(file)}: the workspace ${JSON.stringify(s.dir('missing'))} of key "team-a" does not exist.`,
  );
  assert.equal(
    await rejection(s.open([key('team-a', { workspace: s.dir('a/a.txt') })])),
    `Invalid TOOLPORT_API_KEYS_FILE ${JSON.stringify(file)}: the workspace ${JSON.stringify(s.dir('a/a.txt'))} of key "team-a" is not a directory.`,
  );
});

test('a workspace that holds the keys file stops start-up, since the file tools could read every key', async (t) => {
  const s = await setup(t);
  assert.equal(
    await rejection(s.open([key('team-a', { workspace: s.base }), key('team-b', { workspace: s.base })])),
    `Invalid TOOLPORT_API_KEYS_FILE ${JSON.stringify(s.dir('keys.json'))}: the workspace ${JSON.stringify(s.base)} of keys "team-a", "team-b" holds the keys file, where the file tools can read it; keep it outside.`,
  );
});

test("workspaces in use inside one another stop start-up, the server's included when a key uses it", async (t) => {
  const s = await setup(t);
  const file = JSON.stringify(s.dir('keys.json'));
  await mkdir(s.dir('a/inner'));
  assert.equal(
    await rejection(s.open([key('team-a', { workspace: s.dir('a') }), key('inner', { workspace: s.dir('a/inner') })])),
    `Invalid TOOLPORT_API_KEYS_FILE ${file}: the workspace ${JSON.stringify(s.dir('a/inner'))} of key "inner" is inside the workspace ${JSON.stringify(s.dir('a'))} of key "team-a", ` +
      "so one key could read another's files; give each key a directory of its own, none inside another.",
  );
  await mkdir(s.dir('server/team-c'));
  assert.equal(
    await rejection(s.open([key('admin'), key('team-c', { workspace: s.dir('server/team-c') })])),
    `Invalid TOOLPORT_API_KEYS_FILE ${file}: the workspace ${JSON.stringify(s.dir('server/team-c'))} of key "team-c" is inside TOOLPORT_WORKSPACE ${JSON.stringify(s.dir('server'))}, ` +
      "so one key could read another's files; give each key a directory of its own, none inside another.",
  );
  // No key uses the server's workspace: workspaces below it are fine.
  const opened = await s.open([key('team-c', { workspace: s.dir('server/team-c') })]);
  assert.deepEqual([...opened.toolsets.keys()], [s.dir('server/team-c')]);
});

test('Bash without the sandbox stops start-up when keys work in more than one workspace and may use it', async (t) => {
  const s = await setup(t);
  const message = await rejection(s.open([key('admin'), key('team-a', { workspace: s.dir('a') })]));
  assert.equal(
    message,
    `Invalid TOOLPORT_API_KEYS_FILE ${JSON.stringify(s.dir('keys.json'))}: keys have workspaces of their own, but Bash runs without the sandbox (TOOLPORT_BASH_SANDBOX=false), ` +
      'so a key\'s commands could read every other key\'s files; make a sandbox work (TOOLPORT_BASH_SANDBOX: bubblewrap, or Landlock on Linux 6.12 or later), or leave Bash out of TOOLPORT_TOOLS or out of the "tools" of every key.',
  );
  // A pattern that takes Bash counts as naming it.
  assert.equal(await rejection(s.open([key('admin', { tools: ['Read'] }), key('team-a', { workspace: s.dir('a'), tools: ['Ba*'] })])), message);
  // One workspace in use, or no key that may use Bash: nothing to read across.
  await s.open([key('team-a', { workspace: s.dir('a') })]);
  await s.open([key('admin', { tools: ['Read'] }), key('team-a', { workspace: s.dir('a'), tools: ['Read', 'Grep'] })]);
});

test('close() closes every workspace it opened', async (t) => {
  const s = await setup(t);
  const heldRoots = async (): Promise<string[]> => {
    const links = await Promise.all((await readdir('/proc/self/fd')).map((fd) => readlink(`/proc/self/fd/${fd}`).catch(() => '')));
    return links.filter((target) => target === s.dir('a') || target === s.dir('b')).sort();
  };
  const opened = await openKeyWorkspaces({
    config: s.config,
    server: s.server,
    served: s.served,
    keys: [key('team-a', { workspace: s.dir('a'), tools: ['Read'] }), key('team-b', { workspace: s.dir('b'), tools: ['Read'] })],
    cwd: s.base,
  });
  assert.deepEqual(await heldRoots(), [s.dir('a'), s.dir('b')]);
  await opened.close();
  assert.deepEqual(await heldRoots(), []);
});

test("in the sandbox, each workspace's Bash cannot see the other workspaces in use", async (t) => {
  if (!requireOrSkip(t, 'bubblewrap', SANDBOX_MISSING)) return;
  // Outside /tmp, which the sandbox replaces anyway: the hiding must come from the workspaces' own mounts.
  const base = await temporaryDirectory(t, 'toolport-keyws-', '/var/tmp');
  for (const name of ['server', 'a', 'b']) {
    await mkdir(path.join(base, name));
    await writeFile(path.join(base, name, `${name}.txt`), `the file of ${name}\n`);
  }
  const server = await Workspace.open(path.join(base, 'server'));
  t.after(() => server.close());
  const config: ToolsetConfig = { workspace: server.root, bashSandbox: true, plugins: [], tools: undefined };
  const served = await createToolset(config, base, undefined, server);
  const opened = await openKeyWorkspaces({
    config,
    server,
    served,
    keys: [key('admin'), key('team-a', { workspace: path.join(base, 'a') }), key('team-b', { workspace: path.join(base, 'b') })],
  });
  t.after(() => opened.close());
  const catAll = `cat ${['server', 'a', 'b'].map((name) => path.join(base, name, `${name}.txt`)).join(' ')} 2>/dev/null; true`;
  const seen = async (registry: ToolRegistry): Promise<string> => text(await registry.get('Bash')!.execute({ command: catAll }, CONTEXT));
  assert.equal(await seen(opened.toolsets.get(path.join(base, 'a'))!), 'the file of a');
  assert.equal(await seen(opened.toolsets.get(path.join(base, 'b'))!), 'the file of b');
  assert.equal(await seen(opened.registry), 'the file of server');
  assert.notEqual(opened.registry, served);
});

const RELOAD_TOOLS = ['Read', 'LS'];

test('admit: a reload may move keys between the workspaces open, drop them and bring them back, and opens nothing', async (t) => {
  const s = await setup(t);
  const tools = RELOAD_TOOLS;
  const opened = await s.open([key('admin', { tools }), key('team-a', { workspace: s.dir('a'), tools }), key('team-b', { workspace: s.dir('b'), tools })]);
  await symlink(s.dir('b'), s.dir('b-link'));
  assert.deepEqual(await opened.admit([key('team-a', { workspace: s.dir('b-link'), tools }), key('team-b', { workspace: `${s.dir('server')}/`, tools })]), [
    key('team-a', { workspace: s.dir('b'), tools }),
    key('team-b', { tools }),
  ]);
  assert.deepEqual(await opened.admit([key('team-a', { workspace: s.dir('a'), tools })]), [key('team-a', { workspace: s.dir('a'), tools })]);
  assert.deepEqual([...opened.toolsets.keys()], [s.dir('a'), s.dir('b')]);
});

test('admit refuses a workspace not opened at start-up, naming the key, since a reload opens none', async (t) => {
  const s = await setup(t);
  const file = JSON.stringify(s.dir('keys.json'));
  const withOwn = await s.open([key('team-a', { workspace: s.dir('a'), tools: RELOAD_TOOLS })]);
  assert.equal(
    await rejection(
      withOwn.admit([key('team-a', { workspace: s.dir('a'), tools: RELOAD_TOOLS }), key('team-b', { workspace: s.dir('b'), tools: RELOAD_TOOLS })]),
    ),
    `Invalid TOOLPORT_API_KEYS_FILE ${file}: the workspace ${JSON.stringify(s.dir('b'))} of key "team-b" was not open at start-up, and a reload opens no workspace; restart the server to add it.`,
  );
  const without = await s.open([key('admin')]);
  assert.equal(
    await rejection(without.admit([key('admin'), key('team-a', { workspace: s.dir('a') })])),
    `Invalid TOOLPORT_API_KEYS_FILE ${file}: the workspace ${JSON.stringify(s.dir('a'))} of key "team-a" was not open at start-up, and a reload opens no workspace; restart the server to add it.`,
  );
  assert.equal(
    await rejection(without.admit([key('admin'), key('lost', { workspace: s.dir('missing') })])),
    `Invalid TOOLPORT_API_KEYS_FILE ${file}: the workspace ${JSON.stringify(s.dir('missing'))} of key "lost" does not exist.`,
  );
});

test("admit refuses a key in the server's workspace when no key worked there at start-up beside keys with their own", async (t) => {
  const s = await setup(t);
  const opened = await s.open([key('team-a', { workspace: s.dir('a'), tools: RELOAD_TOOLS })]);
  assert.equal(
    await rejection(
      opened.admit([key('team-a', { workspace: s.dir('a'), tools: RELOAD_TOOLS }), key('admin', { tools: RELOAD_TOOLS }), key('ops', { tools: RELOAD_TOOLS })]),
    ),
    `Invalid TOOLPORT_API_KEYS_FILE ${JSON.stringify(s.dir('keys.json'))}: keys "admin", "ops" would work in the server's workspace (TOOLPORT_WORKSPACE), which no key used at start-up, ` +
      "so the Bash of the keys' own workspaces does not hide it; restart the server to add such a key.",
  );
  // Without workspaces of their own at start-up, keys come and go in the server's freely.
  const plain = await s.open([key('admin')]);
  assert.deepEqual(await plain.admit([key('ops'), key('ci', { tools: ['Read'] })]), [key('ops'), key('ci', { tools: ['Read'] })]);
});

test('admit refuses Bash without the sandbox for a key while keys work in two workspaces, and a keys file now inside a workspace', async (t) => {
  const s = await setup(t);
  const file = s.dir('keys.json');
  const opened = await s.open([key('admin', { tools: ['Read'] }), key('team-a', { workspace: s.dir('a'), tools: ['Read', 'Grep'] })]);
  assert.equal(
    await rejection(opened.admit([key('admin', { tools: ['Read'] }), key('team-a', { workspace: s.dir('a'), tools: ['Read', 'Bash'] })])),
    `Invalid TOOLPORT_API_KEYS_FILE ${JSON.stringify(file)}: keys have workspaces of their own, but Bash runs without the sandbox (TOOLPORT_BASH_SANDBOX=false), ` +
      'so a key\'s commands could read every other key\'s files; make a sandbox work (TOOLPORT_BASH_SANDBOX: bubblewrap, or Landlock on Linux 6.12 or later), or leave Bash out of TOOLPORT_TOOLS or out of the "tools" of every key.',
  );
  // One workspace in use: Bash reads nothing of another key's.
  assert.deepEqual(await opened.admit([key('team-a', { workspace: s.dir('a') })]), [key('team-a', { workspace: s.dir('a') })]);

  // The keys file is now a link into a workspace in use.
  await rm(file);
  await writeFile(s.dir('a/keys.json'), '[]');
  await symlink(s.dir('a/keys.json'), file);
  assert.equal(
    await rejection(opened.admit([key('team-a', { workspace: s.dir('a'), tools: ['Read'] })])),
    `Invalid TOOLPORT_API_KEYS_FILE ${JSON.stringify(file)}: the workspace ${JSON.stringify(s.dir('a'))} of key "team-a" holds the keys file, where the file tools can read it; keep it outside.`,
  );
  await rm(file);
  await writeFile(s.dir('server/keys.json'), '[]');
  await symlink(s.dir('server/keys.json'), file);
  assert.equal(
    await rejection(opened.admit([key('admin', { tools: ['Read'] })])),
    `Invalid TOOLPORT_API_KEYS_FILE: ${JSON.stringify(file)} is inside the workspace (TOOLPORT_WORKSPACE), where the file tools can read it; keep it outside`,
  );
});
