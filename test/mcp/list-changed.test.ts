import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { describe, it, type TestContext } from 'node:test';
import { CallAbort } from '#src/core/call-abort.js';
import { BoundedOutput } from '#src/mcp/bounded-output.js';
import { InFlightCalls } from '#src/mcp/cancellable.js';
import { McpDispatcher, type DispatchContext, type DispatchOutcome } from '#src/mcp/dispatcher.js';
import type { JsonRpcNotification } from '#src/core/json-rpc.js';
import { coalesced, DEFAULT_LIST_CHANGED_INTERVAL_MS, SubscriptionHub } from '#src/mcp/subscriptions.js';
import { until } from '../support/wait.js';
import { ANYONE, fakeBackend, type FakeCaller } from './fake-backend.js';

const VERSION_KEY = 'io.modelcontextprotocol/protocolVersion';
const CAPABILITIES_KEY = 'io.modelcontextprotocol/clientCapabilities';
const SUBSCRIPTION_KEY = 'io.modelcontextprotocol/subscriptionId';
const SERVER_INFO = { 'io.modelcontextprotocol/serverInfo': { name: 'toolport', version: '0.1.0' } };
const MODERN_META = { [VERSION_KEY]: '2026-07-28', [CAPABILITIES_KEY]: {} };

const listen = (id: string | number, notifications: unknown, meta: Record<string, unknown> = MODERN_META) => ({
  jsonrpc: '2.0',
  id,
  method: 'subscriptions/listen',
  params: { _meta: meta, notifications },
});

