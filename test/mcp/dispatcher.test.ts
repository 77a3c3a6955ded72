import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { McpDispatcher, type DispatchContext, type DispatchOutcome } from '#src/mcp/dispatcher.js';
import { InFlightCalls } from '#src/mcp/cancellable.js';
import type { JsonRpcNotification } from '#src/core/json-rpc.js';
import { encode } from '#src/mcp/jsonrpc.js';
import { ANYONE, ECHO_ONLY, errorBody, fakeBackend, PNG, type FakeCaller } from './fake-backend.js';

const MODERN = '2026-07-28';
const META = { 'io.modelcontextprotocol/protocolVersion': MODERN, 'io.modelcontextprotocol/clientCapabilities': {} };
const SERVER_META = { 'io.modelcontextprotocol/serverInfo': { name: 'toolport', version: '0.1.0' } };

function request(method: string, params?: Record<string, unknown>, id: string | number = 1) {
  return { jsonrpc: '2.0', id, method, ...(params ? { params } : {}) };
}

/** A request of the stateless revision: the `_meta` envelope merged into its params. */
function modern(method: string, params: Record<string, unknown> = {}, id: string | number = 1) {
  const meta = { ...META, ...(params['_meta'] as Record<string, unknown> | undefined) };
  return request(method, { ...params, _meta: meta }, id);
}

/** The result of a single response, failing the test when it is anything else. */
function resultOf<T = Record<string, unknown>>(outcome: DispatchOutcome): T {
  const reply = outcome.reply;
  assert.ok(reply !== undefined && !Array.isArray(reply) && 'result' in reply, `expected a result, got ${JSON.stringify(reply)}`);
  return reply.result as T;
}

function context(extra: Partial<DispatchContext<FakeCaller>> = {}): DispatchContext<FakeCaller> {
  return { caller: ANYONE, ...extra };
}

const ECHO_TOOL = {
  name: 'Echo',
  description: 'Returns the text.',
  inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'], additionalProperties: false },
};
const PIXEL_TOOL = {
  name: 'Pixel',
  description: 'Returns a caption and a one-pixel image.',
  inputSchema: { type: 'object', additionalProperties: false, properties: {} },
};
const SLOW_TOOL = { name: 'Slow', description: 'Waits until aborted, reporting progress.', inputSchema: { type: 'object', properties: {} } };

describe('initialize', () => {
  const dispatcher = new McpDispatcher(fakeBackend());

  for (const version of ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05']) {
    test(`initialize asking for ${version} is answered with ${version}, statelessly`, async () => {
      const params = { protocolVersion: version, capabilities: {}, clientInfo: { name: 'c', version: '1' } };
      const outcome = await dispatcher.handle(request('initialize', params), context());
      assert.deepEqual(outcome, {
        reply: {
          jsonrpc: '2.0',
          id: 1,
          result: { protocolVersion: version, capabilities: { tools: { listChanged: false } }, serverInfo: { name: 'toolport', version: '0.1.0' } },
        },
        status: 200,
        negotiatedVersion: version,
      });
    });
  }

  for (const asked of ['1999-01-01', '2025-12-01', MODERN]) {
    test(`initialize asking for ${asked} gets the newest legacy revision, 2025-11-25`, async () => {
      const outcome = await dispatcher.handle(request('initialize', { protocolVersion: asked, capabilities: {} }), context());
      assert.equal(outcome.negotiatedVersion, '2025-11-25');
      assert.deepEqual(resultOf<{ protocolVersion: string }>(outcome).protocolVersion, '2025-11-25');
    });
  }

  test('initialize carries the instructions when the backend has them', async () => {
    const withInstructions = new McpDispatcher(fakeBackend({}, { instructions: 'Use Echo to test.' }));
    const outcome = await withInstructions.handle(request('initialize', { protocolVersion: '2025-06-18' }), context());
    assert.equal(resultOf<{ instructions: string }>(outcome).instructions, 'Use Echo to test.');
  });

  test('initialize without a protocolVersion is invalid params', async () => {
    const outcome = await dispatcher.handle(request('initialize', { capabilities: {} }, 'i'), context());
    assert.deepEqual(outcome, {
      reply: { jsonrpc: '2.0', id: 'i', error: { code: -32602, message: 'Invalid params: initialize needs params.protocolVersion, a string' } },
      status: 200,
    });
  });

  test('initialize sent with a stateless-revision header is a header mismatch (400)', async () => {
    const outcome = await dispatcher.handle(request('initialize', { protocolVersion: '2025-11-25' }), context({ protocolVersion: MODERN }));
    assert.deepEqual(outcome, {
      reply: {
        jsonrpc: '2.0',
        id: 1,
        error: { code: -32020, message: 'Header mismatch: initialize (the legacy handshake) was sent with protocol version 2026-07-28' },
      },
      status: 400,
    });
  });

  test('initialize with a 2026-07-28 envelope is a method the stateless revision does not have (404)', async () => {
    const outcome = await dispatcher.handle(modern('initialize'), context({ protocolVersion: MODERN }));
    assert.deepEqual(outcome, {
      reply: { jsonrpc: '2.0', id: 1, error: { code: -32601, message: 'Method not found', data: { method: 'initialize' } } },
      status: 404,
    });
  });

  test('notifications/initialized gets no reply (202)', async () => {
    assert.deepEqual(await dispatcher.handle({ jsonrpc: '2.0', method: 'notifications/initialized' }, context()), { reply: undefined, status: 202 });
  });
});

