import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { describe, test } from 'node:test';
import { pino } from 'pino';
import { errorBody, ToolportError, type ErrorBody, type ErrorCode } from '#src/core/errors.js';
import { formatTools } from '#src/core/formats.js';
import { addressGroup, admissionName, ANYONE, Gateway, type Caller, type CallRequest, type GatewayObserver } from '#src/core/gateway.js';
import { ToolRegistry } from '#src/core/registry.js';
import { textResult } from '#src/core/result.js';
import type { Progress, ToolContext, ToolDef } from '#src/core/types.js';
import { Echo } from '#src/tools/echo.js';
import { gatedTool } from '../fixtures/gated-tool.js';
import { controllableTool, NoArgs } from '../fixtures/tools.js';

const SCOPED: Caller = { label: 'ci-bot', scope: new Set(['Echo']), ip: '203.0.113.9' };
const FULL: Caller = { label: 'key-1', scope: undefined, ip: '203.0.113.10' };

/** What the observer heard, in order. */
type Heard = ['finished', string, string, string | undefined] | ['refused', ErrorCode, string];

function gatewayWith(tools: ToolDef[], options: { maxConcurrency?: number; queueSize?: number; scopes?: ReadonlySet<string>[] } = {}) {
  const registry = new ToolRegistry();
  for (const tool of tools) registry.register(tool);
  let text = '';
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      text += chunk.toString();
      callback();
    },
  });
  const heard: Heard[] = [];
  const observer: GatewayObserver = {
    loadChanged: () => {},
    callFinished: (tool, outcome, _seconds, transport) => heard.push(['finished', tool, outcome, transport]),
    callRefused: (code, transport) => heard.push(['refused', code, transport]),
  };
  const gateway = new Gateway({ registry, logger: pino({ level: 'info' }, stream), observer, ...options });
  const lines = () =>
    text
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as Record<string, unknown>);
  return { gateway, heard, lines };
}

function request(tool: string, input: unknown, extra: Partial<CallRequest> = {}): CallRequest {
  return { caller: FULL, tool, input, requestId: 'req-1', transport: 'mcp', ...extra };
}

/** The fields of a refused-call audit line that every transport must write alike. */
function refusedLine(line: Record<string, unknown> | undefined) {
  const { msg, reqId, tool, key, ip, transport, status, code } = line ?? {};
  return { msg, reqId, tool, key, ip, transport, status, code };
}