/** A tool source whose changes the test makes, counting its listeners. */
function toolSource() {
  const listeners = new Set<() => void>();
  return {
    change: () => listeners.forEach((listener) => listener()),
    get listeners() {
      return listeners.size;
    },
    toolsChange: (listener: () => void) => {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}

/** A dispatcher that announces list changes, a hub over `source`, and what one listen sends. */
function listening(options: { listChanged?: boolean; perCaller?: number; total?: number } = {}) {
  const source = toolSource();
  // Each change told at once: what a listen sends, not how often (see 'list changes told at most once a second').
  const hub = new SubscriptionHub(source.toolsChange, { perCaller: options.perCaller ?? 4, total: options.total ?? 8, listChangedIntervalMs: 0 });
  const dispatcher = new McpDispatcher(fakeBackend(), { listChanged: options.listChanged ?? true });
  const start = (message: unknown, context: Partial<DispatchContext<FakeCaller>> = {}) => {
    const sent: JsonRpcNotification[] = [];
    const outcome = dispatcher.handle(message, { caller: ANYONE, notify: (n) => sent.push(n), subscriptions: hub.of('anyone'), ...context });
    return { sent, outcome };
  };
  return { source, hub, dispatcher, start };
}

const ack = (id: string | number, notifications: Record<string, unknown>): JsonRpcNotification => ({
  jsonrpc: '2.0',
  method: 'notifications/subscriptions/acknowledged',
  params: { notifications, _meta: { [SUBSCRIPTION_KEY]: id } },
});
const changed = (id: string | number): JsonRpcNotification => ({
  jsonrpc: '2.0',
  method: 'notifications/tools/list_changed',
  params: { _meta: { [SUBSCRIPTION_KEY]: id } },
});
const closedResult = (id: string | number): DispatchOutcome => ({
  reply: { jsonrpc: '2.0', id, result: { resultType: 'complete', _meta: { [SUBSCRIPTION_KEY]: id, ...SERVER_INFO } } },
  status: 200,
});

describe('subscriptions/listen', () => {
  it('acknowledges the filter, sends each change stamped with the listen id, and ends with the empty result when the server closes', async () => {
    const { source, hub, start } = listening();
    const { sent, outcome } = start(listen('listen:0', { toolsListChanged: true }));
    assert.deepEqual(sent, [ack('listen:0', { toolsListChanged: true })]);
    source.change();
    source.change();
    assert.deepEqual(sent.slice(1), [changed('listen:0'), changed('listen:0')]);
    hub.closeAll();
    assert.deepEqual(await outcome, closedResult('listen:0'));
    assert.equal(source.listeners, 0, 'the tool source is left alone once no one listens');
  });

  it('honors only toolsListChanged: other types and unknown fields are left out of the acknowledgement', async () => {
    const { hub, start } = listening();
    const { sent } = start(listen(7, { toolsListChanged: true, promptsListChanged: true, resourceSubscriptions: ['file:///a'], futureThing: true }));
    assert.deepEqual(sent, [ack(7, { toolsListChanged: true })]);
    hub.closeAll();
  });

  it('acknowledges a filter that asks for nothing this server sends as {} and closes it at once', async () => {
    const { hub, start } = listening();
    for (const filter of [{}, { toolsListChanged: false }, { promptsListChanged: true, resourcesListChanged: true }]) {
      const { sent, outcome } = start(listen(1, filter));
      assert.deepEqual(await outcome, closedResult(1));
      assert.deepEqual(sent, [ack(1, {})]);
    }
    assert.equal(hub.size, 0);
  });

  it('honors nothing when the server does not announce tools.listChanged (the tool list never changes)', async () => {
    const { hub, start } = listening({ listChanged: false });
    const { sent, outcome } = start(listen(1, { toolsListChanged: true }));
    assert.deepEqual(await outcome, closedResult(1));
    assert.deepEqual(sent, [ack(1, {})]);
    assert.equal(hub.size, 0);
  });

  it('refuses a malformed filter with invalid params, naming the field', async () => {
    const { start } = listening();
    const cases: Array<[unknown, string]> = [
      [undefined, 'Invalid params: params.notifications must be an object (a SubscriptionFilter)'],
      [['toolsListChanged'], 'Invalid params: params.notifications must be an object (a SubscriptionFilter)'],
      [{ toolsListChanged: 'yes' }, 'Invalid params: params.notifications.toolsListChanged must be a boolean'],
      [{ promptsListChanged: 1 }, 'Invalid params: params.notifications.promptsListChanged must be a boolean'],
      [{ resourceSubscriptions: 'file:///a' }, 'Invalid params: params.notifications.resourceSubscriptions must be an array of strings'],
      [{ resourceSubscriptions: [1] }, 'Invalid params: params.notifications.resourceSubscriptions must be an array of strings'],
    ];
    for (const [filter, message] of cases) {
      const { sent, outcome } = start(listen(3, filter));
      assert.deepEqual(await outcome, { reply: { jsonrpc: '2.0', id: 3, error: { code: -32602, message } }, status: 200 }, JSON.stringify(filter));
      assert.deepEqual(sent, []);
    }
  });

  it('is a method of 2026-07-28 only: a legacy request gets method not found', async () => {
    const { start } = listening();
    const { outcome } = start({ jsonrpc: '2.0', id: 2, method: 'subscriptions/listen', params: { notifications: { toolsListChanged: true } } });
    assert.deepEqual(await outcome, {
      reply: { jsonrpc: '2.0', id: 2, error: { code: -32601, message: 'Method not found', data: { method: 'subscriptions/listen' } } },
      status: 200,
    });
  });

  it('needs a transport that streams: without notify it is an invalid request', async () => {
    const { dispatcher } = listening();
    const outcome = await dispatcher.handle(listen(4, { toolsListChanged: true }), { caller: ANYONE });
    assert.deepEqual(outcome, {
      reply: { jsonrpc: '2.0', id: 4, error: { code: -32600, message: 'Invalid Request: subscriptions/listen needs a transport that streams notifications' } },
      status: 200,
    });
  });

  it("refuses a subscription past the caller's share with -32603, sending nothing", async () => {
    const { hub, start } = listening({ perCaller: 2 });
    start(listen('a', { toolsListChanged: true }));
    start(listen('b', { toolsListChanged: true }));
    const { sent, outcome } = start(listen('c', { toolsListChanged: true }));
    assert.deepEqual(await outcome, {
      reply: {
        jsonrpc: '2.0',
        id: 'c',
        error: { code: -32603, message: 'Subscription limit reached: one caller may hold at most 2 open subscriptions; close one first' },
      },
      status: 200,
    });
    assert.deepEqual(sent, []);
    // Another caller has a share of its own.
    const other = start(listen('d', { toolsListChanged: true }), { subscriptions: hub.of('someone else') });
    assert.deepEqual(other.sent, [ack('d', { toolsListChanged: true })]);
    hub.closeAll();
  });

  it('ends without a response when the transport aborts (the connection closed), freeing its place', async () => {
    const { source, hub, start } = listening({ perCaller: 1 });
    const abort = new CallAbort();
    const { sent, outcome } = start(listen(1, { toolsListChanged: true }), { signal: abort });
    abort.abort(new Error('the client disconnected'));
    assert.deepEqual(await outcome, { reply: undefined, status: 202 });
    source.change();
    assert.equal(sent.length, 1, 'nothing after the end');
    assert.equal(hub.size, 0);
    assert.equal(source.listeners, 0);
  });

  it('ends without a response on notifications/cancelled naming the listen id', async () => {
    const { hub, dispatcher, start } = listening();
    const calls = new InFlightCalls();
    const { outcome } = start(listen('listen:0', { toolsListChanged: true }), { calls });
    const cancel = await dispatcher.handle({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'listen:0' } }, { caller: ANYONE, calls });
    assert.deepEqual(cancel, { reply: undefined, status: 202 });
    assert.deepEqual(await outcome, { reply: undefined, status: 202 });
    assert.equal(hub.size, 0);
    assert.equal(calls.size, 0);
  });

  it('announces tools.listChanged in initialize and server/discover only when asked to', async () => {
    for (const listChanged of [true, false]) {
      const dispatcher = new McpDispatcher(fakeBackend(), { listChanged });
      const init = await dispatcher.handle(
        { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' } } },
        { caller: ANYONE },
      );
      const discover = await dispatcher.handle({ jsonrpc: '2.0', id: 2, method: 'server/discover', params: { _meta: MODERN_META } }, { caller: ANYONE });
      for (const outcome of [init, discover]) {
        const reply = outcome.reply as unknown as { result: { capabilities: unknown } };
        assert.deepEqual(reply.result.capabilities, { tools: { listChanged } });
      }
    }
  });
});

describe('SubscriptionHub', () => {
  const quiet = { changed: () => {}, ended: () => {} };

  it('lets each caller hold at most its share, and the transport at most its total', () => {
    const hub = new SubscriptionHub(toolSource().toolsChange, { perCaller: 2, total: 3 });
    const first = hub.open('a', quiet);
    assert.ok(!('refused' in first));
    hub.open('a', quiet);
    assert.deepEqual(hub.open('a', quiet), {
      refused: 'Subscription limit reached: one caller may hold at most 2 open subscriptions; close one first',
      limit: 'caller',
    });
    hub.open('b', quiet);
    assert.deepEqual(hub.open('c', quiet), {
      refused: 'Subscription limit reached: the server keeps at most 3 open subscriptions; try again later',
      limit: 'server',
    });
    first.close();
    first.close();
    assert.equal(hub.size, 2);
    assert.ok(!('refused' in hub.open('a', quiet)), 'a closed subscription gives its place back, once');
  });

  it('listens to the tool source only while a subscription is open, and tells every subscriber of each change', () => {
    const source = toolSource();
    const hub = new SubscriptionHub(source.toolsChange);
    assert.equal(source.listeners, 0);
    let heard = 0;
    const one = hub.open('a', { changed: () => heard++, ended: () => {} });
    const two = hub.open('b', { changed: () => heard++, ended: () => {} });
    assert.equal(source.listeners, 1);
    source.change();
    assert.equal(heard, 2);
    if (!('refused' in one)) one.close();
    if (!('refused' in two)) two.close();
    assert.equal(source.listeners, 0);
  });

  it('ends every subscription at shutdown and opens none after', () => {
    const source = toolSource();
    const hub = new SubscriptionHub(source.toolsChange);
    let ended = 0;
    hub.open('a', { changed: () => {}, ended: () => ended++ });
    hub.open('b', { changed: () => {}, ended: () => ended++ });
    hub.closeAll();
    assert.equal(ended, 2);
    assert.equal(source.listeners, 0);
    assert.deepEqual(hub.open('a', quiet), { refused: 'The server is shutting down and opens no subscription; subscribe again elsewhere', limit: 'server' });
  });

  it('is not live without a tool source', () => {
    assert.equal(new SubscriptionHub(undefined).live, false);
    assert.equal(new SubscriptionHub(toolSource().toolsChange).live, true);
  });
});

describe('list changes told at most once a second', () => {
  /** A hub with the default interval over a source the test changes, on fake timers; `heard` counts what each subscriber heard. */
  function hubOf(t: TestContext) {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const source = toolSource();
    const hub = new SubscriptionHub(source.toolsChange);
    const heard = { a: 0, b: 0 };
    const open = (who: 'a' | 'b') => hub.open(who, { changed: () => heard[who]++, ended: () => {} }) as { close(): void };
    return { source, hub, heard, open, tick: (ms: number) => t.mock.timers.tick(ms) };
  }

  it('tells every subscriber of a burst of changes once at once and once a second later (the last change), then nothing', (t) => {
    const { source, heard, open, tick } = hubOf(t);
    open('a');
    open('b');
    for (let i = 0; i < 500; i++) source.change();
    assert.deepEqual(heard, { a: 1, b: 1 }, 'the first change at once');
    tick(DEFAULT_LIST_CHANGED_INTERVAL_MS - 1);
    source.change();
    assert.deepEqual(heard, { a: 1, b: 1 });
    tick(1);
    assert.deepEqual(heard, { a: 2, b: 2 }, 'the last change, at the end of the second');
    tick(10 * DEFAULT_LIST_CHANGED_INTERVAL_MS);
    assert.deepEqual(heard, { a: 2, b: 2 }, 'nothing more to tell');
  });

  it('tells a change after a quiet second at once, and a change during the second after a told one at its end', (t) => {
    const { source, heard, open, tick } = hubOf(t);
    open('a');
    source.change();
    tick(DEFAULT_LIST_CHANGED_INTERVAL_MS);
    source.change();
    assert.equal(heard.a, 2, 'at once after a quiet second');
    tick(DEFAULT_LIST_CHANGED_INTERVAL_MS);
    source.change();
    tick(DEFAULT_LIST_CHANGED_INTERVAL_MS / 2);
    source.change();
    assert.equal(heard.a, 3);
    tick(DEFAULT_LIST_CHANGED_INTERVAL_MS / 2);
    assert.equal(heard.a, 4);
  });

  it('drops a waiting change when the last subscription closes: the next subscriber hears its first change at once', (t) => {
    const { source, heard, open, tick } = hubOf(t);
    const a = open('a');
    source.change();
    source.change();
    a.close();
    tick(DEFAULT_LIST_CHANGED_INTERVAL_MS);
    assert.equal(heard.a, 1);
    open('b');
    source.change();
    assert.equal(heard.b, 1);
  });

  it('coalesced with an interval of 0 tells each change at once', () => {
    let told = 0;
    const change = coalesced(() => told++, 0);
    change();
    change();
    assert.equal(told, 2);
  });
});

describe('BoundedOutput with list changes', () => {
  it('keeps one waiting list change per subscription, after its acknowledgement, for a reader that does not read', async () => {
    const stream = new PassThrough({ highWaterMark: 1 });
    const out = new BoundedOutput(stream, { frame: (text) => `${text}\n` });
    out.progress({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 1, progress: 1 } });
    assert.equal(out.blocked, true);
    out.progress(ack('x', { toolsListChanged: true }));
    for (let i = 0; i < 100; i++) {
      out.progress(changed('x'));
      out.progress(changed('y'));
    }
    out.progress({ jsonrpc: '2.0', method: 'notifications/tools/list_changed' });
    out.progress({ jsonrpc: '2.0', method: 'notifications/tools/list_changed' });
    assert.equal(out.waiting, 4, 'the acknowledgement, one change per subscription, one unstamped change');

    const lines: string[] = [];
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => lines.push(...chunk.split('\n').filter(Boolean)));
    await until(() => out.waiting === 0 && lines.length === 5, 'the output to drain');
    assert.deepEqual(
      lines.slice(1).map((line) => JSON.parse(line) as unknown),
      [ack('x', { toolsListChanged: true }), changed('x'), changed('y'), { jsonrpc: '2.0', method: 'notifications/tools/list_changed' }],
    );
  });
});
