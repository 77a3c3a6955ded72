import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { createInterface } from 'node:readline';
import { describe, it } from 'node:test';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { Client as ClientV2 } from '@modelcontextprotocol/client';
import { pino } from 'pino';
import { Type } from 'typebox';
import { defineTool } from '#src/core/define-tool.js';
import { ANYONE as ANY_CALLER, Gateway } from '#src/core/gateway.js';
import { ToolRegistry } from '#src/core/registry.js';
import { textResult } from '#src/core/result.js';
import { McpDispatcher } from '#src/mcp/dispatcher.js';
import { gatewayBackend } from '#src/mcp/gateway-backend.js';
import { serveStdio, type StdioOptions } from '#src/mcp/stdio.js';
import { Echo } from '#src/tools/echo.js';
import { CLIENT_KINDS } from '../support/mcp-clients.js';
import { until } from '../support/wait.js';
import { WatchedRegistry } from '../support/watched-registry.js';
import { ANYONE, fakeBackend, type FakeCaller } from './fake-backend.js';

// Over stdio: a client of the legacy handshake hears each change unasked; a 2026-07-28 client
// hears them only on its subscriptions/listen, each stamped with the listen request's id.

const MODERN_META = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} };
const SUBSCRIPTION_KEY = 'io.modelcontextprotocol/subscriptionId';
const SERVER_INFO = { 'io.modelcontextprotocol/serverInfo': { name: 'toolport', version: '0.1.0' } };
const UNSTAMPED = { jsonrpc: '2.0', method: 'notifications/tools/list_changed' };
const stamped = (id: string | number) => ({ jsonrpc: '2.0', method: 'notifications/tools/list_changed', params: { _meta: { [SUBSCRIPTION_KEY]: id } } });
const acknowledged = (id: string | number, notifications: Record<string, unknown> = { toolsListChanged: true }) => ({
  jsonrpc: '2.0',
  method: 'notifications/subscriptions/acknowledged',
  params: { notifications, _meta: { [SUBSCRIPTION_KEY]: id } },
});
const closedGracefully = (id: string | number) => ({
  jsonrpc: '2.0',
  id,
  result: { resultType: 'complete', _meta: { [SUBSCRIPTION_KEY]: id, ...SERVER_INFO } },
});
const listen = (id: string | number, notifications: unknown = { toolsListChanged: true }) => ({
  jsonrpc: '2.0',
  id,
  method: 'subscriptions/listen',
  params: { _meta: MODERN_META, notifications },
});
const ping = (id: number) => ({ jsonrpc: '2.0', id, method: 'ping' });

/** A stdio server whose tool list the test changes (`change`), with every line it wrote. */
function harness(options: Partial<StdioOptions<FakeCaller>> = {}) {
  const input = new PassThrough();
  const output = new PassThrough();
  const lines: unknown[] = [];
  const listeners = new Set<() => void>();
  createInterface({ input: output }).on('line', (line) => lines.push(JSON.parse(line)));
  const dispatcher = new McpDispatcher(fakeBackend(), { listChanged: true });
  const onToolsChanged = (listener: () => void) => {
    listeners.add(listener);
    return () => listeners.delete(listener);
  };
  const done = serveStdio(dispatcher, input, output, { caller: ANYONE, onToolsChanged, ...options });
  const send = (message: unknown): void => void input.write(`${JSON.stringify(message)}\n`);
  const lineCount = (count: number) => until(() => lines.length >= count, `${count} lines (got ${JSON.stringify(lines)})`);
  return { input, lines, done, send, lineCount, change: () => listeners.forEach((listener) => listener()) };
}