describe('Gateway: refusals', () => {
  const cases: Array<{
    name: string;
    code: ErrorCode;
    status: number;
    message: string;
    caller?: Caller;
    tool?: string;
    input?: unknown;
    prepare?: (gateway: Gateway) => void;
  }> = [
    {
      name: "a tool outside the caller's scope is FORBIDDEN, with the same text as REST has always given",
      code: 'FORBIDDEN',
      status: 403,
      message: 'API key "ci-bot" may not use tool "NoArgs"; it may use Echo.',
      caller: SCOPED,
      tool: 'NoArgs',
    },
    {
      name: 'a scoped caller gets FORBIDDEN for a tool that does not exist, so it cannot probe beyond its scope',
      code: 'FORBIDDEN',
      status: 403,
      message: 'API key "ci-bot" may not use tool "Absent"; it may use Echo.',
      caller: SCOPED,
      tool: 'Absent',
    },
    {
      name: 'an unknown tool is TOOL_NOT_FOUND',
      code: 'TOOL_NOT_FOUND',
      status: 404,
      message: 'Tool "Nope" not found. Available tools: Echo, NoArgs.',
      tool: 'Nope',
    },
    {
      name: 'input that fails the schema is INVALID_INPUT',
      code: 'INVALID_INPUT',
      status: 400,
      message: 'Invalid input for tool "Echo":\n- $.text: must be string',
      input: { text: 1 },
    },
    {
      name: 'a call once draining is SHUTTING_DOWN',
      code: 'SHUTTING_DOWN',
      status: 503,
      message: 'The server is shutting down; retry on another instance.',
      prepare: (gateway) => gateway.drain(),
    },
  ];

  for (const c of cases) {
    test(`${c.name}: thrown once, logged once as refused with the transport, counted with the transport`, async () => {
      const { gateway, heard, lines } = gatewayWith([Echo, NoArgs]);
      c.prepare?.(gateway);
      const caller = c.caller ?? FULL;
      await assert.rejects(gateway.call(request(c.tool ?? 'Echo', c.input ?? { text: 'hi' }, { caller })), (err: unknown) => {
        assert.ok(err instanceof ToolportError);
        assert.deepEqual({ code: err.code, status: err.statusCode, message: err.message }, { code: c.code, status: c.status, message: c.message });
        return true;
      });
      assert.equal(lines().length, 1, JSON.stringify(lines()));
      assert.deepEqual(refusedLine(lines()[0]), {
        msg: 'tool call refused',
        reqId: 'req-1',
        tool: c.tool ?? 'Echo',
        key: caller.label,
        ip: caller.ip,
        transport: 'mcp',
        status: c.status,
        code: c.code,
      });
      assert.deepEqual(heard, [['refused', c.code, 'mcp']]);
    });

    test(`${c.name}: callSafe answers the error body instead of throwing`, async () => {
      const { gateway, heard, lines } = gatewayWith([Echo, NoArgs]);
      c.prepare?.(gateway);
      const result = await gateway.callSafe(request(c.tool ?? 'Echo', c.input ?? { text: 'hi' }, { caller: c.caller ?? FULL }));
      const { code, message } = (result as ErrorBody).error;
      assert.deepEqual({ content: result.content, isError: result.isError, error: { code, message } }, errorBody(c.code, c.message));
      assert.equal(lines().filter((l) => l.msg === 'tool call refused').length, 1);
      assert.deepEqual(heard, [['refused', c.code, 'mcp']]);
    });
  }

  test('a full queue is QUEUE_FULL, carrying a retry delay but no headers; logged and counted once', async () => {
    const gated = gatedTool('Busy', { maxConcurrency: 1 });
    const { gateway, heard, lines } = gatewayWith([gated.tool], { queueSize: 0 });
    const first = gateway.call(request('Busy', {}, { requestId: 'first' }));
    await gated.started(1);
    const message = 'Tool "Busy" is busy: 1 call running and 0 waiting; retry later.';
    await assert.rejects(gateway.call(request('Busy', {}, { requestId: 'second' })), (err: unknown) => {
      assert.ok(err instanceof ToolportError);
      assert.deepEqual(
        { code: err.code, retryAfterSeconds: err.retryAfterSeconds, headers: 'headers' in err },
        { code: 'QUEUE_FULL', retryAfterSeconds: 1, headers: false },
      );
      return true;
    });
    const safe = await gateway.callSafe(request('Busy', {}, { requestId: 'third' }));
    assert.deepEqual(
      { isError: safe.isError, text: safe.content[0], code: (safe as { error?: { code: string } }).error?.code },
      {
        isError: true,
        text: { type: 'text', text: message },
        code: 'QUEUE_FULL',
      },
    );
    gated.runs[0]?.release();
    await first;
    const refused = lines().filter((l) => l.msg === 'tool call refused');
    assert.deepEqual(
      refused.map((l) => [l.reqId, l.code, l.status, l.transport]),
      [
        ['second', 'QUEUE_FULL', 503, 'mcp'],
        ['third', 'QUEUE_FULL', 503, 'mcp'],
      ],
    );
    assert.deepEqual(heard, [
      ['refused', 'QUEUE_FULL', 'mcp'],
      ['refused', 'QUEUE_FULL', 'mcp'],
      ['finished', 'Busy', 'ok', 'mcp'],
    ]);
  });

  test('callSafe answers an unexpected failure as INTERNAL_ERROR with the request id, logged and counted as refused', async (t) => {
    const { gateway, heard, lines } = gatewayWith([Echo]);
    t.mock.method(gateway.executor, 'call', async () => {
      throw new Error('a bug in the pipeline');
    });
    const result = await gateway.callSafe(request('Echo', { text: 'a' }, { requestId: 'r-5' }));
    assert.deepEqual(result, errorBody('INTERNAL_ERROR', 'Internal server error (request id r-5).'));
    assert.doesNotMatch(JSON.stringify(result), /a bug/);
    assert.deepEqual(
      lines().map((l) => [l.msg, l.code]),
      [
        ['unexpected error', undefined],
        ['tool call refused', 'INTERNAL_ERROR'],
      ],
    );
    assert.deepEqual(heard, [['refused', 'INTERNAL_ERROR', 'mcp']]);
  });

  test('refused() gives a refusal an adapter made itself the same audit line and metric', () => {
    const { gateway, heard, lines } = gatewayWith([Echo]);
    gateway.refused(
      { caller: { scope: undefined, ip: '198.51.100.7' }, tool: 'Echo', requestId: 'r-9', transport: 'rest' },
      new ToolportError('UNAUTHORIZED', 'The API key is not valid.'),
    );
    assert.deepEqual(refusedLine(lines()[0]), {
      msg: 'tool call refused',
      reqId: 'r-9',
      tool: 'Echo',
      key: undefined,
      ip: '198.51.100.7',
      transport: 'rest',
      status: 401,
      code: 'UNAUTHORIZED',
    });
    assert.deepEqual(heard, [['refused', 'UNAUTHORIZED', 'rest']]);
  });
});

