import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { createServer, type Server, type ServerResponse } from 'node:http';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { describe, it } from 'node:test';
import { ToolRegistry } from '#src/core/registry.js';
import { buildApp } from '#src/http/app.js';
import { digestOf } from '#src/upstreams/canonical-json.js';
import { parseUpstreams, type UpstreamSpec } from '#src/upstreams/config.js';
import { formatLock, lockOf, parseLock } from '#src/upstreams/lock/lock.js';
import { checkDefinitions } from '#src/upstreams/definitions.js';
import { openUpstreams } from '#src/upstreams/open.js';
import type { UpstreamSourceOptions } from '#src/upstreams/source.js';
import { Upstream, type UpstreamOptions } from '#src/upstreams/upstream.js';
import { capturedLog } from '../support/log-capture.js';
import { killAll, processesWith, trackedMarker, waitFor } from '../support/processes.js';
import { until } from '../support/wait.js';
import { temporaryDirectory, type Cleanup } from '../support/workspace.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const QUIET = path.resolve(import.meta.dirname, '../fixtures/upstreams/quiet-server.mjs');
const HOSTILE = path.resolve(import.meta.dirname, '../fixtures/upstreams/hostile-server.mjs');
const NOISY_PLUGIN = path.resolve(import.meta.dirname, '../fixtures/upstreams/noisy-plugin.ts');

/** The quiet server as upstream `q`, listing the names in a file the test changes. */
async function quiet(t: Cleanup, names: string[], extra: Record<string, unknown> = {}) {
  const dir = await temporaryDirectory(t);
  const list = path.join(dir, 'names.txt');
  await writeFile(list, names.join('\n'));
  const file = path.join(dir, 'upstreams.json');
  const text = JSON.stringify({ mcpServers: { q: { command: process.execPath, args: [QUIET, list], ...extra } } });
  await writeFile(file, text);
  return { dir, list, file, specs: parseUpstreams(text, {}), config: { upstreams: file, upstreamsLock: undefined } };
}

async function open(t: Cleanup, setup: Pick<Awaited<ReturnType<typeof quiet>>, 'specs' | 'config'>, upstream: UpstreamSourceOptions['upstream'] = {}) {
  const registry = new ToolRegistry();
  const log = capturedLog();
  const source = (await openUpstreams(setup.specs, setup.config, registry, log.logger, { baseEnv: process.env, upstream }))!;
  t.after(() => source.stop());
  return { registry, source, log };
}

describe('an upstream that does not announce list changes', () => {
  it('is listed again every relistMs, and the registry follows', async (t) => {
    const setup = await quiet(t, ['alpha']);
    const { registry } = await open(t, setup, { relistMs: 50 });
    assert.deepEqual(
      registry.list().map((tool) => tool.name),
      ['q__alpha'],
    );
    await writeFile(setup.list, 'alpha\nbeta');
    await until(() => registry.get('q__beta') !== undefined, 'the re-list to find the new tool');
  });
});

describe('a JSON-RPC error from the upstream', () => {
  it('is an error result for the model that names the upstream and says what it said', async (t) => {
    const setup = await quiet(t, ['alpha']);
    const { registry, source } = await open(t, setup);
    const app = await buildApp({ registry, upstreams: source });
    t.after(() => app.close());
    // The upstream stops listing it, but the list has not been read again yet (no announcement, no re-list).
    await writeFile(setup.list, 'beta');
    const answer = await app.inject({ method: 'POST', url: '/tools/q__alpha', payload: {} });
    assert.deepEqual(answer.json(), {
      content: [{ type: 'text', text: 'Upstream "q" refused the call: MCP error -32602: Unknown tool: alpha' }],
      isError: true,
    });
  });
});

