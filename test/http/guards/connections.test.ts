import assert from 'node:assert/strict';
import { request } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { Writable } from 'node:stream';
import { test, type TestContext } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { ToolRegistry } from '#src/core/registry.js';
import { textResult } from '#src/core/result.js';
import type { ToolDef } from '#src/core/types.js';
import { buildApp, type AppOptions } from '#src/http/app.js';
import type { ConnectionLimits } from '#src/http/guards/connections.js';
import { LOG_INTERVAL_MS, throttled } from '#src/infra/throttled.js';
import { Echo } from '#src/tools/echo.js';
import { gatedTool } from '../../fixtures/gated-tool.js';
import { CLIENT_CAPABILITIES_KEY, PROTOCOL_VERSION_KEY } from '#src/mcp/era.js';
import { MODERN_VERSIONS } from '#src/mcp/protocol-versions.js';
import { until } from '../../support/wait.js';

const LONG = 60_000;
const REQUEST_TIMEOUT_BODY = {
  content: [{ type: 'text', text: 'The request did not arrive in time.' }],
  isError: true,
  error: { code: 'REQUEST_TIMEOUT', message: 'The request did not arrive in time.' },
};

/** A listening app with these limits (every other deadline a minute away) and the given tools. */
async function listening(t: TestContext, limits: Partial<ConnectionLimits>, tools: ToolDef[] = [Echo], options: Partial<AppOptions> = {}) {
  const registry = new ToolRegistry();
  for (const tool of tools) registry.register(tool);
  const app = await buildApp({
    registry,
    pressure: false,
    connections: { headersTimeoutMs: LONG, requestTimeoutMs: LONG, keepAliveTimeoutMs: LONG, idleTimeoutMs: LONG, ...limits },
    ...options,
  });
  t.after(() => app.close());
  await app.listen({ port: 0, host: '127.0.0.1' });
  return { app, port: (app.server.address() as AddressInfo).port };
}

/** A raw connection that sends `payload`; `closed` resolves with all it received once the server closes it. */
function rawConnection(port: number, payload = ''): { socket: Socket; closed: Promise<string> } {
  const socket = connect(port, '127.0.0.1');
  socket.on('error', () => {});
  if (payload !== '') socket.write(payload);
  let received = '';
  socket.on('data', (chunk) => (received += String(chunk)));
  return { socket, closed: new Promise((resolve) => socket.once('close', () => resolve(received))) };
}

function splitResponse(raw: string): { head: string; body: string } {
  const at = raw.indexOf('\r\n\r\n');
  return { head: raw.slice(0, at), body: raw.slice(at + 4) };
}

async function connectionCount(app: FastifyInstance): Promise<number> {
  return new Promise((resolve, reject) => app.server.getConnections((err, n) => (err ? reject(err) : resolve(n))));
}

/** Polls `condition` until it holds, failing after `ms`. */
test('a connection that sends half its headers and stops is answered 408 REQUEST_TIMEOUT and closed', async (t) => {
  const { port } = await listening(t, { headersTimeoutMs: 200 });
  const { head, body } = splitResponse(await rawConnection(port, 'GET /healthz HTTP/1.1\r\nHost: localhost\r\n').closed);
  assert.match(head, /^HTTP\/1\.1 408 Request Timeout\r\n/);
  assert.match(head, /\r\nContent-Type: application\/json; charset=utf-8\r\n/);
  assert.deepEqual(JSON.parse(body), REQUEST_TIMEOUT_BODY);
});

test('a connection that never sends a byte is closed after the header timeout', async (t) => {
  const { port } = await listening(t, { headersTimeoutMs: 200 });
  const { head, body } = splitResponse(await rawConnection(port).closed);
  assert.match(head, /^HTTP\/1\.1 408 /);
  assert.deepEqual(JSON.parse(body), REQUEST_TIMEOUT_BODY);
});

test('a request whose body never arrives is answered 408 REQUEST_TIMEOUT, and the tool never runs', async (t) => {
  const gated = gatedTool();
  const { port } = await listening(t, { headersTimeoutMs: 200, requestTimeoutMs: 300 }, [gated.tool]);
  const partial = 'POST /tools/Gated HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 40\r\n\r\n{"id":';
  const { head, body } = splitResponse(await rawConnection(port, partial).closed);
  assert.match(head, /^HTTP\/1\.1 408 /);
  assert.deepEqual(JSON.parse(body), REQUEST_TIMEOUT_BODY);
  assert.equal(gated.runs.length, 0);
});

test('a silent connection is closed after the idle timeout', async (t) => {
  const { app, port } = await listening(t, { idleTimeoutMs: 100 });
  assert.equal(await rawConnection(port).closed, '');
  assert.equal(await connectionCount(app), 0);
});

test('a call that runs longer than the header, request and idle timeouts still gets its answer', async (t) => {
  const gated = gatedTool();
  const { port } = await listening(t, { headersTimeoutMs: 100, requestTimeoutMs: 100, idleTimeoutMs: 100 }, [gated.tool]);
  const answer = new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = request(
      { port, host: '127.0.0.1', path: '/tools/Gated', method: 'POST', agent: false, headers: { 'content-type': 'application/json' } },
      (res) => {
        let body = '';
        res.on('data', (chunk) => (body += String(chunk)));
        res.on('end', () => resolve({ status: res.statusCode!, body }));
      },
    );
    req.on('error', reject);
    req.end('{"id":"long"}');
  });
  const [run] = await gated.started(1);
  // Proof that every deadline passed while the call ran: connections opened after it started,
  // one after the other, were each closed by the server.
  for (let i = 0; i < 2; i++) await rawConnection(port).closed;
  run!.release('finished late');
  const { status, body } = await answer;
  assert.equal(status, 200);
  assert.deepEqual(JSON.parse(body), { content: [{ type: 'text', text: 'finished late' }], isError: false });
});