describe('Gateway: calls that run', () => {
  test('a call that ran logs one audit line with the key label and transport, and is counted with the transport', async () => {
    const { gateway, heard, lines } = gatewayWith([Echo]);
    const result = await gateway.call(request('Echo', { text: 'my-secret-value' }, { caller: SCOPED, requestId: 'r-1', inputBytes: 27 }));
    assert.deepEqual(result, { content: [{ type: 'text', text: 'my-secret-value' }], isError: false });
    assert.equal(lines().length, 1);
    const [line] = lines();
    assert.deepEqual(
      {
        msg: line?.msg,
        reqId: line?.reqId,
        tool: line?.tool,
        key: line?.key,
        transport: line?.transport,
        outcome: line?.outcome,
        inputBytes: line?.inputBytes,
      },
      { msg: 'tool call', reqId: 'r-1', tool: 'Echo', key: 'ci-bot', transport: 'mcp', outcome: 'ok', inputBytes: 27 },
    );
    assert.doesNotMatch(JSON.stringify(lines()), /my-secret-value/);
    assert.deepEqual(heard, [['finished', 'Echo', 'ok', 'mcp']]);
  });

  test('callSafe answers a call that ran exactly as call does', async () => {
    const { gateway } = gatewayWith([Echo]);
    assert.deepEqual(await gateway.callSafe(request('Echo', { text: 'a' })), { content: [{ type: 'text', text: 'a' }], isError: false });
  });

  test('cancel aborts a call in flight through its signal; the call answers as aborted', async () => {
    const slow = controllableTool();
    const { gateway } = gatewayWith([slow.tool]);
    const call = request('Slow', {});
    const pending = gateway.call(call);
    await slow.started;
    assert.equal(gateway.inFlight, 1);
    gateway.cancel(call, new Error('the client disconnected'));
    assert.match(String(await slow.aborted), /the client disconnected/);
    assert.deepEqual(await pending, { content: [{ type: 'text', text: 'Tool "Slow" was aborted: the client disconnected.' }], isError: true });
    assert.equal(gateway.inFlight, 0);
    gateway.cancel(call, new Error('late'));
  });

  test("the caller's signal aborts the call", async () => {
    const slow = controllableTool();
    const { gateway } = gatewayWith([slow.tool]);
    const controller = new AbortController();
    const pending = gateway.call(request('Slow', {}, { signal: controller.signal }));
    await slow.started;
    controller.abort(new Error('cancelled by the client'));
    assert.match(String(await slow.aborted), /cancelled by the client/);
    assert.equal((await pending).isError, true);
  });

  test('drain refuses new calls, drained waits for the ones in flight, abortAll ends them', async () => {
    const slow = controllableTool();
    const { gateway } = gatewayWith([slow.tool, Echo]);
    const pending = gateway.call(request('Slow', {}));
    await slow.started;
    gateway.drain();
    assert.equal(gateway.draining, true);
    await assert.rejects(gateway.call(request('Echo', { text: 'late' })), { code: 'SHUTTING_DOWN' });
    assert.equal(await gateway.drained(10), false);
    gateway.abortAll(new Error('the server is shutting down'));
    assert.match(String(await slow.aborted), /shutting down/);
    await pending;
    assert.equal(await gateway.drained(1000), true);
  });

  test('a tool reports progress to a caller that listens; without a listener its context has no progress', async () => {
    const contexts: ToolContext[] = [];
    const reporter: ToolDef = {
      name: 'Reporter',
      description: 'Reports progress.',
      inputSchema: { type: 'object' },
      execute: (_input, context) => {
        contexts.push(context);
        context.progress?.('started');
        context.progress?.({ progress: 5, total: 10 });
        context.progress?.({ progress: 4, message: 'going backwards is dropped' });
        context.progress?.('more');
        return textResult('done');
      },
    };
    const { gateway } = gatewayWith([reporter]);
    const heard: Progress[] = [];
    await gateway.call(request('Reporter', {}, { onProgress: (p) => heard.push(p) }));
    assert.deepEqual(heard, [
      { progress: 1, message: 'started' },
      { progress: 5, total: 10 },
      { progress: 6, message: 'more' },
    ]);
    contexts[0]?.progress?.('after the answer');
    assert.equal(heard.length, 3, 'reports after the call answered are dropped');
    await gateway.call(request('Reporter', {}));
    assert.equal(contexts[1]?.progress, undefined);
    const failing = await gateway.call(
      request(
        'Reporter',
        {},
        {
          onProgress: () => {
            throw new Error('the connection closed');
          },
        },
      ),
    );
    assert.deepEqual(failing, { content: [{ type: 'text', text: 'done' }], isError: false }, 'a listener that throws does not reach the tool');
  });
});

