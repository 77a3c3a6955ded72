import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { EVERYTHING, everythingOverHttp } from '../support/everything-server.js';
import { CLIENT_KINDS, httpClient, stdioClient } from '../support/mcp-clients.js';
import { freePort } from '../support/ports.js';
import { killAll, processesWith, trackedMarker, waitFor } from '../support/processes.js';
import { startServer, type ServerProcess } from '../support/server-process.js';
import { until } from '../support/wait.js';
import { Cleanups, temporaryDirectory } from '../support/workspace.js';

const require = createRequire(import.meta.url);
const MEMORY = require.resolve('@modelcontextprotocol/server-memory/dist/index.js');
const KEY = 'upstream-test-key-0123456789abcdef';
const SECRET = 'upstream-secret-value-6d1f0b2a';
const AUTH = { authorization: `Bearer ${KEY}` };

describe('toolport serve with upstreams from a Claude Desktop config', () => {
  const cleanups = new Cleanups();
  let server: ServerProcess;
  let upstreamsFile: string;

  before(async () => {
    const dir = await temporaryDirectory(cleanups);
    const { url: web } = await everythingOverHttp(cleanups, await freePort());
    upstreamsFile = path.join(dir, 'claude_desktop_config.json');
    // As Claude Desktop writes it: other top-level keys, env values naming variables.
    await writeFile(
      upstreamsFile,
      JSON.stringify({
        globalShortcut: 'Ctrl+Space',
        mcpServers: {
          every: { command: process.execPath, args: [EVERYTHING, 'stdio'], env: { UPSTREAM_TOKEN: '${TEST_UPSTREAM_TOKEN}' } },
          memory: { command: process.execPath, args: [MEMORY], env: { MEMORY_FILE_PATH: path.join(dir, 'memory.jsonl') } },
          web: { type: 'http', url: web },
          // Prints its token to stderr, as a careless server might: the log shows it redacted.
          loud: {
            command: 'sh',
            args: ['-c', 'echo "my token is $T" >&2; exec "$0" "$1" stdio', process.execPath, EVERYTHING],
            env: { T: '${TEST_UPSTREAM_TOKEN}' },
          },
        },
      }),
    );
    server = await startServer({ TOOLPORT_UPSTREAMS: upstreamsFile, TOOLPORT_API_KEYS: KEY, TEST_UPSTREAM_TOKEN: SECRET, TOOLPORT_BASH_SANDBOX: 'false' });
  });
  after(async () => {
    server.child.kill('SIGTERM');
    await server.exited;
    await cleanups.run();
  });

  it('lists the tools of every upstream beside the built-in ones', async () => {
    const tools = (await (await fetch(`${server.url}/tools`, { headers: AUTH })).json()) as Array<{ name: string }>;
    const names = tools.map((t) => t.name);
    for (const name of ['Read', 'Bash', 'every__echo', 'every__get-env', 'memory__read_graph', 'web__echo'])
      assert.ok(names.includes(name), `${name} in ${names.join(', ')}`);
    const ready = (await (await fetch(`${server.url}/readyz`)).json()) as { status: string; upstreams: Record<string, { state: string; transport: string }> };
    assert.equal(ready.status, 'ready');
    assert.deepEqual(Object.fromEntries(Object.entries(ready.upstreams).map(([name, s]) => [name, [s.state, s.transport]])), {
      every: ['ready', 'stdio'],
      memory: ['ready', 'stdio'],
      web: ['ready', 'http'],
      loud: ['ready', 'stdio'],
    });
  });

  it('gives a stdio upstream only its own environment, PATH, HOME and (in the sandbox) TMPDIR; its secret stays out of the log', async () => {
    const response = await fetch(`${server.url}/tools/every__get-env`, {
      method: 'POST',
      headers: { ...AUTH, 'content-type': 'application/json' },
      body: '{}',
    });
    const result = (await response.json()) as { content: Array<{ text: string }> };
    const env = JSON.parse(result.content[0]!.text) as Record<string, string>;
    assert.equal(env.UPSTREAM_TOKEN, '[redacted]', 'the upstream got its secret, and its answer does not carry it back');
    assert.deepEqual(
      Object.keys(env).filter((name) => !['UPSTREAM_TOKEN', 'PATH', 'HOME', 'TMPDIR'].includes(name)),
      [],
      "nothing of toolport's own environment",
    );
    if (env.TMPDIR !== undefined) assert.match(env.TMPDIR, /\/toolport-calls-\d+-[^/]+\/call-[^/]+$/, 'a private directory of its own');
    assert.ok(!JSON.stringify(server.lines).includes(SECRET), 'the secret is in no log line');
    assert.ok(server.lines.some((l) => l.upstream === 'loud' && l.stderr === 'my token is [redacted]'));
    assert.ok(!server.stderr().includes(SECRET));
    const metrics = await (await fetch(`${server.url}/metrics`, { headers: AUTH })).text();
    assert.ok(!metrics.includes(SECRET));
    assert.match(metrics, /^toolport_upstream_up\{upstream="every",state="ready"\} 1$/m);
    assert.match(metrics, /^toolport_upstream_calls_total\{upstream="every",outcome="ok"\} [1-9]/m);
  });

  it('runs upstream tools through /calls, in Anthropic and OpenAI turns', async () => {
    const anthropic = await fetch(`${server.url}/calls`, {
      method: 'POST',
      headers: { ...AUTH, 'content-type': 'application/json' },
      body: JSON.stringify({
        role: 'assistant',
        content: [
          { type: 'tool_use', id: 'toolu_1', name: 'every__echo', input: { message: 'from a turn' } },
          { type: 'tool_use', id: 'toolu_2', name: 'web__echo', input: { message: 'over http' } },
        ],
      }),
    });
    assert.deepEqual(await anthropic.json(), {
      role: 'user',
      content: [
        { type: 'tool_result', tool_use_id: 'toolu_1', content: [{ type: 'text', text: 'Echo: from a turn' }], is_error: false },
        { type: 'tool_result', tool_use_id: 'toolu_2', content: [{ type: 'text', text: 'Echo: over http' }], is_error: false },
      ],
    });
    const openai = await fetch(`${server.url}/calls`, {
      method: 'POST',
      headers: { ...AUTH, 'content-type': 'application/json' },
      body: JSON.stringify({
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'memory__read_graph', arguments: '{}' } }],
      }),
    });
    const messages = (await openai.json()) as Array<{ role: string; tool_call_id: string; content: string }>;
    assert.equal(messages[0]?.tool_call_id, 'call_1');
    assert.match(messages[0]!.content, /"entities"/);
  });

  for (const kind of CLIENT_KINDS) {
    it(`serves upstream tools to the SDK's ${kind} client over MCP, with progress`, async () => {
      const client = await httpClient(kind, server.url, AUTH);
      try {
        const { tools } = await client.listTools();
        assert.ok(tools.some((t) => t.name === 'web__echo'));
        const echo = await client.callTool('every__echo', { message: kind });
        assert.deepEqual(echo.content, [{ type: 'text', text: `Echo: ${kind}` }]);
        const reports: number[] = [];
        const long = await client.callTool(
          'every__trigger-long-running-operation',
          { duration: 0.3, steps: 3 },
          { onprogress: (p) => reports.push(p.progress) },
        );
        assert.equal(long.isError ?? false, false);
        assert.ok(reports.length >= 1, `progress reached the client (${reports.length} reports)`);
      } finally {
        await client.close();
      }
    });
  }

  it('serves upstream tools over stdio too (toolport mcp --upstreams)', async () => {
    const client = await stdioClient('v2-legacy', {
      TOOLPORT_UPSTREAMS: upstreamsFile,
      TEST_UPSTREAM_TOKEN: SECRET,
      TOOLPORT_BASH_SANDBOX: 'false',
      TOOLPORT_WORKSPACE: server.workspace,
    });
    try {
      const { tools } = await client.listTools();
      assert.ok(tools.some((t) => t.name === 'memory__read_graph'));
      assert.deepEqual((await client.callTool('every__echo', { message: 'stdio' })).content, [{ type: 'text', text: 'Echo: stdio' }]);
    } finally {
      await client.close();
    }
  });
});