describe('an upstream that is down', () => {
  it('answers its calls with an error that says so while it waits to restart; the restart is counted', async (t) => {
    const setup = await quiet(t, ['alpha']);
    const { registry, source } = await open(t, setup, { backoffMs: 60_000 });
    const app = await buildApp({ registry, upstreams: source });
    t.after(() => app.close());
    const [upstream] = source.upstreams;
    const pid = upstream!.pid;
    assert.ok(pid !== undefined);
    process.kill(-pid, 'SIGKILL');
    await until(() => upstream!.state === 'down', 'the upstream to be down');
    const answer = await app.inject({ method: 'POST', url: '/tools/q__alpha', payload: {} });
    assert.deepEqual(answer.json(), {
      content: [{ type: 'text', text: 'Upstream "q" cannot take the call now: it is down (the process killed by SIGKILL); toolport is restarting it.' }],
      isError: true,
    });
    const ready = (await app.inject({ url: '/readyz' })).json() as { status: string; upstreams: { q: Record<string, unknown> } };
    assert.deepEqual(ready, {
      status: 'ready',
      callTasks: { working: 0 },
      upstreams: { q: { state: 'down', transport: 'stdio', tools: 1, held: 0, restarts: 0, reason: 'the process killed by SIGKILL' } },
    });
    const metrics = (await app.inject({ url: '/metrics' })).body;
    assert.match(metrics, /^toolport_upstream_up\{upstream="q",state="down"\} 0$/m);
    assert.match(metrics, /^toolport_upstream_restarts_total\{upstream="q"\} 0$/m);
    assert.match(metrics, /^toolport_upstream_tools\{upstream="q",status="served"\} 1$/m);
  });
});

describe('a lazy upstream', () => {
  it('serves the tools the lock pins without starting; the first call starts it', async (t) => {
    const setup = await quiet(t, ['alpha'], { startup: 'lazy' });
    // The lock as `toolport upstreams lock` would write it for what the upstream lists.
    const wire = { name: 'alpha', description: 'The tool alpha.', inputSchema: { type: 'object' } };
    const lock = lockOf(new Map([['q', checkDefinitions(setup.specs[0]!, [wire]).tools]]));
    assert.equal(lock.upstreams.q!.alpha!.sha256, digestOf(wire));
    await writeFile(path.join(setup.dir, 'toolport.lock.json'), formatLock(lock));
    const { registry, source } = await open(t, setup);
    assert.equal(source.upstreams[0]!.state, 'idle');
    assert.ok(registry.get('q__alpha'));
    assert.equal(source.upstreams[0]!.pid, undefined, 'no process yet');
    const app = await buildApp({ registry, upstreams: source });
    t.after(() => app.close());
    const answer = await app.inject({ method: 'POST', url: '/tools/q__alpha', payload: {} });
    assert.deepEqual(answer.json(), { content: [{ type: 'text', text: 'alpha' }], isError: false });
    assert.equal(source.upstreams[0]!.state, 'ready');
    assert.deepEqual(parseLock(await readFile(path.join(setup.dir, 'toolport.lock.json'), 'utf8'), 'lock'), lock);
  });

  it('without a lock, is listed once at start-up, then runs only once a call needs it', async (t) => {
    const setup = await quiet(t, ['alpha'], { startup: 'lazy' });
    const { registry, source } = await open(t, setup);
    assert.ok(registry.get('q__alpha'));
    assert.equal(source.upstreams[0]!.state, 'idle');
    assert.equal(source.upstreams[0]!.pid, undefined);
  });
});

/**
 * The hostile server in `mode` as upstream `h` (see the fixture), its received methods recorded:
 * `received()` reads them. `command` runs it through `sh -c` first when given (to start a helper beside it).
 */
async function hostile(t: Cleanup, mode: string, extra: Record<string, unknown> = {}, shell?: string) {
  const dir = await temporaryDirectory(t);
  const record = path.join(dir, 'received.txt');
  await writeFile(record, '');
  const launch =
    shell === undefined ? { command: process.execPath, args: [HOSTILE, mode] } : { command: 'sh', args: ['-c', shell, process.execPath, HOSTILE, mode] };
  const file = path.join(dir, 'upstreams.json');
  const text = JSON.stringify({ mcpServers: { h: { ...launch, cwd: dir, env: { HOSTILE_LOG: record }, ...extra } } });
  await writeFile(file, text);
  const received = async (): Promise<string[]> => (await readFile(record, 'utf8')).split('\n').filter(Boolean);
  return { dir, file, record, received, specs: parseUpstreams(text, {}), config: { upstreams: file, upstreamsLock: undefined } };
}