describe('Gateway: lists', () => {
  test('list answers the tools the caller may see as JSON text, the same string every time', () => {
    const scope = new Set(['NoArgs']);
    const { gateway } = gatewayWith([Echo, NoArgs], { scopes: [scope] });
    const scoped: Caller = { label: 'ci', scope };
    for (const format of ['anthropic', 'openai', 'mcp'] as const) {
      assert.deepEqual(JSON.parse(gateway.list(FULL, format)), formatTools([Echo, NoArgs], format), format);
      assert.deepEqual(JSON.parse(gateway.list(scoped, format)), formatTools([NoArgs], format), format);
      assert.equal(gateway.list(scoped, format), gateway.list(scoped, format));
    }
    assert.equal(gateway.list(ANYONE), gateway.list(FULL, 'anthropic'));
  });

  test("tools answers the caller's tools in registration order, the same array each time", () => {
    const scope = new Set(['NoArgs']);
    const { gateway } = gatewayWith([Echo, NoArgs], { scopes: [scope] });
    const scoped: Caller = { label: 'ci', scope };
    assert.deepEqual(gateway.tools(scoped), [NoArgs]);
    assert.equal(gateway.tools(scoped), gateway.tools({ label: 'other', scope }));
    assert.deepEqual(gateway.tools(FULL), [Echo, NoArgs]);
  });

  test('describe answers one tool, FORBIDDEN outside the scope and TOOL_NOT_FOUND for no such tool', () => {
    const { gateway } = gatewayWith([Echo, NoArgs]);
    assert.deepEqual(gateway.describe(SCOPED, 'Echo', 'openai'), formatTools([Echo], 'openai')[0]);
    assert.throws(() => gateway.describe(SCOPED, 'NoArgs'), { code: 'FORBIDDEN' });
    assert.throws(() => gateway.describe(FULL, 'Nope'), { code: 'TOOL_NOT_FOUND' });
  });
});