describe('bad upstream configuration', () => {
  const cleanups = new Cleanups();
  after(() => cleanups.run());

  it('a missing variable stops start-up naming the upstream and the variable, never a value', async () => {
    const dir = await temporaryDirectory(cleanups);
    const file = path.join(dir, 'upstreams.json');
    await writeFile(file, JSON.stringify({ mcpServers: { github: { command: 'gh-mcp', env: { GITHUB_TOKEN: '${GITHUB_TOKEN}' } } } }));
    await assert.rejects(startServer({ TOOLPORT_UPSTREAMS: file }), (err: Error) => {
      assert.match(err.message, /Upstream "github": env\.GITHUB_TOKEN names the variable GITHUB_TOKEN, which is not set/);
      return true;
    });
  });

  it('an upstream whose command does not exist, or whose URL refuses, is down; the built-in tools serve', async () => {
    const dir = await temporaryDirectory(cleanups);
    const file = path.join(dir, 'upstreams.json');
    const refused = `http://127.0.0.1:${await freePort()}/mcp`;
    await writeFile(file, JSON.stringify({ mcpServers: { ghost: { command: '/nonexistent/mcp-server' }, gone: { url: refused } } }));
    const server = await startServer({ TOOLPORT_UPSTREAMS: file, TOOLPORT_BASH_SANDBOX: 'false' });
    cleanups.after(async () => {
      server.child.kill('SIGTERM');
      await server.exited;
    });
    const ready = (await (await fetch(`${server.url}/readyz`)).json()) as { status: string; upstreams: Record<string, { state: string; reason?: string }> };
    assert.equal(ready.status, 'ready');
    assert.equal(ready.upstreams.ghost?.state === 'down' || ready.upstreams.ghost?.state === 'starting', true);
    await until(async () => {
      const body = (await (await fetch(`${server.url}/readyz`)).json()) as typeof ready;
      return body.upstreams.ghost?.reason !== undefined && body.upstreams.gone?.reason !== undefined;
    }, 'both upstreams to report why they are down');
    const body = (await (await fetch(`${server.url}/readyz`)).json()) as typeof ready;
    assert.equal(body.upstreams.ghost?.reason, 'cannot run "/nonexistent/mcp-server": no such command');
    assert.match(body.upstreams.gone!.reason!, /ECONNREFUSED/);
    const echo = await fetch(`${server.url}/tools/Glob`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"pattern":"*"}' });
    assert.equal(echo.status, 200);
  });
});