test('a call through POST /calls or POST /mcp that runs longer than the idle timeout still gets its answer', async (t) => {
  const gated = gatedTool();
  const { port } = await listening(t, { idleTimeoutMs: 100 }, [gated.tool]);
  const version = MODERN_VERSIONS[0]!;
  const calls = [
    { path: '/calls', headers: {}, body: [{ type: 'tool_use', id: 'toolu_1', name: 'Gated', input: { id: 'calls' } }] },
    {
      path: '/mcp',
      headers: { accept: 'application/json, text/event-stream', 'mcp-protocol-version': version, 'mcp-method': 'tools/call', 'mcp-name': 'Gated' },
      body: {
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: { name: 'Gated', arguments: { id: 'mcp' }, _meta: { [PROTOCOL_VERSION_KEY]: version, [CLIENT_CAPABILITIES_KEY]: {} } },
      },
    },
  ];
  for (const [i, call] of calls.entries()) {
    const answer = new Promise<{ status: number; body: string }>((resolve, reject) => {
      const headers = { 'content-type': 'application/json', ...call.headers };
      const req = request({ port, host: '127.0.0.1', path: call.path, method: 'POST', agent: false, headers }, (res) => {
        let body = '';
        res.on('data', (chunk) => (body += String(chunk)));
        res.on('end', () => resolve({ status: res.statusCode!, body }));
      });
      req.on('error', reject);
      req.end(JSON.stringify(call.body));
    });
    const run = (await gated.started(i + 1))[i];
    // A connection opened after the call started, and silent, was closed: the idle timeout passed.
    await rawConnection(port).closed;
    run!.release(`finished late through ${call.path}`);
    const { status, body } = await answer;
    assert.equal(status, 200, call.path);
    assert.match(body, new RegExp(`finished late through ${call.path}`));
  }
});

test('a client that stops reading a large response is cut off after the idle timeout', async (t) => {
  const Big: ToolDef = {
    name: 'Big',
    description: 'A large result.',
    inputSchema: { type: 'object' },
    execute: () => textResult('x'.repeat(64 * 1024 * 1024)),
  };
  const { app, port } = await listening(t, { idleTimeoutMs: 200 }, [Big]);
  const { socket } = rawConnection(port, 'POST /tools/Big HTTP/1.1\r\nHost: localhost\r\n\r\n');
  socket.pause();
  t.after(() => socket.destroy());
  await until(async () => (await connectionCount(app)) === 1, 'the connection to be accepted');
  await until(async () => (await connectionCount(app)) === 0, 'the server to drop the stalled reader');
});

test('an idle kept-alive connection is closed after the keep-alive timeout', async (t) => {
  const { port } = await listening(t, { keepAliveTimeoutMs: 100 });
  const raw = await rawConnection(port, 'GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n').closed;
  const { head, body } = splitResponse(raw);
  assert.match(head, /^HTTP\/1\.1 200 OK\r\n/);
  assert.match(head, /\r\nConnection: keep-alive\r\n/);
  assert.deepEqual(JSON.parse(body), { status: 'ok' });
});

test('past maxConnections a new connection is closed at once, and the open ones keep working', async (t) => {
  const { app, port } = await listening(t, { maxConnections: 2 });
  const first = rawConnection(port);
  const second = rawConnection(port);
  await until(async () => (await connectionCount(app)) === 2, 'two connections');
  assert.equal(await rawConnection(port).closed, '');
  first.socket.end('GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n');
  const { head, body } = splitResponse(await first.closed);
  assert.match(head, /^HTTP\/1\.1 200 OK\r\n/);
  assert.deepEqual(JSON.parse(body), { status: 'ok' });
  second.socket.destroy();
});

test('a server error after listening (a failed accept) is logged and the server goes on', async (t) => {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line));
      done();
    },
  });
  const { app, port } = await listening(t, {}, [Echo], { logger: pino({ level: 'info' }, stream) });
  const emfile = Object.assign(new Error('accept EMFILE'), { code: 'EMFILE', syscall: 'accept' });
  app.server.emit('error', emfile);
  app.server.emit('error', emfile);
  const logged = lines.filter((l) => l.msg === 'server error; still listening');
  assert.equal(logged.length, 1, 'a flood of errors is logged once per interval');
  assert.equal(logged[0]!.code, 'EMFILE');
  const { head } = splitResponse(await rawConnection(port, 'GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n').closed);
  assert.match(head, /^HTTP\/1\.1 200 OK\r\n/);
});

test('a throttled warning is written at most once per interval, and the next one counts what was held back', (t) => {
  t.mock.timers.enable({ apis: ['Date'], now: 1_000_000 });
  const written: [Record<string, unknown>, string][] = [];
  const log = { warn: (fields: Record<string, unknown>, msg: string) => void written.push([fields, msg]), error: () => undefined };
  const refused = throttled(log as never, 'warn', 'connections refused');
  for (let i = 0; i < 5; i += 1) refused({ maxConnections: 2 });
  t.mock.timers.tick(LOG_INTERVAL_MS);
  refused({ maxConnections: 2 });
  assert.deepEqual(written, [
    [{ maxConnections: 2 }, 'connections refused'],
    [{ maxConnections: 2, repeats: 4 }, 'connections refused'],
  ]);
});