describe('Gateway: a workspace per caller', () => {
  const where = (text: string): ToolDef => ({ ...Echo, name: 'Where', execute: () => textResult(text) });
  const withToolsets = (tools: ToolDef[], toolsets: Record<string, ToolDef[]>, options: { queueSize?: number } = {}) => {
    const registry = (list: ToolDef[]) => list.reduce((r, tool) => r.register(tool), new ToolRegistry());
    const heard: Heard[] = [];
    const observer: GatewayObserver = {
      loadChanged: () => {},
      callFinished: (tool, outcome, _seconds, transport) => heard.push(['finished', tool, outcome, transport]),
      callRefused: (code, transport) => heard.push(['refused', code, transport]),
    };
    const map = new Map(Object.entries(toolsets).map(([name, list]) => [name, registry(list)]));
    return { gateway: new Gateway({ registry: registry(tools), toolsets: map, observer, ...options }), heard };
  };

  test('a caller with a workspace runs the tools bound to it, and is counted like any other', async () => {
    const { gateway, heard } = withToolsets([where('server')], { '/srv/ws/a': [where('a')] });
    assert.deepEqual(await gateway.call(request('Where', { text: '?' })), { ...textResult('server'), isError: false });
    assert.deepEqual(await gateway.call(request('Where', { text: '?' }, { caller: { ...FULL, workspace: '/srv/ws/a' } })), {
      ...textResult('a'),
      isError: false,
    });
    assert.deepEqual(heard, [
      ['finished', 'Where', 'ok', 'mcp'],
      ['finished', 'Where', 'ok', 'mcp'],
    ]);
  });

  test('the slots and queue of a tool are shared by every workspace', async () => {
    const inA = gatedTool('Busy', { maxConcurrency: 1 });
    const onServer = gatedTool('Busy', { maxConcurrency: 1 });
    const { gateway } = withToolsets([onServer.tool], { '/srv/ws/a': [inA.tool] }, { queueSize: 0 });
    const first = gateway.call(request('Busy', {}, { caller: { ...FULL, workspace: '/srv/ws/a' } }));
    await inA.started(1);
    await assert.rejects(gateway.call(request('Busy', {})), { code: 'QUEUE_FULL' });
    inA.runs[0]!.release();
    assert.equal((await first).isError, false);
    assert.equal(onServer.runs.length, 0);
  });

  test("a toolset whose tools are not the registry's is refused when the gateway is made", () => {
    assert.throws(() => withToolsets([where('server'), Echo], { '/srv/ws/a': [where('a')] }), {
      message: 'The tools of workspace "/srv/ws/a" (Where) are not the server\'s (Where, Echo).',
    });
  });

  test("a source's tool (an upstream's) works in no workspace: a caller with one runs it from the server's registry", async () => {
    const { gateway } = withToolsets([where('server')], { '/srv/ws/a': [where('a')] });
    gateway.registry.replaceSource('up', [{ ...Echo, name: 'up__echo', execute: () => textResult('upstream') }]);
    const caller = { ...FULL, workspace: '/srv/ws/a' };
    assert.deepEqual(await gateway.call(request('up__echo', { text: '?' }, { caller })), { ...textResult('upstream'), isError: false });
    assert.deepEqual(await gateway.call(request('Where', { text: '?' }, { caller })), { ...textResult('a'), isError: false });
  });

  test('a caller naming a workspace without tools gets INTERNAL_ERROR, counted as refused', async () => {
    const { gateway, heard } = withToolsets([where('server')], {});
    const body = await gateway.callSafe(request('Where', { text: '?' }, { caller: { ...FULL, workspace: '/srv/ws/unknown' } }));
    assert.deepEqual(body, errorBody('INTERNAL_ERROR', 'Internal server error (request id req-1).'));
    assert.deepEqual(heard, [['refused', 'INTERNAL_ERROR', 'mcp']]);
    assert.equal(gateway.inFlight, 0);
  });
});

test('addressGroup: every loopback address is one caller, an IPv6 address its /64, an IPv4 address itself', () => {
  const cases: Array<[string, string]> = [
    ['127.0.0.1', 'loopback'],
    ['127.0.0.9', 'loopback'],
    ['::1', 'loopback'],
    ['::ffff:127.0.0.2', 'loopback'],
    ['10.0.0.7', '10.0.0.7'],
    ['::ffff:10.0.0.7', '10.0.0.7'],
    ['2001:db8:1:2:aaaa::1', '2001:db8:1:2::/64'],
    ['2001:0db8:0001:0002:ffff:ffff:ffff:ffff', '2001:db8:1:2::/64'],
    ['2001:db8::1', '2001:db8:0:0::/64'],
    ['fe80::1:2:3:4', 'fe80:0:0:0::/64'],
  ];
  for (const [ip, group] of cases) assert.equal(addressGroup(ip), group, ip);
  assert.equal(admissionName({ scope: undefined, label: 'ci', ip: '127.0.0.1' }), 'ci', 'a key names the caller, whatever its address');
  assert.equal(admissionName({ scope: undefined }), undefined);
});