/** One upstream on its own, stopped when the test ends; `states` lists each change of state. */
function alone(t: Cleanup, spec: UpstreamSpec, options: Partial<UpstreamOptions> = {}) {
  const log = capturedLog();
  const states: string[] = [];
  const upstream = new Upstream(spec, {
    log: log.logger,
    version: '0.0.0',
    baseEnv: process.env,
    onTools: () => undefined,
    onState: (state) => states.push(state),
    ...options,
  });
  t.after(() => upstream.stop());
  return { upstream, states, log };
}

/** An HTTP server for a hand-written MCP upstream, closed (its streams too) when the test ends. */
async function httpUpstream(t: Cleanup, handle: (message: Record<string, unknown> | undefined, method: string, res: ServerResponse) => void): Promise<string> {
  const server: Server = createServer(async (req, res) => {
    let body = '';
    for await (const chunk of req) body += String(chunk);
    handle(body === '' ? undefined : (JSON.parse(body) as Record<string, unknown>), req.method ?? '', res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  return `http://127.0.0.1:${(server.address() as { port: number }).port}/mcp`;
}

/** Answers the handshake and lists one tool, as a plain Streamable HTTP server would. */
function handshake(message: Record<string, unknown> | undefined, res: ServerResponse): boolean {
  if (message?.method === 'initialize') {
    const params = message.params as { protocolVersion: string };
    res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': 's1' });
    res.end(
      JSON.stringify({
        jsonrpc: '2.0',
        id: message.id,
        result: { protocolVersion: params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'h', version: '1' } },
      }),
    );
  } else if (message !== undefined && message.id === undefined) res.writeHead(202).end();
  else if (message?.method === 'tools/list') {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ jsonrpc: '2.0', id: message.id, result: { tools: [{ name: 'echo', inputSchema: { type: 'object' } }] } }));
  } else return false;
  return true;
}