describe('ping and server/discover', () => {
  const dispatcher = new McpDispatcher(fakeBackend());

  test('ping answers an empty result in the legacy revisions', async () => {
    const outcome = await dispatcher.handle(request('ping', undefined, 7), context({ protocolVersion: '2025-06-18' }));
    assert.deepEqual(outcome, { reply: { jsonrpc: '2.0', id: 7, result: {} }, status: 200 });
  });

  test('ping is method not found (404) in 2026-07-28, which removed it', async () => {
    const outcome = await dispatcher.handle(modern('ping'), context({ protocolVersion: MODERN }));
    assert.deepEqual(outcome, {
      reply: { jsonrpc: '2.0', id: 1, error: { code: -32601, message: 'Method not found', data: { method: 'ping' } } },
      status: 404,
    });
  });

  test('server/discover lists the stateless revisions, the tools capability and the server', async () => {
    const outcome = await dispatcher.handle(modern('server/discover'), context({ protocolVersion: MODERN }));
    assert.deepEqual(outcome, {
      reply: {
        jsonrpc: '2.0',
        id: 1,
        result: {
          resultType: 'complete',
          supportedVersions: [MODERN],
          capabilities: { tools: { listChanged: false } },
          ttlMs: 60000,
          cacheScope: 'public',
          _meta: SERVER_META,
        },
      },
      status: 200,
    });
  });

  test('server/discover serves a request whose _meta has no clientInfo', async () => {
    const outcome = await dispatcher.handle(modern('server/discover'), context());
    assert.equal(outcome.status, 200);
    assert.ok('result' in (outcome.reply as object));
  });

  test('server/discover without an envelope, in a legacy revision, is method not found (200)', async () => {
    const outcome = await dispatcher.handle(request('server/discover'), context({ protocolVersion: '2025-11-25' }));
    assert.deepEqual(outcome, {
      reply: { jsonrpc: '2.0', id: 1, error: { code: -32601, message: 'Method not found', data: { method: 'server/discover' } } },
      status: 200,
    });
  });
});