describe('list changes over stdio, line by line', () => {
  it('a client that went through initialize hears each change unasked', async () => {
    const { send, lines, lineCount, change, input, done } = harness();
    send({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' } } });
    await lineCount(1);
    assert.deepEqual((lines[0] as { result: { capabilities: unknown } }).result.capabilities, { tools: { listChanged: true } });
    change();
    send(ping(2));
    await lineCount(3);
    assert.deepEqual(lines.slice(1), [UNSTAMPED, { jsonrpc: '2.0', id: 2, result: {} }]);
    input.end();
    await done;
  });

  it('a 2026-07-28 client hears nothing unasked, and each change on its subscription until it cancels it', async () => {
    const { send, lines, lineCount, change, input, done } = harness();
    change();
    send(ping(1));
    await lineCount(1);
    assert.deepEqual(lines, [{ jsonrpc: '2.0', id: 1, result: {} }], 'no handshake, no unasked change');

    send(listen('listen:0'));
    await lineCount(2);
    change();
    send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'listen:0' } });
    send(ping(2));
    await lineCount(4);
    change();
    send(ping(3));
    await lineCount(5);
    assert.deepEqual(lines.slice(1), [
      acknowledged('listen:0'),
      stamped('listen:0'),
      { jsonrpc: '2.0', id: 2, result: {} },
      { jsonrpc: '2.0', id: 3, result: {} },
    ]);
    input.end();
    await done;
  });

  it('two subscriptions each hear a change, with their own id', async () => {
    const { send, lines, lineCount, change, input, done } = harness();
    send(listen('a'));
    send(listen(7));
    await lineCount(2);
    change();
    await lineCount(4);
    assert.deepEqual(new Set(lines.slice(2).map((line) => JSON.stringify(line))), new Set([JSON.stringify(stamped('a')), JSON.stringify(stamped(7))]));
    input.end();
    await done;
  });

  it('the end of the input closes open subscriptions with their empty results, and the server resolves', async () => {
    const { send, lines, lineCount, input, done } = harness();
    send(listen('listen:0'));
    await lineCount(1);
    input.end();
    await done;
    assert.deepEqual(lines, [acknowledged('listen:0'), closedGracefully('listen:0')]);
  });

  it('the shutdown signal closes open subscriptions with their empty results', async () => {
    const shutdown = new AbortController();
    const { send, lines, lineCount, done } = harness({ signal: shutdown.signal });
    send(listen(5));
    await lineCount(1);
    shutdown.abort(new Error('the server is shutting down'));
    await done;
    assert.deepEqual(lines, [acknowledged(5), closedGracefully(5)]);
  });

  it('past maxSubscriptions a listen is refused with -32603; open subscriptions do not take the places of calls', async () => {
    const { send, lines, lineCount, input, done } = harness({ maxSubscriptions: 2, maxInFlight: 1 });
    send(listen('a'));
    send(listen('b'));
    send(listen('c'));
    send({ jsonrpc: '2.0', id: 'call', method: 'tools/call', params: { name: 'Echo', arguments: { text: 'still served' } } });
    await lineCount(4);
    assert.deepEqual(lines.slice(0, 4), [
      acknowledged('a'),
      acknowledged('b'),
      {
        jsonrpc: '2.0',
        id: 'c',
        error: { code: -32603, message: 'Subscription limit reached: one caller may hold at most 2 open subscriptions; close one first' },
      },
      { jsonrpc: '2.0', id: 'call', result: { content: [{ type: 'text', text: 'still served' }], isError: false } },
    ]);
    input.end();
    await done;
  });

  it('without a tool source, a listen is acknowledged as {} and closed at once', async () => {
    const input = new PassThrough();
    const output = new PassThrough();
    const lines: unknown[] = [];
    createInterface({ input: output }).on('line', (line) => lines.push(JSON.parse(line)));
    const done = serveStdio(new McpDispatcher(fakeBackend()), input, output, { caller: ANYONE });
    input.write(`${JSON.stringify(listen(1))}\n`);
    await until(() => lines.length === 2, 'the acknowledgement and the result');
    assert.deepEqual(lines, [acknowledged(1, {}), closedGracefully(1)]);
    input.end();
    await done;
  });
});

/** An SDK client transport over a pair of in-memory streams, one JSON message per line, to `serveStdio`. */
class PipeTransport {
  onmessage?: (message: never) => void;
  onclose?: () => void;
  onerror?: (error: Error) => void;
  readonly #toServer = new PassThrough();
  readonly #fromServer = new PassThrough();
  readonly served: Promise<void>;

