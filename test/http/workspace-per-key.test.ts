import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { before, after, describe, test } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { loadApiKeys } from '#src/config/api-keys.js';
import { buildApp } from '#src/http/app.js';
import { openKeyWorkspaces } from '#src/assembly/key-workspaces.js';
import { sandboxUnavailableReason } from '#src/os/sandbox/bubblewrap.js';
import { Workspace } from '#src/os/fs/workspace.js';
import { createToolset, type ToolsetConfig } from '#src/assembly/toolset.js';
import { requireOrSkip } from '../support/require.js';
import { Cleanups, temporaryDirectory } from '../support/workspace.js';

// Outside /tmp, which the Bash sandbox replaces anyway: what Bash cannot see, it must not see because
// of the workspaces' own confinement.
const BASE_PARENT = '/var/tmp';
const SANDBOX_MISSING = await sandboxUnavailableReason(BASE_PARENT);
// Keys in two workspaces may use Bash only in the sandbox; without it, the file tools are checked alone.
const BASH = SANDBOX_MISSING === undefined;
const TOOLS = BASH ? undefined : ['Read', 'Write', 'LS', 'Glob', 'Grep'];
const TEAMS = ['team-a', 'team-b'] as const;
type Team = (typeof TEAMS)[number];
const KEY: Record<Team | 'admin', string> = {
  'team-a': 'team-a-secret-0123456789abcdef',
  'team-b': 'team-b-secret-0123456789abcdef',
  admin: 'admin-secret-0123456789abcdef',
};
/** What each workspace's file says; a caller that is not its owner must never get it back. */
const SECRET: Record<Team | 'server', string> = { 'team-a': 'alpha-7c1e', 'team-b': 'bravo-93d0', server: 'server-e2b4' };

type Transport = 'rest' | 'mcp';
interface Result {
  status: number;
  text: string;
  isError: boolean;
}

/** Calls a tool through REST or MCP's tools/call and returns the status and the text of the result. */
async function call(app: FastifyInstance, transport: Transport, key: string, tool: string, input: Record<string, unknown>): Promise<Result> {
  const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
  if (transport === 'rest') {
    const res = await app.inject({ method: 'POST', url: `/tools/${tool}`, headers, payload: JSON.stringify(input) });
    const body = res.json() as { content: Array<{ text?: string }>; isError: boolean };
    return { status: res.statusCode, text: body.content.map((c) => c.text ?? '').join('\n'), isError: body.isError };
  }
  const res = await app.inject({
    method: 'POST',
    url: '/mcp',
    headers: { ...headers, 'mcp-protocol-version': '2025-11-25' },
    payload: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: tool, arguments: input } }),
  });
  const { result } = res.json() as { result: { content: Array<{ text?: string }>; isError: boolean } };
  return { status: res.statusCode, text: result.content.map((c) => c.text ?? '').join('\n'), isError: result.isError };
}

test('bubblewrap works here, so the keys are also checked with Bash in their workspaces', (t) => {
  requireOrSkip(t, 'bubblewrap', SANDBOX_MISSING);
});