describe('the stateless revision: per-request _meta and versions', () => {
  const dispatcher = new McpDispatcher(fakeBackend());

  test('a request without _meta under a 2026-07-28 header is invalid params (400)', async () => {
    const outcome = await dispatcher.handle(request('server/discover', {}, 101), context({ protocolVersion: MODERN }));
    assert.deepEqual(outcome, {
      reply: {
        jsonrpc: '2.0',
        id: 101,
        error: {
          code: -32602,
          message:
            'Invalid params: protocol version 2026-07-28 requires _meta["io.modelcontextprotocol/protocolVersion"] and _meta["io.modelcontextprotocol/clientCapabilities"] on every request',
          data: { missing: ['_meta'] },
        },
      },
      status: 400,
    });
  });

  test('_meta without the protocol version under a 2026-07-28 header is invalid params (400)', async () => {
    const params = { _meta: { 'io.modelcontextprotocol/clientCapabilities': {} } };
    const outcome = await dispatcher.handle(request('server/discover', params, 102), context({ protocolVersion: MODERN }));
    assert.equal(outcome.status, 400);
    assert.deepEqual((outcome.reply as { error: { data: unknown } }).error.data, { missing: ['io.modelcontextprotocol/protocolVersion'] });
  });

  test('_meta without clientCapabilities is invalid params (400)', async () => {
    const params = { _meta: { 'io.modelcontextprotocol/protocolVersion': MODERN } };
    const outcome = await dispatcher.handle(request('server/discover', params, 104), context({ protocolVersion: MODERN }));
    assert.deepEqual(outcome, {
      reply: {
        jsonrpc: '2.0',
        id: 104,
        error: {
          code: -32602,
          message: 'Invalid params: _meta["io.modelcontextprotocol/clientCapabilities"] must be an object',
          data: { missing: ['io.modelcontextprotocol/clientCapabilities'] },
        },
      },
      status: 400,
    });
  });

  test('a protocol version in _meta that is not a string is invalid params (400)', async () => {
    const outcome = await dispatcher.handle(modern('tools/list', { _meta: { 'io.modelcontextprotocol/protocolVersion': 2026 } }), context());
    assert.deepEqual(outcome, {
      reply: { jsonrpc: '2.0', id: 1, error: { code: -32602, message: 'Invalid params: _meta["io.modelcontextprotocol/protocolVersion"] must be a string' } },
      status: 400,
    });
  });

  test('an unsupported version in _meta is UnsupportedProtocolVersionError (400) naming the supported and requested versions', async () => {
    const params = { _meta: { 'io.modelcontextprotocol/protocolVersion': 'v999.0.0' } };
    const outcome = await dispatcher.handle(modern('server/discover', params, 301), context({ protocolVersion: 'v999.0.0' }));
    assert.deepEqual(outcome, {
      reply: {
        jsonrpc: '2.0',
        id: 301,
        error: { code: -32022, message: 'Unsupported protocol version', data: { supported: [MODERN], requested: 'v999.0.0' } },
      },
      status: 400,
    });
  });

  test('a header that disagrees with _meta is HeaderMismatch (400)', async () => {
    const params = { _meta: { 'io.modelcontextprotocol/protocolVersion': 'v999.0.0' } };
    const outcome = await dispatcher.handle(modern('server/discover', params, 302), context({ protocolVersion: MODERN }));
    assert.deepEqual(outcome, {
      reply: {
        jsonrpc: '2.0',
        id: 302,
        error: { code: -32020, message: 'Header mismatch: the MCP-Protocol-Version header names 2026-07-28 but _meta names v999.0.0' },
      },
      status: 400,
    });
  });

  test('an unsupported legacy header is UnsupportedProtocolVersionError listing the legacy revisions', async () => {
    const outcome = await dispatcher.handle(request('tools/list'), context({ protocolVersion: '2024-10-07' }));
    assert.deepEqual(outcome, {
      reply: {
        jsonrpc: '2.0',
        id: 1,
        error: {
          code: -32022,
          message: 'Unsupported protocol version',
          data: { supported: ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05'], requested: '2024-10-07' },
        },
      },
      status: 400,
    });
  });

  for (const method of ['logging/setLevel', 'resources/subscribe', 'prompts/list', 'unknown/method']) {
    test(`${method} is method not found (404) in 2026-07-28, with the request's id`, async () => {
      const outcome = await dispatcher.handle(modern(method, {}, 500), context({ protocolVersion: MODERN }));
      assert.deepEqual(outcome, {
        reply: { jsonrpc: '2.0', id: 500, error: { code: -32601, message: 'Method not found', data: { method } } },
        status: 404,
      });
    });
  }

  test('an envelope naming a legacy revision is served in that revision', async () => {
    const params = { _meta: { 'io.modelcontextprotocol/protocolVersion': '2025-03-26' } };
    const outcome = await dispatcher.handle(request('tools/list', params), context());
    assert.deepEqual(Object.keys(resultOf<object>(outcome)), ['tools']);
  });
});

describe('tools/list', () => {
  const dispatcher = new McpDispatcher(fakeBackend());
  const listed = async (version: string) => {
    const outcome = await dispatcher.handle(request('tools/list'), context({ protocolVersion: version }));
    return resultOf<{ tools: unknown[] }>(outcome);
  };

  test('2024-11-05 lists name, description and inputSchema only', async () => {
    assert.deepEqual(await listed('2024-11-05'), { tools: [ECHO_TOOL, PIXEL_TOOL, SLOW_TOOL] });
  });

  test('2025-03-26 adds annotations', async () => {
    assert.deepEqual(await listed('2025-03-26'), {
      tools: [{ ...ECHO_TOOL, annotations: { title: 'Echo', readOnlyHint: true } }, PIXEL_TOOL, SLOW_TOOL],
    });
  });

  for (const version of ['2025-06-18', '2025-11-25']) {
    test(`${version} adds title (falling back to annotations.title) and outputSchema`, async () => {
      assert.deepEqual(await listed(version), {
        tools: [
          { ...ECHO_TOOL, title: 'Echo', annotations: { title: 'Echo', readOnlyHint: true } },
          { ...PIXEL_TOOL, title: 'One pixel', outputSchema: { type: 'object', properties: { width: { type: 'number' } } } },
          SLOW_TOOL,
        ],
      });
    });
  }

  test('2026-07-28 adds resultType, the caching hints and the server in _meta', async () => {
    const outcome = await dispatcher.handle(modern('tools/list'), context({ protocolVersion: MODERN, caller: ECHO_ONLY }));
    assert.deepEqual(outcome, {
      reply: {
        jsonrpc: '2.0',
        id: 1,
        result: {
          resultType: 'complete',
          tools: [{ ...ECHO_TOOL, title: 'Echo', annotations: { title: 'Echo', readOnlyHint: true } }],
          ttlMs: 60000,
          cacheScope: 'private',
          _meta: SERVER_META,
        },
      },
      status: 200,
    });
  });

  test("the list is the caller's scope", async () => {
    const outcome = await dispatcher.handle(request('tools/list'), context({ caller: ECHO_ONLY }));
    assert.deepEqual(
      resultOf<{ tools: { name: string }[] }>(outcome).tools.map((t) => t.name),
      ['Echo'],
    );
  });

  test('the list is made once per scope and revision, and encodes to the same text as JSON.stringify', async () => {
    const first = await dispatcher.handle(request('tools/list', undefined, 1), context());
    const second = await dispatcher.handle(request('tools/list', undefined, 'two'), context());
    const [a, b] = [first.reply, second.reply] as { result: object }[];
    assert.equal(a!.result, b!.result);
    assert.equal(encode(second.reply as never), JSON.stringify(second.reply));
  });

  test('a cursor is invalid params: the list has one page', async () => {
    const outcome = await dispatcher.handle(request('tools/list', { cursor: 'abc' }), context());
    assert.deepEqual(outcome, {
      reply: { jsonrpc: '2.0', id: 1, error: { code: -32602, message: 'Invalid params: invalid cursor (tools/list has one page)' } },
      status: 200,
    });
  });

  test('params that are not an object are invalid params', async () => {
    const outcome = await dispatcher.handle({ jsonrpc: '2.0', id: 3, method: 'tools/list', params: [1] }, context());
    assert.deepEqual(outcome, {
      reply: { jsonrpc: '2.0', id: 3, error: { code: -32602, message: 'Invalid params: params must be an object' } },
      status: 200,
    });
  });
});

describe('tools/call', () => {
  const call = (name: string, args?: unknown, id: string | number = 1) =>
    request('tools/call', { name, ...(args === undefined ? {} : { arguments: args }) }, id);

  test('a text result is passed as MCP content, isError kept false (legacy)', async () => {
    const backend = fakeBackend();
    const outcome = await new McpDispatcher(backend).handle(call('Echo', { text: 'hi' }), context({ protocolVersion: '2025-06-18' }));
    assert.deepEqual(outcome, {
      reply: { jsonrpc: '2.0', id: 1, result: { content: [{ type: 'text', text: 'hi' }], isError: false } },
      status: 200,
    });
    assert.deepEqual(
      backend.calls.map((c) => [c.caller, c.name, c.args, c.options.requestId]),
      [[ANYONE, 'Echo', { text: 'hi' }, '1']],
    );
  });

  test('2026-07-28 adds resultType and the server in _meta', async () => {
    const outcome = await new McpDispatcher(fakeBackend()).handle(modern('tools/call', { name: 'Echo', arguments: { text: 'hi' } }), context());
    assert.deepEqual(outcome, {
      reply: {
        jsonrpc: '2.0',
        id: 1,
        result: { content: [{ type: 'text', text: 'hi' }], isError: false, resultType: 'complete', _meta: SERVER_META },
      },
      status: 200,
    });
  });

  test("an image block is converted from the Anthropic shape to MCP's {type, data, mimeType}", async () => {
    const outcome = await new McpDispatcher(fakeBackend()).handle(call('Pixel'), context());
    assert.deepEqual(resultOf<unknown>(outcome), {
      content: [
        { type: 'text', text: 'a pixel' },
        { type: 'image', data: PNG, mimeType: 'image/png' },
      ],
      isError: false,
    });
  });

  test("a tool's own failure stays a result with isError: true", async () => {
    const backend = fakeBackend({ Echo: async () => ({ content: [{ type: 'text', text: 'Bash exited with 2' }], isError: true }) });
    const outcome = await new McpDispatcher(backend).handle(call('Echo', { text: 'x' }), context());
    assert.deepEqual(outcome, {
      reply: { jsonrpc: '2.0', id: 1, result: { content: [{ type: 'text', text: 'Bash exited with 2' }], isError: true } },
      status: 200,
    });
  });

  test("the transport's request id names the call, and arguments default to {}", async () => {
    const backend = fakeBackend({ Slow: async () => ({ content: [], isError: false }) });
    await new McpDispatcher(backend).handle(call('Slow'), context({ requestId: 'req-7' }));
    assert.deepEqual([backend.calls[0]!.args, backend.calls[0]!.options.requestId], [{}, 'req-7']);
  });

  for (const version of ['2025-03-26', '2025-11-25', MODERN]) {
    test(`an unknown tool is -32602 in ${version}, with the catalog code in data`, async () => {
      const message = version === MODERN ? modern('tools/call', { name: 'Nope', arguments: {} }) : call('Nope', {});
      const outcome = await new McpDispatcher(fakeBackend()).handle(message, context({ protocolVersion: version }));
      assert.deepEqual(outcome, {
        reply: {
          jsonrpc: '2.0',
          id: 1,
          error: {
            code: -32602,
            message: 'No tool named "Nope". Available tools: Echo, Pixel, Slow.',
            data: { code: 'TOOL_NOT_FOUND', details: { tool: 'Nope' } },
          },
        },
        status: 200,
      });
    });
  }

  test("a tool outside the caller's scope is -32602, as an unknown tool: the client never saw it listed", async () => {
    const outcome = await new McpDispatcher(fakeBackend()).handle(call('Pixel', {}), context({ caller: ECHO_ONLY }));
    assert.deepEqual(outcome, {
      reply: {
        jsonrpc: '2.0',
        id: 1,
        error: {
          code: -32602,
          message: 'API key "echo-only" may not use tool "Pixel"; it may use Echo.',
          data: { code: 'FORBIDDEN', details: { tool: 'Pixel', available: ['Echo'] } },
        },
      },
      status: 200,
    });
  });

  for (const version of ['2024-11-05', '2025-03-26', '2025-06-18']) {
    test(`invalid arguments are a -32602 protocol error in ${version}`, async () => {
      const outcome = await new McpDispatcher(fakeBackend()).handle(call('Echo', {}), context({ protocolVersion: version }));
      assert.deepEqual(outcome, {
        reply: {
          jsonrpc: '2.0',
          id: 1,
          error: {
            code: -32602,
            message: 'Invalid input for tool "Echo":\n- $.text: is required',
            data: { code: 'INVALID_INPUT', details: { violations: [{ path: '$.text', message: 'is required' }] } },
          },
        },
        status: 200,
      });
    });
  }

  test('invalid arguments are a tool error result in 2025-11-25, so the model can correct itself', async () => {
    const outcome = await new McpDispatcher(fakeBackend()).handle(call('Echo', {}), context({ protocolVersion: '2025-11-25' }));
    assert.deepEqual(outcome, {
      reply: { jsonrpc: '2.0', id: 1, result: { content: [{ type: 'text', text: 'Invalid input for tool "Echo":\n- $.text: is required' }], isError: true } },
      status: 200,
    });
  });

  test('invalid arguments are a tool error result in 2026-07-28', async () => {
    const outcome = await new McpDispatcher(fakeBackend()).handle(modern('tools/call', { name: 'Echo', arguments: {} }), context());
    assert.deepEqual(resultOf<unknown>(outcome), {
      content: [{ type: 'text', text: 'Invalid input for tool "Echo":\n- $.text: is required' }],
      isError: true,
      resultType: 'complete',
      _meta: SERVER_META,
    });
  });

  for (const [what, params, message] of [
    ['no name', { arguments: {} }, 'Invalid params: name must be a string'],
    ['a name that is not a string', { name: 3 }, 'Invalid params: name must be a string'],
    ['arguments that are not an object', { name: 'Echo', arguments: ['hi'] }, 'Invalid params: arguments must be an object'],
  ] as const) {
    test(`tools/call with ${what} is invalid params, and calls nothing`, async () => {
      const backend = fakeBackend();
      const outcome = await new McpDispatcher(backend).handle(request('tools/call', params), context());
      assert.deepEqual(outcome, { reply: { jsonrpc: '2.0', id: 1, error: { code: -32602, message } }, status: 200 });
      assert.equal(backend.calls.length, 0);
    });
  }

  test("a refusal for the service's own reasons is -32603 with the catalog code in data", async () => {
    const backend = fakeBackend({ Echo: async () => errorBody('QUEUE_FULL', 'Tool "Echo" is busy; retry shortly.') });
    const outcome = await new McpDispatcher(backend).handle(call('Echo', { text: 'x' }), context());
    assert.deepEqual(outcome, {
      reply: { jsonrpc: '2.0', id: 1, error: { code: -32603, message: 'Tool "Echo" is busy; retry shortly.', data: { code: 'QUEUE_FULL' } } },
      status: 200,
    });
  });

  test("the backend's catalog picks the code, but never one of the server range 2026-07-28 reserves or calls legacy", async () => {
    const rpcCodeOf = (code: string) => ({ RATE_LIMITED: -31006, OVERLOADED: -32022, QUEUE_FULL: -32015 })[code];
    const backend = fakeBackend(
      {
        Echo: async () => errorBody('RATE_LIMITED', 'Slow down.'),
        Pixel: async () => errorBody('OVERLOADED', 'Overloaded.'),
        Busy: async () => errorBody('QUEUE_FULL', 'Busy.'),
      },
      { rpcCodeOf },
    );
    const dispatcher = new McpDispatcher(backend);
    const limited = await dispatcher.handle(call('Echo', { text: 'x' }), context());
    const overloaded = await dispatcher.handle(call('Pixel', {}), context());
    const busy = await dispatcher.handle(call('Busy', {}), context());
    assert.deepEqual((limited.reply as { error: unknown }).error, { code: -31006, message: 'Slow down.', data: { code: 'RATE_LIMITED' } });
    assert.deepEqual((overloaded.reply as { error: unknown }).error, { code: -32603, message: 'Overloaded.', data: { code: 'OVERLOADED' } });
    assert.deepEqual((busy.reply as { error: unknown }).error, { code: -32603, message: 'Busy.', data: { code: 'QUEUE_FULL' } });
  });

  test('a backend that throws is answered with an internal error, not a crash', async () => {
    const backend = fakeBackend({
      Echo: async () => {
        throw new Error('secret internals');
      },
    });
    const outcome = await new McpDispatcher(backend).handle(call('Echo', { text: 'x' }, 'e'), context());
    assert.deepEqual(outcome, { reply: { jsonrpc: '2.0', id: 'e', error: { code: -32603, message: 'Internal error' } }, status: 200 });
  });
});

/** A backend whose Slow tool waits for its signal and answers as the gateway does when aborted. */
function abortableBackend() {
  let started!: () => void;
  const running = new Promise<void>((resolve) => (started = resolve));
  const backend = fakeBackend({
    Slow: (_args, { signal }) =>
      new Promise((resolve) => {
        started();
        signal.addEventListener('abort', () => {
          const reason = signal.reason instanceof Error ? signal.reason.message : String(signal.reason);
          resolve({ content: [{ type: 'text', text: `aborted: ${reason}` }], isError: true });
        });
      }),
  });
  return { backend, running };
}

describe('cancellation', () => {
  test("notifications/cancelled aborts the call's signal, and the cancelled request gets no response", async () => {
    const { backend, running } = abortableBackend();
    const dispatcher = new McpDispatcher(backend);
    const calls = new InFlightCalls();
    const pending = dispatcher.handle(request('tools/call', { name: 'Slow' }, 'c1'), context({ calls }));
    await running;
    assert.equal(calls.size, 1);
    const cancel = { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'c1', reason: 'user pressed stop' } };
    assert.deepEqual(await dispatcher.handle(cancel, context({ calls })), { reply: undefined, status: 202 });
    const signal = backend.calls[0]!.options.signal;
    assert.equal(signal.aborted, true);
    assert.equal((signal.reason as Error).message, 'Cancelled by the client: user pressed stop');
    assert.deepEqual(await pending, { reply: undefined, status: 202 });
    assert.equal(calls.size, 0);
  });

  test('a cancellation for an unknown id, or the number for a string id, is ignored', async () => {
    const { backend, running } = abortableBackend();
    const dispatcher = new McpDispatcher(backend);
    const calls = new InFlightCalls();
    const pending = dispatcher.handle(request('tools/call', { name: 'Slow' }, '1'), context({ calls }));
    await running;
    for (const requestId of [1, 'other', null]) {
      await dispatcher.handle({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId } }, context({ calls }));
    }
    await dispatcher.handle({ jsonrpc: '2.0', method: 'notifications/cancelled' }, context({ calls }));
    assert.equal(backend.calls[0]!.options.signal.aborted, false);
    calls.cancel('1', 'done');
    await pending;
  });

  test("the transport's signal (a closed connection, shutdown) aborts the call, which still answers", async () => {
    const { backend, running } = abortableBackend();
    const shutdown = new AbortController();
    const pending = new McpDispatcher(backend).handle(
      request('tools/call', { name: 'Slow' }),
      context({ signal: shutdown.signal, calls: new InFlightCalls() }),
    );
    await running;
    shutdown.abort(new Error('shutting down'));
    assert.deepEqual(await pending, {
      reply: { jsonrpc: '2.0', id: 1, result: { content: [{ type: 'text', text: 'aborted: shutting down' }], isError: true } },
      status: 200,
    });
  });

  test('a set shared by callers: a cancellation reaches the call of its own caller only, and one that matches none here is forwarded', async () => {
    const backend = fakeBackend({
      Slow: (_args, { signal }) =>
        new Promise((resolve) => signal.addEventListener('abort', () => resolve({ content: [{ type: 'text', text: 'aborted' }], isError: true }))),
    });
    const dispatcher = new McpDispatcher(backend);
    const forwarded: unknown[] = [];
    const calls = new InFlightCalls({ forward: (cancellation) => forwarded.push(cancellation) });
    const alice = dispatcher.handle(request('tools/call', { name: 'Slow' }, 1), context({ calls: calls.of('alice') }));
    const bob = dispatcher.handle(request('tools/call', { name: 'Slow' }, 1), context({ calls: calls.of('bob') }));
    assert.equal(calls.size, 2);
    await dispatcher.handle(
      { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1, reason: 'stop' } },
      context({ calls: calls.of('bob') }),
    );
    assert.deepEqual(await bob, { reply: undefined, status: 202 });
    assert.equal(backend.calls[0]!.options.signal.aborted, false, "alice's call with the same id runs on");
    assert.deepEqual(forwarded, []);
    await dispatcher.handle(
      { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 2, reason: 'elsewhere' } },
      context({ calls: calls.of('alice') }),
    );
    assert.deepEqual(forwarded, [{ caller: 'alice', requestId: 2, reason: 'Cancelled by the client: elsewhere' }]);
    assert.equal(calls.of('alice').cancelHere(1, 'from another replica'), 'cancelled');
    assert.deepEqual(await alice, { reply: undefined, status: 202 });
    assert.equal(calls.size, 0);
  });

  test('two calls of one caller with one id: a cancellation cancels neither and says so at debug; with one left, it cancels that one', async () => {
    const debug: Array<Record<string, unknown>> = [];
    const calls = new InFlightCalls({ log: { debug: (fields: Record<string, unknown>) => debug.push(fields) } as never }).of('key-1');
    const first = calls.add(5);
    const second = calls.add(5);
    assert.equal(calls.cancel(5, 'stop'), 'several');
    assert.deepEqual([first.signal.aborted, second.signal.aborted], [false, false]);
    assert.deepEqual(debug, [{ caller: 'key-1', requestId: 5, calls: 2 }]);
    calls.delete(5, first);
    assert.equal(calls.cancel(5, 'stop'), 'cancelled');
    assert.equal(second.signal.aborted, true);
    assert.equal(calls.cancel('5', 'stop'), 'none', 'the string "5" is another id');
  });

  test("without a set of calls, the transport's signal is handed to the call as it is", async () => {
    const backend = fakeBackend();
    const connection = new AbortController();
    await new McpDispatcher(backend).handle(request('tools/call', { name: 'Echo', arguments: { text: 'x' } }), context({ signal: connection.signal }));
    assert.equal(backend.calls[0]!.options.signal, connection.signal);
  });
});