describe('a hostile upstream', () => {
  it('that sends requests and never reads the answers is stopped once 8 MiB wait for it, saying why', async (t) => {
    const setup = await hostile(t, 'noread');
    const { source } = await open(t, setup, { backoffMs: 60_000 });
    const [upstream] = source.upstreams;
    await until(() => upstream!.state === 'down', 'the upstream to be stopped');
    assert.equal(upstream!.status().reason, 'the process did not read its input (more than 8 MiB waited for it)');
  });

  it('whose tool list pages never end is read up to 512 tools, at start-up and on list_changed, with one warning', async (t) => {
    const setup = await hostile(t, 'pages');
    const { registry, source, log } = await open(t, setup);
    const [upstream] = source.upstreams;
    assert.equal(upstream!.state, 'ready');
    assert.equal(registry.list().filter((tool) => tool.name.startsWith('h__')).length, 512);
    // Six pages of 100 for the first listing, six for the list_changed it sent during it.
    await until(async () => (await setup.received()).filter((m) => m === 'tools/list').length >= 12, 'the listing after list_changed');
    assert.equal(upstream!.status().held, 88);
    assert.equal((await setup.received()).filter((m) => m === 'tools/list').length, 12);
    assert.deepEqual(
      log.lines.filter((line) => line.msg === 'upstream tool list too long: the rest of it is not read').map((line) => [line.tools, line.pages]),
      [[600, 6]],
    );
  });

  it('that lists malformed tools beside good ones has the good ones served and each bad one refused with its reason', async (t) => {
    const setup = await hostile(t, 'mixed');
    const { registry, source, log } = await open(t, setup);
    const [upstream] = source.upstreams;
    assert.deepEqual(
      registry.list().map((tool) => tool.name),
      ['h__work', 'h__extra', 'h__bare'],
    );
    assert.deepEqual(upstream!.status(), { state: 'ready', transport: 'stdio', tools: 3, held: 2, restarts: 0 });
    const warning = log.lines.find((line) => line.msg === 'upstream tools not served (the first few with their reasons)');
    assert.deepEqual(warning?.first, [
      { tool: 'stringy', reason: 'has an "inputSchema" with "type" "string"; MCP requires "type": "object"' },
      { tool: 'wordy', reason: 'its "description" is not a string' },
    ]);
  });

  it('has each listed tool kept as received, keys MCP does not define too: the lock pins the whole definition', async (t) => {
    const setup = await hostile(t, 'mixed');
    let listed: readonly unknown[] = [];
    const { upstream } = alone(t, setup.specs[0]!, { onTools: (tools) => (listed = tools) });
    await upstream.start();
    const wire = { name: 'extra', description: 'The tool extra.', inputSchema: { type: 'object' }, 'x-extra': { reviewed: false } };
    assert.deepEqual(listed[3], wire);
    const lock = lockOf(new Map([['h', checkDefinitions(setup.specs[0]!, [...listed]).tools]]));
    assert.deepEqual(lock.upstreams.h!.extra, { sha256: digestOf(wire), definition: wire });
  });

  it('that answers calls in shapes MCP does not define has them passed on as received, for toolport to read', async (t) => {
    const setup = await hostile(t, 'mixed');
    const { registry, source } = await open(t, setup);
    const app = await buildApp({ registry, upstreams: source });
    t.after(() => app.close());
    const [upstream] = source.upstreams;
    assert.deepEqual(await upstream!.call('extra', {}, { signal: new AbortController().signal }), {
      content: [{ type: 'widget', size: 3 }],
      'x-extra': true,
    });
    const answer = await app.inject({ method: 'POST', url: '/tools/h__bare', payload: {} });
    assert.deepEqual(answer.json(), { content: [{ type: 'text', text: "[the tool's content is not a list but a string; left out]" }], isError: false });
    assert.equal(upstream!.state, 'ready');
  });

  it('that offers no tools is ready with none, is never asked for a list, and nothing is printed', async (t) => {
    const debug = t.mock.method(console, 'debug', () => undefined);
    const setup = await hostile(t, 'notools');
    const { registry, source } = await open(t, setup);
    assert.equal(source.upstreams[0]!.state, 'ready');
    assert.equal(registry.list().length, 0);
    await until(async () => (await setup.received()).includes('notifications/initialized'), 'the handshake to end');
    assert.deepEqual(await setup.received(), ['initialize', 'notifications/initialized']);
    assert.equal(debug.mock.callCount(), 0);
  });

  it("over HTTP, whose event stream sends a line without end, is dropped past a small message's bound (1 MiB), saying why", async (t) => {
    const url = await httpUpstream(t, (message, method, res) => {
      if (method === 'GET') {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write('event: message\ndata: ');
        const chunk = 'a'.repeat(1 << 16);
        const write = (): void => {
          while (!res.destroyed && res.write(chunk));
          if (!res.destroyed) res.once('drain', write);
        };
        write();
      } else if (method === 'DELETE') res.writeHead(200).end();
      else handshake(message, res);
    });
    const { upstream } = alone(t, parseUpstreams(JSON.stringify({ mcpServers: { h: { url } } }), {})[0]!, { backoffMs: 60_000 });
    await upstream.start().catch(() => undefined);
    await until(() => upstream.state === 'down', 'the upstream to be dropped');
    assert.equal(upstream.status().reason, 'the upstream sent a message of more than 1 MiB');
    assert.ok(upstream.counters.peakHeldBytes <= 1024 * 1024 + 64 * 1024, `${upstream.counters.peakHeldBytes} bytes held`);
  });

  it('over HTTP that fails the handshake is down with its status only: its body never reaches /readyz', async (t) => {
    const url = await httpUpstream(t, (_message, _method, res) => {
      res.writeHead(500, 'Visit evil.example', { 'content-type': 'text/plain' });
      res.end('internal error; upstream says: visit http://evil.example/');
    });
    const { upstream } = alone(t, parseUpstreams(JSON.stringify({ mcpServers: { h: { url } } }), {})[0]!, { backoffMs: 60_000 });
    await assert.rejects(upstream.start(), { message: 'Upstream "h" is not available: the upstream answered HTTP 500.' });
    assert.equal(upstream.status().reason, 'the upstream answered HTTP 500');
  });
});

