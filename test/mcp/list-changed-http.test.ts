import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import Fastify, { type FastifyInstance } from 'fastify';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as HttpV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Client as ClientV2, StreamableHTTPClientTransport as HttpV2 } from '@modelcontextprotocol/client';
import { pino } from 'pino';
import { Gateway } from '#src/core/gateway.js';
import { ToolRegistry } from '#src/core/registry.js';
import { buildApp } from '#src/http/app.js';
import { mcpRoutes } from '#src/http/routes/mcp.js';
import { VERSION } from '#src/infra/version.js';
import { Echo } from '#src/tools/echo.js';
import { CLIENT_KINDS } from '../support/mcp-clients.js';
import { readStream, type StreamItem } from '../support/sse-client.js';
import { WatchedRegistry } from '../support/watched-registry.js';
import { until } from '../support/wait.js';

// Tool-list changes over Streamable HTTP: subscriptions/listen (2026-07-28) and the GET stream
// of the 2025 revisions, their bounds, and every refusal with its exact status and body.

const MODERN_META = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} };
const SUBSCRIPTION_KEY = 'io.modelcontextprotocol/subscriptionId';
const SSE = 'application/json, text/event-stream';
const LISTEN_HEADERS = { 'content-type': 'application/json', accept: SSE, 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'subscriptions/listen' };
const LEGACY_GET = { accept: 'text/event-stream', 'mcp-protocol-version': '2025-11-25' };
const NOT_ACCEPTABLE = 'Not Acceptable: GET /mcp opens an event stream; the Accept header must list text/event-stream';

const listenBody = (id: string | number, notifications: unknown = { toolsListChanged: true }) =>
  JSON.stringify({ jsonrpc: '2.0', id, method: 'subscriptions/listen', params: { _meta: MODERN_META, notifications } });
const acknowledged = (id: string | number) => ({
  jsonrpc: '2.0',
  method: 'notifications/subscriptions/acknowledged',
  params: { notifications: { toolsListChanged: true }, _meta: { [SUBSCRIPTION_KEY]: id } },
});

/** A registry that counts the listeners on it: one while any subscription is open. */
class ChangingRegistry extends WatchedRegistry {
  /** Adds a source's tool, or takes it away again: a change of the list either way. */
  change(): void {
    this.replaceSource('up', this.list().some((t) => t.name === 'up__a') ? [] : [{ ...Echo, name: 'up__a' }]);
  }
}

/** The app on a real port: with upstreams (its tool list can change) unless `changes` is false. */
async function serve(changes = true): Promise<{ app: FastifyInstance; url: string; registry: ChangingRegistry }> {
  const registry = new ChangingRegistry();
  registry.register(Echo);
  // A short idle timeout keeps the close quick after a client dropped a stream (see test/e2e/mcp-list-changed.test.ts).
  const app = await buildApp({ registry, connections: { idleTimeoutMs: 1000 }, ...(changes ? { upstreams: { status: () => ({}) } } : {}) });
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  return { app, url: new URL('/mcp', url).href, registry };
}

/** The messages of a stream (comments left out), read as they come. */
async function* messages(body: ReadableStream<Uint8Array>): AsyncGenerator<unknown> {
  for await (const item of readStream(body) as AsyncGenerator<StreamItem>) if ('data' in item) yield JSON.parse(item.data);
}

async function next(stream: AsyncGenerator<unknown>): Promise<unknown> {
  const { value, done } = await stream.next();
  assert.equal(done, false, 'the stream ended');
  return value;
}