describe('progress', () => {
  const withProgress = (reports: (report: (p: { progress: number; total?: number; message?: string }) => void) => Promise<void>) =>
    fakeBackend({
      Slow: async (_args, { onProgress }) => {
        assert.ok(onProgress);
        await reports(onProgress);
        return { content: [{ type: 'text', text: 'done' }], isError: false };
      },
    });

  test("reports become notifications/progress with the request's token, before the response", async () => {
    const sent: (JsonRpcNotification | string)[] = [];
    const backend = withProgress(async (report) => {
      report({ progress: 0, total: 100 });
      await new Promise((resolve) => setTimeout(resolve, 5));
      report({ progress: 50, total: 100, message: 'half' });
      await new Promise((resolve) => setTimeout(resolve, 5));
      report({ progress: 100, total: 100 });
    });
    const dispatcher = new McpDispatcher(backend, { progressIntervalMs: 0 });
    const message = request('tools/call', { name: 'Slow', _meta: { progressToken: 'p1' } });
    const outcome = await dispatcher.handle(message, context({ notify: (n) => sent.push(n) }));
    sent.push('response');
    assert.equal(outcome.status, 200);
    assert.deepEqual(sent, [
      { jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 'p1', progress: 0, total: 100 } },
      { jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 'p1', progress: 50, total: 100, message: 'half' } },
      { jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 'p1', progress: 100, total: 100 } },
      'response',
    ]);
  });

  // That progress only grows is the gateway's rule: test/mcp/gateway-backend.test.ts.
  test('the rate is bounded: reports inside the interval wait, the newest replaces the older', async () => {
    const sent: JsonRpcNotification[] = [];
    const backend = withProgress(async (report) => {
      report({ progress: 1 });
      report({ progress: 2 });
      report({ progress: 3, message: 'three' });
    });
    const dispatcher = new McpDispatcher(backend, { progressIntervalMs: 60_000 });
    await dispatcher.handle(request('tools/call', { name: 'Slow', _meta: { progressToken: 9 } }), context({ notify: (n) => sent.push(n) }));
    assert.deepEqual(
      sent.map((n) => n.params),
      [
        { progressToken: 9, progress: 1 },
        { progressToken: 9, progress: 3, message: 'three' },
      ],
    );
  });

  test('a report after the call answered is dropped', async () => {
    const sent: JsonRpcNotification[] = [];
    let late: ((p: { progress: number }) => void) | undefined;
    const backend = withProgress(async (report) => {
      late = report;
    });
    await new McpDispatcher(backend).handle(request('tools/call', { name: 'Slow', _meta: { progressToken: 't' } }), context({ notify: (n) => sent.push(n) }));
    late!({ progress: 5 });
    assert.deepEqual(sent, []);
  });

  test('nothing is reported once the client cancelled', async () => {
    const sent: JsonRpcNotification[] = [];
    const calls = new InFlightCalls();
    const backend = withProgress(async (report) => {
      report({ progress: 1 });
      calls.cancel(1, 'stop');
      report({ progress: 2 });
    });
    const outcome = await new McpDispatcher(backend, { progressIntervalMs: 0 }).handle(
      request('tools/call', { name: 'Slow', _meta: { progressToken: 't' } }),
      context({ notify: (n) => sent.push(n), calls }),
    );
    assert.deepEqual(outcome, { reply: undefined, status: 202 });
    assert.deepEqual(
      sent.map((n) => n.params?.['progress']),
      [1],
    );
  });

  for (const [what, token, notify] of [
    ['no progressToken', undefined, true],
    ['a null progressToken', null, true],
    ['no way to send notifications', 'p', false],
  ] as const) {
    test(`a call with ${what} gets no onProgress`, async () => {
      const backend = fakeBackend();
      const params = { name: 'Echo', arguments: { text: 'x' }, ...(token === undefined ? {} : { _meta: { progressToken: token } }) };
      await new McpDispatcher(backend).handle(request('tools/call', params), context(notify ? { notify: () => {} } : {}));
      assert.equal(backend.calls[0]!.options.onProgress, undefined);
    });
  }
});