  constructor(serve: (input: PassThrough, output: PassThrough) => Promise<void>) {
    this.served = serve(this.#toServer, this.#fromServer);
  }

  async start(): Promise<void> {
    createInterface({ input: this.#fromServer }).on('line', (line) => this.onmessage?.(JSON.parse(line) as never));
  }

  async send(message: unknown): Promise<void> {
    this.#toServer.write(`${JSON.stringify(message)}\n`);
  }

  async close(): Promise<void> {
    this.#toServer.end();
    this.onclose?.();
  }
}

describe('list changes over stdio, heard by the SDK clients', () => {
  for (const kind of CLIENT_KINDS) {
    it(`${kind}: the client hears a change and the tools/list it then fetches has the new tool`, async (t) => {
      const registry = new ToolRegistry().register(Echo);
      const gateway = new Gateway({ registry, logger: pino({ level: 'silent' }) });
      const dispatcher = new McpDispatcher(gatewayBackend(gateway, { transport: 'stdio', serverInfo: { name: 'toolport', version: '0.1.0' } }), {
        listChanged: true,
      });
      const transport = new PipeTransport((input, output) =>
        serveStdio(dispatcher, input, output, { caller: ANY_CALLER, onToolsChanged: (listener) => registry.onChange(listener) }),
      );
      const heard: Array<Array<{ name: string }> | null> = [];
      const listChanged = { tools: { debounceMs: 0, onChanged: (_error: Error | null, tools: Array<{ name: string }> | null) => heard.push(tools) } };
      const info = { name: 'toolport-list-changed', version: '1.0.0' };
      const client =
        kind === 'v1'
          ? new ClientV1(info, { listChanged })
          : new ClientV2(info, { listChanged, ...(kind === 'v2-modern' ? { versionNegotiation: { mode: { pin: '2026-07-28' } } } : {}) });
      await client.connect(transport as never);
      // The 2026-07-28 client hears changes only on the subscription its listChanged option opened.
      if (client instanceof ClientV2) assert.equal(client.autoOpenedSubscription !== undefined, kind === 'v2-modern');
      t.after(async () => {
        await client.close();
        await transport.served;
      });

      const tool = defineTool({ name: 'up__added', description: 'Added.', inputSchema: Type.Object({}), execute: () => textResult('added') });
      registry.replaceSource('up', [tool]);
      await until(() => heard.length > 0, 'the change to be heard');
      assert.deepEqual(
        heard[0]?.map((t) => t.name),
        ['Echo', 'up__added'],
      );
    });
  }
});

describe('a burst of list changes over stdio, heard by the SDK clients', () => {
  it('each client hears 40 changes as one notification at once and one a second later (the last change), then the next change on its own', async (t) => {
    const registry = new WatchedRegistry().register(Echo);
    const gateway = new Gateway({ registry, logger: pino({ level: 'silent' }) });
    const dispatcher = new McpDispatcher(gatewayBackend(gateway, { transport: 'stdio', serverInfo: { name: 'toolport', version: '0.1.0' } }), {
      listChanged: true,
    });
    const info = { name: 'toolport-list-changed', version: '1.0.0' };
    // One stdio server per client, all on one registry, as `toolport mcp` processes of one configuration are.
    const clients = await Promise.all(
      CLIENT_KINDS.map(async (kind) => {
        const transport = new PipeTransport((input, output) =>
          serveStdio(dispatcher, input, output, { caller: ANY_CALLER, onToolsChanged: (listener) => registry.onChange(listener) }),
        );
        const heard = { count: 0 };
        // Every notification counted as it comes: no refresh, no debounce on the client's side.
        const listChanged = { tools: { autoRefresh: false, debounceMs: 0, onChanged: () => heard.count++ } };
        const client =
          kind === 'v1'
            ? new ClientV1(info, { listChanged })
            : new ClientV2(info, { listChanged, ...(kind === 'v2-modern' ? { versionNegotiation: { mode: { pin: '2026-07-28' } } } : {}) });
        await client.connect(transport as never);
        t.after(async () => {
          await client.close();
          await transport.served;
        });
        return { kind, client, heard };
      }),
    );
    // A listener per server for its legacy clients, and one for the 2026-07-28 client's subscription.
    await until(() => registry.listeners === CLIENT_KINDS.length + 1, 'every client to listen');

    const tool = (name: string) => defineTool({ name, description: 'Added.', inputSchema: Type.Object({}), execute: () => textResult('') });
    for (let i = 0; i < 40; i++) registry.replaceSource('up', [tool(`up__t${i}`)]);
    await until(() => clients.every(({ heard }) => heard.count >= 2), 'the last change of the burst to be told');
    for (const { kind, client, heard } of clients) {
      assert.equal(heard.count, 2, kind);
      const { tools } = await client.listTools();
      assert.deepEqual(
        tools.map((t) => t.name),
        ['Echo', 'up__t39'],
        kind,
      );
    }
    // A change after the burst: told on its own, after everything the burst made the servers send.
    registry.replaceSource('up', [tool('up__after')]);
    await until(() => clients.every(({ heard }) => heard.count >= 3), 'the change after the burst to be told');
    assert.deepEqual(
      clients.map(({ heard }) => heard.count),
      clients.map(() => 3),
    );
  });
});