describe('shutdown', () => {
  it('exits 0 after an SDK client that opened the GET stream for list changes has gone', async (t) => {
    const dir = await temporaryDirectory(t);
    const file = path.join(dir, 'upstreams.json');
    await writeFile(file, JSON.stringify({ mcpServers: { every: { command: process.execPath, args: [EVERYTHING, 'stdio'] } } }));
    const server = await startServer({ TOOLPORT_UPSTREAMS: file, TOOLPORT_BASH_SANDBOX: 'false' });
    t.after(() => killAll([server.pid]));
    // The v2 client on a 2025 revision opens the standalone GET stream after initialize; closing
    // aborts it, and undici then opens a connection it never uses, which held close() until its timeout.
    const client = await httpClient('v2-legacy', server.url);
    assert.deepEqual((await client.callTool('every__echo', { message: 'x' })).content, [{ type: 'text', text: 'Echo: x' }]);
    await client.close();
    server.child.kill('SIGTERM');
    assert.equal(await server.exited, 0);
  });

  it("ends each stdio upstream's whole process group after the drain", async (t) => {
    const dir = await temporaryDirectory(t);
    const marker = trackedMarker(t);
    const file = path.join(dir, 'upstreams.json');
    // The upstream starts a process of its own, which only its process group takes along.
    await writeFile(
      file,
      JSON.stringify({ mcpServers: { every: { command: 'sh', args: ['-c', `sleep ${marker} & exec "$0" "$1" stdio`, process.execPath, EVERYTHING] } } }),
    );
    const server = await startServer({ TOOLPORT_UPSTREAMS: file, TOOLPORT_BASH_SANDBOX: 'false' });
    t.after(() => killAll([server.pid]));
    await server.logLine((line) => line.msg === 'upstream connected');
    assert.equal(processesWith(marker).length, 1, "the upstream's own process runs");
    server.child.kill('SIGTERM');
    assert.equal(await server.exited, 0);
    await waitFor(() => processesWith(marker).length === 0, 'the process group to end');
  });
});