describe('progress tokens', () => {
  const TOKEN_TYPE = 'Invalid params: _meta.progressToken must be a string of at most 256 bytes or an integer from -(2^53 - 1) to 2^53 - 1';

  test('a token of 256 bytes (UTF-8) is taken and named in every notification', async () => {
    const token = 'é'.repeat(128);
    const sent: JsonRpcNotification[] = [];
    const backend = fakeBackend({
      Slow: async (_args, { onProgress }) => {
        onProgress?.({ progress: 1 });
        return { content: [{ type: 'text', text: 'ok' }], isError: false };
      },
    });
    const outcome = await new McpDispatcher(backend).handle(
      request('tools/call', { name: 'Slow', _meta: { progressToken: token } }),
      context({ notify: (n) => sent.push(n) }),
    );
    assert.equal(outcome.status, 200);
    assert.deepEqual(
      sent.map((n) => n.params?.['progressToken']),
      [token],
    );
  });

  for (const [what, token, message] of [
    ['a string of 257 bytes', 'x'.repeat(257), 'Invalid params: _meta.progressToken is a string of 257 bytes; at most 256 are taken'],
    ['a string of 900,000 bytes', 't'.repeat(900_000), 'Invalid params: _meta.progressToken is a string of 900000 bytes; at most 256 are taken'],
    ['a string of 129 two-byte characters', 'é'.repeat(129), 'Invalid params: _meta.progressToken is a string of 258 bytes; at most 256 are taken'],
    ['a number with a fraction', 1.5, TOKEN_TYPE],
    ['an integer past 2^53 - 1', 2 ** 53, TOKEN_TYPE],
    ['a huge number', 1e300, TOKEN_TYPE],
    ['an object', { a: 1 }, TOKEN_TYPE],
    ['a boolean', true, TOKEN_TYPE],
  ] as const) {
    test(`a progress token that is ${what} is refused with -32602, the tool never runs, and the refusal is audited`, async () => {
      const backend = fakeBackend();
      const heard: string[] = [];
      backend.refused = (_caller, name, why, _requestId, kind) => void heard.push(`${kind} ${name} ${why}`);
      const sent: JsonRpcNotification[] = [];
      const calls = new InFlightCalls();
      const outcome = await new McpDispatcher(backend).handle(
        request('tools/call', { name: 'Echo', arguments: { text: 'x' }, _meta: { progressToken: token } }, 7),
        context({ notify: (n) => sent.push(n), calls }),
      );
      assert.deepEqual(outcome, { reply: { jsonrpc: '2.0', id: 7, error: { code: -32602, message } }, status: 200 });
      assert.equal(backend.calls.length, 0);
      assert.deepEqual(heard, [`params Echo ${message}`]);
      assert.deepEqual(sent, []);
      assert.equal(calls.size, 0);
    });
  }

  test('the same refusal in the stateless revision, and without a way to send notifications', async () => {
    const dispatcher = new McpDispatcher(fakeBackend());
    const message = 'Invalid params: _meta.progressToken is a string of 300 bytes; at most 256 are taken';
    const big = { name: 'Echo', arguments: { text: 'x' }, _meta: { progressToken: 'y'.repeat(300) } };
    assert.deepEqual(await dispatcher.handle(modern('tools/call', big), context({ protocolVersion: MODERN })), {
      reply: { jsonrpc: '2.0', id: 1, error: { code: -32602, message } },
      status: 200,
    });
    assert.deepEqual(await dispatcher.handle(request('tools/call', big), context()), {
      reply: { jsonrpc: '2.0', id: 1, error: { code: -32602, message } },
      status: 200,
    });
  });
});