describe('subscriptions/listen over HTTP', () => {
  it('answers an event stream at once: the acknowledgement, then each change stamped with the listen id; closing it ends the subscription', async (t) => {
    const { app, url, registry } = await serve();
    t.after(() => app.close());
    const abort = new AbortController();
    const response = await fetch(url, { method: 'POST', headers: LISTEN_HEADERS, body: listenBody('listen:0'), signal: abort.signal });
    assert.equal(response.status, 200);
    assert.equal(response.headers.get('content-type'), 'text/event-stream');
    assert.equal(response.headers.get('connection'), 'close');
    const stream = messages(response.body!);
    assert.deepEqual(await next(stream), acknowledged('listen:0'));
    registry.change();
    assert.deepEqual(await next(stream), { jsonrpc: '2.0', method: 'notifications/tools/list_changed', params: { _meta: { [SUBSCRIPTION_KEY]: 'listen:0' } } });
    abort.abort();
    await until(() => registry.listeners === 0, 'the subscription to end');
  });

  it('the server closing ends a listen with its empty result, and a GET stream with its end', async () => {
    const { app, url } = await serve();
    const listen = messages((await fetch(url, { method: 'POST', headers: LISTEN_HEADERS, body: listenBody(9) })).body!);
    assert.deepEqual(await next(listen), acknowledged(9));
    const get = messages((await fetch(url, { headers: LEGACY_GET })).body!);
    await app.close();
    assert.deepEqual(await next(listen), {
      jsonrpc: '2.0',
      id: 9,
      result: { resultType: 'complete', _meta: { [SUBSCRIPTION_KEY]: 9, 'io.modelcontextprotocol/serverInfo': { name: 'toolport', version: VERSION } } },
    });
    assert.equal((await listen.next()).done, true);
    assert.equal((await get.next()).done, true);
  });

  it('refuses a listen from a client that does not take an event stream with 406', async (t) => {
    const { app, url } = await serve();
    t.after(() => app.close());
    const response = await fetch(url, { method: 'POST', headers: { ...LISTEN_HEADERS, accept: 'application/json' }, body: listenBody('l') });
    assert.equal(response.status, 406);
    assert.deepEqual(await response.json(), {
      jsonrpc: '2.0',
      id: 'l',
      error: { code: -32600, message: 'Not Acceptable: subscriptions/listen answers with an event stream; the Accept header must list text/event-stream' },
    });
  });

  it('refuses a malformed filter with -32602 in a 200, opening nothing', async (t) => {
    const { app, url, registry } = await serve();
    t.after(() => app.close());
    const response = await fetch(url, { method: 'POST', headers: LISTEN_HEADERS, body: listenBody(1, { toolsListChanged: 'yes' }) });
    assert.equal(response.status, 200);
    assert.equal(response.headers.get('content-type'), 'application/json; charset=utf-8');
    assert.deepEqual(await response.json(), {
      jsonrpc: '2.0',
      id: 1,
      error: { code: -32602, message: 'Invalid params: params.notifications.toolsListChanged must be a boolean' },
    });
    assert.equal(registry.listeners, 0);
  });

  it('answers a listen of a 2025 revision with method not found', async (t) => {
    const { app, url } = await serve();
    t.after(() => app.close());
    const body = JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'subscriptions/listen', params: { notifications: { toolsListChanged: true } } });
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: SSE, 'mcp-protocol-version': '2025-11-25' },
      body,
    });
    assert.equal(response.status, 200);
    assert.deepEqual(await response.json(), {
      jsonrpc: '2.0',
      id: 2,
      error: { code: -32601, message: 'Method not found', data: { method: 'subscriptions/listen' } },
    });
  });

  it('announces tools.listChanged in initialize and server/discover only when the tool list can change', async () => {
    for (const changes of [true, false]) {
      const { app, url } = await serve(changes);
      const init = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: SSE },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'initialize',
          params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' } },
        }),
      });
      const discover = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: SSE, 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'server/discover' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'server/discover', params: { _meta: MODERN_META } }),
      });
      for (const response of [init, discover]) {
        // (Beside the tasks capability of 2025-11-25 and the tasks extension of 2026-07-28.)
        assert.deepEqual(((await response.json()) as { result: { capabilities: { tools: unknown } } }).result.capabilities.tools, { listChanged: changes });
      }
      await app.close();
    }
  });
});