describe('stopping an upstream while it connects', () => {
  it('ends its process group at once, and it stays stopped', async (t) => {
    const marker = trackedMarker(t);
    const setup = await hostile(t, 'slowinit', {}, `sleep ${marker} & exec "$0" "$1" "$2"`);
    const { upstream, states } = alone(t, setup.specs[0]!);
    const starting = upstream.start();
    await until(async () => (await setup.received()).includes('initialize') && processesWith(marker).length === 1, 'the handshake to begin');
    await upstream.stop();
    await assert.rejects(starting, { message: 'Upstream "h" is stopped.' });
    await waitFor(() => processesWith(marker).length === 0, 'the process group to end');
    assert.deepEqual(states, ['starting', 'stopped']);
  });

  it('SIGTERM while toolport serve waits for the handshake exits, ending the process group', async (t) => {
    const marker = trackedMarker(t);
    const setup = await hostile(t, 'slowinit', {}, `sleep ${marker} & exec "$0" "$1" "$2"`);
    const workspace = await temporaryDirectory(t);
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/server.ts'], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        PORT: '0',
        TOOLPORT_WORKSPACE: workspace,
        TOOLPORT_BASH_SANDBOX: 'false',
        TOOLPORT_UPSTREAMS: setup.file,
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    t.after(() => killAll([child.pid!]));
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += String(chunk)));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    await until(async () => (await setup.received()).includes('initialize') && processesWith(marker).length === 1, 'the handshake to begin');
    child.kill('SIGTERM');
    assert.equal(await exited, 0);
    assert.equal(stderr, 'toolport: SIGTERM during start-up; exiting\n');
    await waitFor(() => processesWith(marker).length === 0, 'the process group to end');
  });
});

describe('a call aborted before the upstream answered', () => {
  it('keeps its slot until the upstream answers it: aborting calls never runs more at once than maxConcurrency', async (t) => {
    const setup = await hostile(t, 'plain', { maxConcurrency: 2 });
    const { upstream } = alone(t, setup.specs[0]!, { abortGraceMs: 60_000 });
    await upstream.start();
    // Each call is abandoned as soon as the upstream says it started; the upstream goes on for 50 ms.
    const outcomes = await Promise.all(
      Array.from({ length: 10 }, async (_, i) => {
        const controller = new AbortController();
        const onProgress = (): void => controller.abort(new Error('gone'));
        return upstream.call('work', { ms: 50 }, { signal: controller.signal, caller: `c${i}`, onProgress }).then(
          () => 'answered',
          (err: Error) => err.message,
        );
      }),
    );
    assert.deepEqual(outcomes, Array(10).fill('gone'));
    const peak = (await upstream.call('peak', {}, { signal: new AbortController().signal })) as { content: Array<{ text: string }> };
    assert.equal(peak.content[0]!.text, '2');
  });

  it('keeps it no longer than the grace when the upstream never answers', async (t) => {
    const setup = await hostile(t, 'plain', { maxConcurrency: 1 });
    const { upstream } = alone(t, setup.specs[0]!, { abortGraceMs: 50 });
    await upstream.start();
    const controller = new AbortController();
    const call = upstream.call('work', { ms: 600_000 }, { signal: controller.signal, onProgress: () => controller.abort(new Error('gone')) });
    await assert.rejects(call, { message: 'gone' });
    const peak = (await upstream.call('peak', {}, { signal: new AbortController().signal })) as { content: Array<{ text: string }> };
    assert.equal(peak.content[0]!.text, '1');
  });
});

describe('toolport mcp', () => {
  it('keeps standard output for the protocol: what a library prints with console.* goes to standard error', async (t) => {
    const workspace = await temporaryDirectory(t);
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli.ts', 'mcp'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, TOOLPORT_WORKSPACE: workspace, TOOLPORT_BASH_SANDBOX: 'false', TOOLPORT_PLUGINS: NOISY_PLUGIN },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    t.after(() => killAll([child.pid!]));
    const out: string[] = [];
    let stderr = '';
    createInterface({ input: child.stdout }).on('line', (line) => out.push(line));
    child.stderr.on('data', (chunk: Buffer) => (stderr += String(chunk)));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    child.stdin.end(`${JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'Noisy', arguments: {} } })}\n`);
    assert.equal(await exited, 0);
    assert.deepEqual(
      out.map((line) => JSON.parse(line) as unknown),
      [{ jsonrpc: '2.0', id: 1, result: { content: [{ type: 'text', text: 'ok' }], isError: false } }],
    );
    for (const printed of ['a plug-in that prints when it loads', 'printed by a tool', 'debugged by a tool', 'informed by a tool'])
      assert.ok(stderr.includes(`${printed}\n`), printed);
  });
});