describe('malformed messages', () => {
  const dispatcher = new McpDispatcher(fakeBackend());

  test('text that is not JSON is a parse error with a null id (400)', async () => {
    assert.deepEqual(await dispatcher.handleText('{"jsonrpc": "2.0", "id": 1,', context()), {
      reply: { jsonrpc: '2.0', error: { code: -32700, message: 'Parse error: the message is not valid JSON' } },
      status: 400,
    });
  });

  for (const text of [
    '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"Echo","arguments":{"__proto__":{"x":1}}}}',
    '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"Echo","arguments":{"constructor":{"prototype":{"x":1}}}}}',
    '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"Echo","arguments":{"\\u005f_proto__":{}}}}',
  ]) {
    test(`a message holding a prototype-polluting key is refused as REST refuses it: ${text.slice(60, 100)}`, async () => {
      const outcome = await dispatcher.handleText(text, context());
      assert.deepEqual(outcome, {
        reply: { jsonrpc: '2.0', error: { code: -32700, message: 'Parse error: the message holds a __proto__ or constructor.prototype key' } },
        status: 400,
      });
    });
  }

  test('a harmless "__proto__" string value is not refused', async () => {
    const text = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"Echo","arguments":{"text":"\\"__proto__\\": is a key"}}}';
    const outcome = await dispatcher.handleText(text, context());
    assert.equal(outcome.status, 200);
  });

  for (const [what, message, id, reason] of [
    ['a number', 42, null, 'the message is not a JSON object'],
    ['null', null, null, 'the message is not a JSON object'],
    ['no jsonrpc', { id: 1, method: 'ping' }, 1, 'jsonrpc must be "2.0"'],
    ['jsonrpc 1.0', { jsonrpc: '1.0', id: 'a', method: 'ping' }, 'a', 'jsonrpc must be "2.0"'],
    ['no method', { jsonrpc: '2.0', id: 2 }, 2, 'method must be a string'],
    ['a method that is not a string', { jsonrpc: '2.0', id: 2, method: 5 }, 2, 'method must be a string'],
    ['a null id', { jsonrpc: '2.0', id: null, method: 'ping' }, null, 'id must be a string or a number'],
    ['an object id', { jsonrpc: '2.0', id: {}, method: 'ping' }, null, 'id must be a string or a number'],
  ] as const) {
    test(`a message with ${what} is an invalid request (400)`, async () => {
      assert.deepEqual(await dispatcher.handle(message, context()), {
        reply: { jsonrpc: '2.0', ...(id === null ? {} : { id }), error: { code: -32600, message: `Invalid Request: ${reason}` } },
        status: 400,
      });
    });
  }

  test('a response from the client (this server sends no requests) is dropped', async () => {
    assert.deepEqual(await dispatcher.handle({ jsonrpc: '2.0', id: 1, result: {} }, context()), { reply: undefined, status: 202 });
  });

  test('an unknown method is -32601 in a 200 for the legacy revisions', async () => {
    assert.deepEqual(await dispatcher.handle(request('resources/list'), context()), {
      reply: { jsonrpc: '2.0', id: 1, error: { code: -32601, message: 'Method not found', data: { method: 'resources/list' } } },
      status: 200,
    });
  });

  test('any JSON value is answered without a throw, with a response or nothing', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.jsonValue(),
          fc.record({
            jsonrpc: fc.constant('2.0'),
            id: fc.oneof(fc.integer(), fc.string()),
            method: fc.constantFrom('tools/call', 'tools/list', 'initialize', 'server/discover', 'ping'),
            params: fc.jsonValue(),
          }),
          fc.array(fc.record({ jsonrpc: fc.constant('2.0'), id: fc.integer(), method: fc.constantFrom('tools/call', 'ping'), params: fc.jsonValue() })),
        ),
        fc.constantFrom(undefined, '2025-03-26', '2025-11-25', MODERN),
        async (message, protocolVersion) => {
          const outcome = await dispatcher.handle(message, context(protocolVersion ? { protocolVersion } : {}));
          assert.ok([200, 202, 400, 404].includes(outcome.status));
          for (const reply of [outcome.reply ?? []].flat()) {
            assert.equal(reply.jsonrpc, '2.0');
            assert.ok('result' in reply || 'error' in reply);
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('batches', () => {
  const dispatcher = new McpDispatcher(fakeBackend(), { maxBatch: 3 });

  test('2025-03-26 (or no declared revision) answers a batch with the array of responses, notifications left out', async () => {
    const batch = [
      request('ping', undefined, 1),
      { jsonrpc: '2.0', method: 'notifications/initialized' },
      request('tools/call', { name: 'Echo', arguments: { text: 'b' } }, 2),
    ];
    for (const declared of [{}, { protocolVersion: '2025-03-26' }]) {
      assert.deepEqual(await dispatcher.handle(batch, context(declared)), {
        reply: [
          { jsonrpc: '2.0', id: 1, result: {} },
          { jsonrpc: '2.0', id: 2, result: { content: [{ type: 'text', text: 'b' }], isError: false } },
        ],
        status: 200,
      });
    }
  });

  test('a batch of notifications only gets no reply (202)', async () => {
    const batch = [{ jsonrpc: '2.0', method: 'notifications/initialized' }];
    assert.deepEqual(await dispatcher.handle(batch, context()), { reply: undefined, status: 202 });
  });

  test('an invalid element is answered in its place; initialize and stateless-revision requests must not be batched', async () => {
    const batch = [42, request('initialize', { protocolVersion: '2025-03-26' }, 'i'), modern('tools/list', {}, 'm')];
    assert.deepEqual(await dispatcher.handle(batch, context()), {
      reply: [
        { jsonrpc: '2.0', error: { code: -32600, message: 'Invalid Request: the message is not a JSON object' } },
        { jsonrpc: '2.0', id: 'i', error: { code: -32600, message: 'Invalid Request: initialize must not be part of a batch' } },
        { jsonrpc: '2.0', id: 'm', error: { code: -32600, message: 'Invalid Request: a request of protocol version 2026-07-28 must not be part of a batch' } },
      ],
      status: 200,
    });
  });

  for (const version of ['2025-06-18', '2025-11-25', MODERN]) {
    test(`${version} refuses batches whole with invalid request (400)`, async () => {
      assert.deepEqual(await dispatcher.handle([request('ping')], context({ protocolVersion: version })), {
        reply: {
          jsonrpc: '2.0',
          error: { code: -32600, message: `Invalid Request: protocol version ${version} does not allow batches (only 2025-03-26 did)` },
        },
        status: 400,
      });
    });
  }

  test('an empty batch and a batch over the limit are invalid requests (400)', async () => {
    assert.deepEqual(await dispatcher.handle([], context()), {
      reply: { jsonrpc: '2.0', error: { code: -32600, message: 'Invalid Request: the batch is empty' } },
      status: 400,
    });
    const big = [1, 2, 3, 4].map((id) => request('ping', undefined, id));
    assert.deepEqual(await dispatcher.handle(big, context()), {
      reply: { jsonrpc: '2.0', error: { code: -32600, message: 'Invalid Request: the batch holds 4 messages; at most 3 are taken' } },
      status: 400,
    });
  });

  test('a batch encodes as a JSON array of the responses', async () => {
    const outcome = await dispatcher.handle([request('tools/list')], context());
    const replies = outcome.reply as object[];
    assert.equal(`[${replies.map((r) => encode(r as never)).join(',')}]`, JSON.stringify(replies));
  });
});

describe('batch concurrency', () => {
  /** A backend whose Slow calls wait for the test, counting how many run at once. */
  function heldCalls() {
    const started: Array<{ id: unknown; release: () => void }> = [];
    let running = 0;
    let most = 0;
    let wake: (() => void) | undefined;
    const backend = fakeBackend({
      Slow: (args) =>
        new Promise((resolve) => {
          running += 1;
          most = Math.max(most, running);
          started.push({
            id: args['n'],
            release: () => {
              running -= 1;
              resolve({ content: [{ type: 'text', text: `done ${String(args['n'])}` }], isError: false });
            },
          });
          wake?.();
        }),
    });
    /** Resolves once `n` calls have started. */
    const startedCount = (n: number): Promise<void> =>
      started.length >= n ? Promise.resolve() : new Promise((resolve) => (wake = () => started.length >= n && resolve()));
    return { backend, started, startedCount, most: () => most };
  }

  const turns = async (n: number): Promise<void> => {
    for (let i = 0; i < n; i++) await new Promise((resolve) => setImmediate(resolve));
  };

  test("the calls of a batch of 64 run at most 8 at once, start in the batch's order, and are answered in it", async () => {
    const { backend, started, startedCount, most } = heldCalls();
    const batch = Array.from({ length: 64 }, (_, n) => request('tools/call', { name: 'Slow', arguments: { n } }, n));
    const answered = new McpDispatcher(backend).handle(batch, context());
    await startedCount(8);
    await turns(20);
    assert.equal(started.length, 8, 'a ninth call started while eight were running');
    // Release the calls one at a time: each release lets exactly one more start.
    for (let released = 0; released < 64; released++) {
      await startedCount(Math.min(64, released + 8));
      await turns(2);
      assert.ok(started.length - released <= 8, `${started.length} calls started while ${released} were released`);
      started[released]!.release();
    }
    const outcome = await answered;
    assert.equal(most(), 8);
    assert.deepEqual(
      (outcome.reply as unknown as Array<{ id: number; result: { content: Array<{ text: string }> } }>).map((r) => [r.id, r.result.content[0]!.text]),
      batch.map((_, n) => [n, `done ${n}`]),
    );
    assert.deepEqual(
      backend.calls.map((c) => c.args['n']),
      batch.map((_, n) => n),
    );
  });

  test('maxBatchConcurrency sets the cap', async () => {
    const { backend, started, startedCount, most } = heldCalls();
    const batch = Array.from({ length: 5 }, (_, n) => request('tools/call', { name: 'Slow', arguments: { n } }, n));
    const answered = new McpDispatcher(backend, { maxBatchConcurrency: 2 }).handle(batch, context());
    await startedCount(2);
    await turns(20);
    assert.equal(started.length, 2);
    for (let i = 0; i < 5; i++) {
      await startedCount(i + 1);
      started[i]!.release();
    }
    await answered;
    assert.equal(most(), 2);
  });
});