describe('GET /mcp (the 2025 revisions)', () => {
  it('opens a stream that carries each change as notifications/tools/list_changed; closing it ends the subscription', async (t) => {
    const { app, url, registry } = await serve();
    t.after(() => app.close());
    const abort = new AbortController();
    const response = await fetch(url, { headers: LEGACY_GET, signal: abort.signal });
    assert.equal(response.status, 200);
    assert.equal(response.headers.get('content-type'), 'text/event-stream');
    assert.equal(registry.listeners, 1);
    const stream = messages(response.body!);
    registry.change();
    registry.change();
    assert.deepEqual(await next(stream), { jsonrpc: '2.0', method: 'notifications/tools/list_changed' });
    assert.deepEqual(await next(stream), { jsonrpc: '2.0', method: 'notifications/tools/list_changed' });
    abort.abort();
    await until(() => registry.listeners === 0, 'the subscription to end');
  });

  it('answers 405 with Allow: POST when the tool list cannot change, or for 2026-07-28 (which has no GET stream)', async (t) => {
    const fixed = await serve(false);
    t.after(() => fixed.app.close());
    const changing = await serve();
    t.after(() => changing.app.close());
    for (const [url, headers] of [
      [fixed.url, LEGACY_GET],
      [changing.url, { accept: 'text/event-stream', 'mcp-protocol-version': '2026-07-28' }],
    ] as const) {
      const response = await fetch(url, { headers });
      assert.equal(response.status, 405);
      assert.equal(response.headers.get('allow'), 'POST');
      assert.equal(await response.text(), '');
    }
  });

  it('refuses an unknown revision with 400 and a client that does not take an event stream with 406', async (t) => {
    const { app, url } = await serve();
    t.after(() => app.close());
    const unknown = await fetch(url, { headers: { accept: 'text/event-stream', 'mcp-protocol-version': '2024-01-01' } });
    assert.equal(unknown.status, 400);
    assert.deepEqual(await unknown.json(), {
      jsonrpc: '2.0',
      id: null,
      error: {
        code: -32022,
        message: 'Unsupported protocol version',
        data: { supported: ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05'], requested: '2024-01-01' },
      },
    });
    // From 2025-11-25 on an error that names no request has no id; before, "id": null.
    const latest = await fetch(url, { headers: { accept: 'application/json', 'mcp-protocol-version': '2025-11-25' } });
    assert.equal(latest.status, 406);
    assert.deepEqual(await latest.json(), { jsonrpc: '2.0', error: { code: -32600, message: NOT_ACCEPTABLE } });
    const earlier = await fetch(url, { headers: { accept: 'application/json' } });
    assert.equal(earlier.status, 406);
    assert.deepEqual(await earlier.json(), { jsonrpc: '2.0', id: null, error: { code: -32600, message: NOT_ACCEPTABLE } });
  });
});

describe('the bounds on subscriptions over HTTP', () => {
  /** The MCP routes alone, each request's caller named by its x-caller header, with room for two subscriptions per caller and three in all. */
  async function bounded(): Promise<{ url: string; app: FastifyInstance }> {
    const registry = new ToolRegistry().register(Echo);
    const app = Fastify();
    app.decorateRequest('principal', undefined);
    app.addHook('onRequest', (request, _reply, done) => {
      request.principal = { label: String(request.headers['x-caller']) } as typeof request.principal;
      done();
    });
    const gateway = new Gateway({ registry, logger: pino({ level: 'silent' }) });
    mcpRoutes(app, { gateway, idleTimeoutMs: 1000, toolsChange: (listener) => registry.onChange(listener), maxSubscriptions: { perCaller: 2, total: 3 } });
    const url = await app.listen({ port: 0, host: '127.0.0.1' });
    return { url: new URL('/mcp', url).href, app };
  }

  it("refuses a caller past its share (GET 429, listen -32603 in a 200) and anyone past the server's (GET 503)", async (t) => {
    const { url, app } = await bounded();
    const aborts: AbortController[] = [];
    // Every response is held until the end: undici cancels the body of a Response that is garbage
    // collected, which would close its subscription behind the test's back.
    const responses: Response[] = [];
    t.after(async () => {
      aborts.forEach((abort) => abort.abort());
      responses.length = 0;
      await app.close();
    });
    const open = async (init: RequestInit) => {
      const abort = new AbortController();
      aborts.push(abort);
      const response = await fetch(url, { ...init, signal: abort.signal });
      responses.push(response);
      return response;
    };
    assert.equal((await open({ headers: { ...LEGACY_GET, 'x-caller': 'a' } })).status, 200);
    assert.equal((await open({ headers: { ...LEGACY_GET, 'x-caller': 'a' } })).status, 200);

    const thirdGet = await open({ headers: { ...LEGACY_GET, 'x-caller': 'a' } });
    assert.equal(thirdGet.status, 429);
    assert.deepEqual(await thirdGet.json(), {
      jsonrpc: '2.0',
      error: { code: -32603, message: 'Subscription limit reached: one caller may hold at most 2 open subscriptions; close one first' },
    });
    const thirdListen = await open({ method: 'POST', headers: { ...LISTEN_HEADERS, 'x-caller': 'a' }, body: listenBody('listen:1') });
    assert.equal(thirdListen.status, 200);
    assert.deepEqual(await thirdListen.json(), {
      jsonrpc: '2.0',
      id: 'listen:1',
      error: { code: -32603, message: 'Subscription limit reached: one caller may hold at most 2 open subscriptions; close one first' },
    });

    const other = await open({ method: 'POST', headers: { ...LISTEN_HEADERS, 'x-caller': 'b' }, body: listenBody('listen:0') });
    assert.deepEqual(await next(messages(other.body!)), acknowledged('listen:0'));
    const past = await open({ headers: { ...LEGACY_GET, 'x-caller': 'c' } });
    assert.equal(past.status, 503);
    assert.deepEqual(await past.json(), {
      jsonrpc: '2.0',
      error: { code: -32603, message: 'Subscription limit reached: the server keeps at most 3 open subscriptions; try again later' },
    });
  });
});

describe('a burst of list changes over HTTP, heard by the SDK clients', () => {
  it('each client hears 40 changes as one notification at once and one a second later (the last change), then the next change on its own', async (t) => {
    const info = { name: 'toolport-list-changed', version: '1.0.0' };
    // A server per client: its registry's one listener is there once that client's stream or subscription is open.
    const clients = await Promise.all(
      CLIENT_KINDS.map(async (kind) => {
        // No load shedding: the bursts' compilations block the event loop, and the test is about what the clients hear.
        const registry = new ChangingRegistry().register(Echo);
        const app = await buildApp({ registry, connections: { idleTimeoutMs: 1000 }, upstreams: { status: () => ({}) }, pressure: false });
        const url = new URL('/mcp', await app.listen({ port: 0, host: '127.0.0.1' })).href;
        const heard = { count: 0 };
        // Every notification counted as it comes: no refresh, no debounce on the client's side.
        const listChanged = { tools: { autoRefresh: false, debounceMs: 0, onChanged: () => heard.count++ } };
        const client =
          kind === 'v1'
            ? new ClientV1(info, { listChanged })
            : new ClientV2(info, { listChanged, ...(kind === 'v2-modern' ? { versionNegotiation: { mode: { pin: '2026-07-28' } } } : {}) });
        await client.connect(kind === 'v1' ? new HttpV1(new URL(url)) : new HttpV2(new URL(url)));
        await until(() => registry.listeners === 1, `the ${kind} client to listen`);
        return { kind, client, heard, registry, app };
      }),
    );
    // Closed together: each close waits out the idle timeout of the connection its client left.
    t.after(() => Promise.all(clients.map(async ({ client, app }) => [await client.close(), await app.close()])));
    for (const { registry } of clients) for (let i = 0; i < 40; i++) registry.change();
    await until(() => clients.every(({ heard }) => heard.count >= 2), 'the last change of the burst to be told');
    for (const { kind, client, heard } of clients) {
      assert.equal(heard.count, 2, kind);
      // 40 changes: the tool was added and taken away again, the last change.
      const { tools } = await client.listTools();
      assert.deepEqual(
        tools.map((tool) => tool.name),
        ['Echo'],
        kind,
      );
    }
    // A change after the burst: told on its own, after everything the burst made the server send.
    for (const { registry } of clients) registry.change();
    await until(() => clients.every(({ heard }) => heard.count >= 3), 'the change after the burst to be told');
    assert.deepEqual(
      clients.map(({ heard }) => heard.count),
      clients.map(() => 3),
    );
  });
});