describe('keys with workspaces of their own', () => {
  let base: string;
  let app: FastifyInstance;
  let server: Workspace;
  let close: () => Promise<void>;
  const cleanups = new Cleanups();
  const dir = (name: Team | 'server'): string => path.join(base, name);
  const file = (name: Team | 'server'): string => path.join(base, name, `${name}.txt`);

  before(async () => {
    base = await temporaryDirectory(cleanups, 'toolport-keyws-', BASE_PARENT);
    for (const name of [...TEAMS, 'server'] as const) {
      await mkdir(dir(name));
      await writeFile(file(name), `${SECRET[name]}\n`);
    }
    const keysFile = path.join(base, 'keys.json');
    const tools = TOOLS && { tools: TOOLS };
    await writeFile(
      keysFile,
      JSON.stringify([...TEAMS.map((team) => ({ label: team, key: KEY[team], workspace: dir(team), ...tools })), { label: 'admin', key: KEY.admin, ...tools }]),
    );
    server = await Workspace.open(dir('server'));
    const config: ToolsetConfig = { workspace: server.root, bashSandbox: BASH, plugins: [], tools: undefined, apiKeysFile: keysFile };
    const served = await createToolset(config, base, undefined, server);
    const keys = await loadApiKeys(
      { apiKeys: [], apiKeysFile: keysFile },
      served.list().map((t) => t.name),
    );
    const workspaces = await openKeyWorkspaces({ config, server, served, keys });
    close = workspaces.close;
    app = await buildApp({ registry: workspaces.registry, toolsets: workspaces.toolsets, apiKeys: workspaces.keys });
  });
  after(async () => {
    await app?.close();
    await close?.();
    await server?.close();
    await cleanups.run();
  });

  for (const transport of ['rest', 'mcp'] as const) {
    test(`${transport}: each key reads, lists, globs, greps and cats its own workspace's files`, async () => {
      for (const team of TEAMS) {
        const own = `${team}.txt`;
        for (const [tool, input] of [
          ['Read', { file_path: own }],
          ['Read', { file_path: file(team) }],
          ['LS', { path: '.' }],
          ['Glob', { pattern: '**/*.txt' }],
          ['Grep', { pattern: SECRET[team], output_mode: 'content' }],
        ] as const) {
          const res = await call(app, transport, KEY[team], tool, input);
          assert.equal(res.status, 200);
          assert.ok(res.text.includes(tool === 'Read' || tool === 'Grep' ? SECRET[team] : own), `${team} ${tool} ${JSON.stringify(input)}: ${res.text}`);
        }
        if (!BASH) continue;
        const bash = await call(app, transport, KEY[team], 'Bash', { command: `pwd && cat ${own}` });
        assert.deepEqual(bash, { status: 200, text: `${dir(team)}\n${SECRET[team]}`, isError: false });
      }
    });

    test(`${transport}: no key can read, list, glob, grep or cat another key's or the server's files`, async () => {
      for (const [caller, key] of [...TEAMS.map((team) => [team, KEY[team]] as const), ['admin', KEY.admin] as const]) {
        for (const target of [...TEAMS, 'server'] as const) {
          if (target === caller || (caller === 'admin' && target === 'server')) continue;
          const probes: Array<[string, Record<string, unknown>]> = [
            ['Read', { file_path: file(target) }],
            ['Read', { file_path: `../${target}/${target}.txt` }],
            ['LS', { path: dir(target) }],
            ['LS', { path: base }],
            ['Glob', { pattern: '**/*', path: dir(target) }],
            ['Glob', { pattern: `../${target}/*` }],
            ['Grep', { pattern: SECRET[target], path: dir(target), output_mode: 'content' }],
            ['Grep', { pattern: SECRET[target], output_mode: 'content' }],
            ['Bash', { command: `cat ${file(target)}; cat ../${target}/${target}.txt; grep -r ${SECRET[target]} ${base}; true` }],
          ].filter(([tool]) => BASH || tool !== 'Bash') as Array<[string, Record<string, unknown>]>;
          for (const [tool, input] of probes) {
            const res = await call(app, transport, key, tool, input);
            assert.equal(res.status, 200, `${caller} ${tool}`);
            assert.ok(!res.text.includes(SECRET[target]), `${caller} got ${target}'s secret through ${tool} ${JSON.stringify(input)}: ${res.text}`);
          }
        }
      }
    });

    test(`${transport}: a Read of another key's file is refused as outside the workspace, naming only the path given`, async () => {
      const res = await call(app, transport, KEY['team-a'], 'Read', { file_path: file('team-b') });
      assert.deepEqual(res, {
        status: 200,
        text: `Path ${JSON.stringify(file('team-b'))} is outside the workspace; file tools may only use paths under the workspace root.`,
        isError: true,
      });
    });
  }

  test('a Write with one key lands in its workspace only; the other key cannot read it back', async () => {
    const written = await call(app, 'rest', KEY['team-a'], 'Write', { file_path: 'note.txt', content: 'only for team-a' });
    assert.equal(written.isError, false);
    const own = await call(app, 'mcp', KEY['team-a'], 'Read', { file_path: 'note.txt' });
    assert.ok(own.text.includes('only for team-a'));
    const other = await call(app, 'mcp', KEY['team-b'], 'Read', { file_path: 'note.txt' });
    assert.equal(other.isError, true);
    assert.ok(!other.text.includes('only for team-a'));
  });

  test('every key sees the same tool list for its scope', async () => {
    const lists = await Promise.all(
      (['team-a', 'team-b', 'admin'] as const).map(async (who) => (await app.inject({ url: '/tools', headers: { authorization: `Bearer ${KEY[who]}` } })).body),
    );
    assert.equal(new Set(lists).size, 1);
  });
});
