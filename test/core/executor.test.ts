import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { describe, mock, test } from 'node:test';
import { pino } from 'pino';
import { ToolportError } from '#src/core/errors.js';
import { DEFAULT_TOOL_TIMEOUT_MS, STOPPING_GRACE_MS, ToolExecutor, type CallObserver } from '#src/core/executor.js';
import { ToolRegistry } from '#src/core/registry.js';
import { textResult } from '#src/core/result.js';
import type { ObjectSchema, ToolContext, ToolDef } from '#src/core/types.js';
import { gatedTool, type GatedRun } from '../fixtures/gated-tool.js';

/** A plain tool with a permissive schema unless one is given. */
function tool(name: string, execute: ToolDef['execute'], extra: Partial<ToolDef> = {}): ToolDef {
  return { name, description: `The ${name} tool.`, inputSchema: { type: 'object' }, execute, ...extra };
}

function executorWith(...tools: ToolDef[]): ToolExecutor {
  const registry = new ToolRegistry();
  for (const t of tools) registry.register(t);
  return new ToolExecutor({ registry });
}

/** A pino logger whose JSON lines are collected in memory. */
function capturedLogger(): { logger: pino.Logger; lines: () => Record<string, unknown>[]; raw: () => string } {
  let text = '';
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      text += chunk.toString();
      callback();
    },
  });
  return {
    logger: pino({ level: 'info' }, stream),
    raw: () => text,
    lines: () =>
      text
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => JSON.parse(line) as Record<string, unknown>),
  };
}

/** A tool that never settles by itself; it records its context and resolves only when aborted, if asked. */
function hangingTool(name: string, seen: { context?: ToolContext }, extra: Partial<ToolDef> = {}): ToolDef {
  return tool(
    name,
    (_input, context) => {
      seen.context = context;
      return new Promise(() => {});
    },
    extra,
  );
}

const echoSchema: ObjectSchema = {
  type: 'object',
  properties: { text: { type: 'string' } },
  required: ['text'],
  additionalProperties: false,
};
const echo = tool('Echo', (input) => textResult(String(input.text)), { inputSchema: echoSchema });

/** Asserts that a promise rejects with a ToolportError of this code and exact message. */
async function assertRejectsWith(promise: Promise<unknown>, code: string, message: string, details?: unknown): Promise<void> {
  await assert.rejects(promise, (err: unknown) => {
    assert.ok(err instanceof ToolportError, `expected ToolportError, got ${String(err)}`);
    assert.equal(err.code, code);
    assert.equal(err.message, message);
    if (details !== undefined) assert.deepEqual(err.details, details);
    return true;
  });
}

describe('ToolExecutor: lookup and input checks', () => {
  test('an unknown tool fails with TOOL_NOT_FOUND listing the available tools', async () => {
    const executor = executorWith(
      echo,
      tool('Other', () => textResult('')),
    );
    await assertRejectsWith(executor.call('Nope', {}), 'TOOL_NOT_FOUND', 'Tool "Nope" not found. Available tools: Echo, Other.', {
      tool: 'Nope',
      available: ['Echo', 'Other'],
    });
    await assert.rejects(executor.call('Nope', {}), { statusCode: 404 });
  });

  test('an unknown tool in an empty registry says there are none', async () => {
    await assertRejectsWith(executorWith().call('Nope', {}), 'TOOL_NOT_FOUND', 'Tool "Nope" not found. Available tools: (none).');
  });

  for (const [input, got] of [
    [[], 'an array'],
    [null, 'null'],
    ['{"text":"hi"}', 'a string'],
    [5, 'a number'],
  ] as const) {
    test(`input that is ${got} instead of an object fails with INVALID_INPUT`, async () => {
      await assertRejectsWith(executorWith(echo).call('Echo', input), 'INVALID_INPUT', `Input for tool "Echo" must be a JSON object, got ${got}.`, {
        violations: [{ path: '$', message: 'must be object' }],
      });
    });
  }

  test('schema violations fail with INVALID_INPUT listing every violation with its JSON path', async () => {
    const inputSchema: ObjectSchema = {
      type: 'object',
      properties: {
        a: {
          type: 'object',
          properties: { b: { type: 'array', items: { type: 'integer' } } },
          additionalProperties: false,
        },
        mode: { enum: ['fast', 'slow'] },
        name: { type: 'string' },
      },
      required: ['a', 'name'],
      additionalProperties: false,
    };
    const executor = executorWith(tool('Deep', () => textResult('ran'), { inputSchema }));
    const input = { a: { b: [1, 2, 'three'], c: true }, mode: 'medium', extra: 1 };
    const violations = [
      { path: '$.name', message: 'is required' },
      { path: '$.extra', message: 'is not an allowed property' },
      { path: '$.a.c', message: 'is not an allowed property' },
      { path: '$.a.b[2]', message: 'must be integer' },
      { path: '$.mode', message: 'must be one of "fast", "slow"' },
    ];
    await assertRejectsWith(
      executor.call('Deep', input),
      'INVALID_INPUT',
      `Invalid input for tool "Deep":\n${violations.map((v) => `- ${v.path}: ${v.message}`).join('\n')}`,
      { violations },
    );
    await assert.rejects(executor.call('Deep', input), { statusCode: 400 });
  });

  test('an input with thousands of violations fails with the first 50 listed and the rest counted', async () => {
    const inputSchema: ObjectSchema = { type: 'object', properties: { tags: { type: 'array', items: { type: 'string' } } } };
    const executor = executorWith(tool('Tags', () => textResult('ran'), { inputSchema }));
    const violations = Array.from({ length: 50 }, (_, i) => ({ path: `$.tags[${i}]`, message: 'must be string' }));
    const lines = violations.map((v) => `- ${v.path}: ${v.message}`).join('\n');
    await assertRejectsWith(
      executor.call('Tags', { tags: Array.from({ length: 9000 }, () => 0) }),
      'INVALID_INPUT',
      `Invalid input for tool "Tags":\n${lines}\n- ... and 8950 more violations`,
      { violations, omitted: 8950 },
    );
  });

  test('an input of more than 10000 values fails with its first violation only, saying so', async () => {
    const executor = executorWith(echo);
    const input = Object.fromEntries(Array.from({ length: 50_000 }, (_, i) => [`k${i}`, 0]));
    await assertRejectsWith(
      executor.call('Echo', input),
      'INVALID_INPUT',
      'Invalid input for tool "Echo":\n- $.text: is required\n(The input holds more than 10000 values, so checking stopped at the first violation; fix it and send the input again to see any others.)',
      { violations: [{ path: '$.text', message: 'is required' }], complete: false },
    );
  });

  test('input is not coerced: a string "5" for an integer is rejected', async () => {
    let calls = 0;
    const inputSchema: ObjectSchema = { type: 'object', properties: { n: { type: 'integer' } } };
    const executor = executorWith(tool('Count', () => (calls++, textResult('')), { inputSchema }));
    const input = { n: '5' };
    await assertRejectsWith(executor.call('Count', input), 'INVALID_INPUT', 'Invalid input for tool "Count":\n- $.n: must be integer');
    assert.deepEqual(input, { n: '5' });
    assert.equal(calls, 0, 'the tool did not run');
  });

  test('unknown properties are rejected, not stripped: the input object is unchanged', async () => {
    const input = { text: 'hi', extra: { nested: 1 } };
    await assertRejectsWith(executorWith(echo).call('Echo', input), 'INVALID_INPUT', 'Invalid input for tool "Echo":\n- $.extra: is not an allowed property');
    assert.deepEqual(input, { text: 'hi', extra: { nested: 1 } });
  });

  test('defaults in the schema are not filled in', async () => {
    let received: unknown;
    const inputSchema: ObjectSchema = { type: 'object', properties: { limit: { type: 'integer', default: 10 } } };
    const executor = executorWith(tool('Defaults', (input) => ((received = input), textResult('')), { inputSchema }));
    const input = {};
    await executor.call('Defaults', input);
    assert.deepEqual(received, {});
    assert.equal(received, input, 'the tool gets the very object that was validated');
  });

  test('check() throws the same errors as call() without running the tool', () => {
    let calls = 0;
    const executor = executorWith(tool('Echo', () => (calls++, textResult('')), { inputSchema: echoSchema }));
    assert.doesNotThrow(() => executor.check('Echo', { text: 'ok' }));
    assert.throws(() => executor.check('Echo', {}), { code: 'INVALID_INPUT' });
    assert.throws(() => executor.check('Nope', {}), { code: 'TOOL_NOT_FOUND' });
    assert.equal(calls, 0);
  });
});

describe('ToolExecutor: what a tool does becomes a ToolResult', () => {
  const failures: [string, ToolDef['execute'], string][] = [
    [
      'a tool that throws synchronously',
      () => {
        throw new Error('disk on fire');
      },
      'Tool "T" failed: disk on fire',
    ],
    ['a tool that rejects', () => Promise.reject(new Error('network down')), 'Tool "T" failed: network down'],
    ['a tool that rejects with a string', () => Promise.reject('quota exceeded' as unknown as Error), 'Tool "T" failed: quota exceeded'],
    [
      'a tool that throws an Error without a message',
      () => {
        throw new Error('');
      },
      'Tool "T" failed: unknown error',
    ],
    [
      'a tool that returns undefined',
      () => undefined as never,
      'Tool "T" returned a malformed result: expected an object with a content array, got undefined.',
    ],
    ['a tool that returns a string', () => 'done' as never, 'Tool "T" returned a malformed result: expected an object with a content array, got a string.'],
    [
      'a tool that returns { content: "x" }',
      () => ({ content: 'x' }) as never,
      'Tool "T" returned a malformed result: expected a content array, got a string.',
    ],
    [
      'a tool whose isError is not a boolean',
      () => ({ content: [], isError: 'yes' }) as never,
      'Tool "T" returned a malformed result: expected isError to be a boolean, got a string.',
    ],
    [
      'a tool that returns a text block without text',
      () => ({ content: [{ type: 'text' }] }) as never,
      'Tool "T" returned a malformed result: content[0] is a text block without a string text.',
    ],
  ];
  for (const [label, execute, message] of failures) {
    test(`${label} gives an isError result with a model-actionable message and no stack trace`, async () => {
      const result = await executorWith(tool('T', execute)).call('T', {});
      assert.deepEqual(result, { content: [{ type: 'text', text: message }], isError: true });
      assert.doesNotMatch(JSON.stringify(result), /\bat .*\(|executor\.ts|\.test\.ts/);
    });
  }

  test('a tool that returns a block of unknown type gives an isError result naming the type', async () => {
    const result = await executorWith(tool('T', () => ({ content: [{ type: 'video', data: '' }] }) as never)).call('T', {});
    assert.deepEqual(result, {
      content: [{ type: 'text', text: 'Tool "T" returned a malformed result: content[0] has unknown type "video".' }],
      isError: true,
    });
  });

  test('a tool that rejects with a plain object gives a message carrying what the object says', async () => {
    const result = await executorWith(tool('T', () => Promise.reject({ reason: 'quota exceeded' } as unknown as Error))).call('T', {});
    assert.equal(result.isError, true);
    assert.match(result.content[0]?.type === 'text' ? result.content[0].text : '', /quota exceeded/);
  });

  test('a tool that reports isError: true is passed through as an error result', async () => {
    const result = await executorWith(tool('T', () => textResult('file not found', true))).call('T', {});
    assert.deepEqual(result, { content: [{ type: 'text', text: 'file not found' }], isError: true });
  });

  test('the result is normalised: extra fields dropped and isError always a boolean', async () => {
    const execute = (): never =>
      ({
        content: [
          { type: 'text', text: 'a', cache_control: { type: 'ephemeral' } },
          { type: 'image', source: { type: 'base64', media_type: 'image/gif', data: 'R0lG', url: 'x' }, extra: 1 },
        ],
        meta: { secret: true },
      }) as never;
    const result = await executorWith(tool('T', execute)).call('T', {});
    assert.deepEqual(result, {
      content: [
        { type: 'text', text: 'a' },
        { type: 'image', source: { type: 'base64', media_type: 'image/gif', data: 'R0lG' } },
      ],
      isError: false,
    });
  });
});

describe('ToolExecutor: deadlines and aborts', () => {
  test('a tool that hangs past its own timeoutMs gives "timed out after N ms" and its signal is aborted', async () => {
    const seen: { context?: ToolContext } = {};
    const executor = executorWith(hangingTool('Hang', seen, { timeoutMs: 50 }));
    const result = await executor.call('Hang', {});
    assert.deepEqual(result, { content: [{ type: 'text', text: 'Tool "Hang" timed out after 50 ms and was aborted.' }], isError: true });
    assert.equal(seen.context?.signal.aborted, true);
    assert.match(String((seen.context?.signal.reason as Error).message), /deadline of 50 ms exceeded/);
  });

  test('a tool without timeoutMs gets the default deadline of 60 s (fake timers)', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const seen: { context?: ToolContext } = {};
    const executor = executorWith(hangingTool('Hang', seen));
    const pending = executor.call('Hang', {});
    t.mock.timers.tick(DEFAULT_TOOL_TIMEOUT_MS - 1);
    assert.equal(seen.context?.signal.aborted, false, 'not aborted a millisecond before the deadline');
    t.mock.timers.tick(1);
    assert.deepEqual(await pending, { content: [{ type: 'text', text: 'Tool "Hang" timed out after 60000 ms and was aborted.' }], isError: true });
    assert.equal(seen.context?.signal.aborted, true);
  });

  test("the executor's defaultTimeoutMs applies to tools without their own, and a tool's timeoutMs wins over it", async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const registry = new ToolRegistry().register(hangingTool('Default', {})).register(hangingTool('Own', {}, { timeoutMs: 5_000 }));
    const executor = new ToolExecutor({ registry, defaultTimeoutMs: 1_000 });
    const viaDefault = executor.call('Default', {});
    const viaOwn = executor.call('Own', {});
    t.mock.timers.tick(5_000);
    assert.deepEqual(await viaDefault, { content: [{ type: 'text', text: 'Tool "Default" timed out after 1000 ms and was aborted.' }], isError: true });
    assert.deepEqual(await viaOwn, { content: [{ type: 'text', text: 'Tool "Own" timed out after 5000 ms and was aborted.' }], isError: true });
  });

  test('an external AbortSignal aborts the call with an "aborted" result, and the tool sees the abort', async () => {
    const seen: { context?: ToolContext } = {};
    const executor = executorWith(hangingTool('Hang', seen));
    const controller = new AbortController();
    const pending = executor.call('Hang', {}, { signal: controller.signal });
    assert.equal(seen.context?.signal.aborted, false);
    const reason = new Error('the client went away');
    controller.abort(reason);
    assert.deepEqual(await pending, { content: [{ type: 'text', text: 'Tool "Hang" was aborted: the client went away.' }], isError: true });
    assert.equal(seen.context?.signal.aborted, true);
    assert.equal(seen.context?.signal.reason, reason);
  });

  test('an abort with a string reason names it; one with no reason says the call was cancelled', async () => {
    const executor = executorWith(hangingTool('Hang', {}));
    const byString = new AbortController();
    const first = executor.call('Hang', {}, { signal: byString.signal });
    byString.abort('server shutting down');
    assert.deepEqual(await first, { content: [{ type: 'text', text: 'Tool "Hang" was aborted: server shutting down.' }], isError: true });

    const byUndefinedReason = { aborted: false, reason: undefined, listeners: [] as (() => void)[] };
    const signal = {
      get aborted() {
        return byUndefinedReason.aborted;
      },
      get reason() {
        return byUndefinedReason.reason;
      },
      addEventListener: (_type: string, listener: () => void) => byUndefinedReason.listeners.push(listener),
      removeEventListener: () => {},
    } as unknown as AbortSignal;
    const second = executor.call('Hang', {}, { signal });
    byUndefinedReason.aborted = true;
    for (const listener of byUndefinedReason.listeners) listener();
    assert.deepEqual(await second, { content: [{ type: 'text', text: 'Tool "Hang" was aborted: the call was cancelled.' }], isError: true });
  });

  test('a call whose signal is already aborted answers "aborted"', async () => {
    const seen: { context?: ToolContext } = {};
    const controller = new AbortController();
    controller.abort(new Error('gone'));
    const result = await executorWith(hangingTool('Hang', seen)).call('Hang', {}, { signal: controller.signal });
    assert.deepEqual(result, { content: [{ type: 'text', text: 'Tool "Hang" was aborted: gone.' }], isError: true });
  });

  test('a call whose signal is already aborted does not run the tool', async () => {
    let ran = false;
    const controller = new AbortController();
    controller.abort(new Error('gone'));
    await executorWith(tool('SideEffect', () => ((ran = true), textResult('')))).call('SideEffect', {}, { signal: controller.signal });
    assert.equal(ran, false);
  });

  test("a tool that finishes without looking at its signal still has it aborted afterwards, and the caller's listener is removed", async () => {
    const seen: { context?: ToolContext } = {};
    const executor = executorWith(tool('Quick', (_input, context) => ((seen.context = context), textResult('done'))));
    const controller = new AbortController();
    const removed = mock.method(controller.signal, 'removeEventListener');
    const result = await executor.call('Quick', {}, { signal: controller.signal });
    assert.deepEqual(result, { content: [{ type: 'text', text: 'done' }], isError: false });
    assert.equal(seen.context?.signal.aborted, true);
    assert.equal(removed.mock.callCount(), 1);
    controller.abort(new Error('late'));
    assert.deepEqual(result, { content: [{ type: 'text', text: 'done' }], isError: false }, 'a late abort changes nothing');
  });

  test('a tool that answers synchronously gets no deadline timer; one that returns a promise gets one, cleared when it answers', async (t) => {
    const timers = t.mock.method(globalThis, 'setTimeout');
    const cleared = t.mock.method(globalThis, 'clearTimeout');
    const executor = executorWith(
      echo,
      tool('Later', async () => textResult('later')),
    );
    assert.deepEqual(await executor.call('Echo', { text: 'now' }), { content: [{ type: 'text', text: 'now' }], isError: false });
    assert.equal(timers.mock.callCount(), 0);
    assert.deepEqual(await executor.call('Later', {}), { content: [{ type: 'text', text: 'later' }], isError: false });
    assert.equal(timers.mock.callCount(), 1);
    assert.equal(cleared.mock.callCount(), 1);
  });
});

describe('ToolExecutor: context and logging', () => {
  test('the context carries the given requestId, a logger bound to the call, and a signal', async () => {
    const capture = capturedLogger();
    const seen: { context?: ToolContext } = {};
    const registry = new ToolRegistry().register(
      tool('Ctx', (_input, context) => {
        seen.context = context;
        context.log.info({ step: 1 }, 'working');
        return textResult('ok');
      }),
    );
    await new ToolExecutor({ registry, logger: capture.logger }).call('Ctx', {}, { requestId: 'req-42' });
    assert.equal(seen.context?.requestId, 'req-42');
    assert.ok(seen.context?.signal instanceof AbortSignal);
    const working = capture.lines().find((l) => l.msg === 'working');
    assert.deepEqual({ reqId: working?.reqId, tool: working?.tool, step: working?.step }, { reqId: 'req-42', tool: 'Ctx', step: 1 });
  });

  test('without a requestId each call gets a fresh one', async () => {
    const ids: string[] = [];
    const executor = executorWith(tool('Ctx', (_input, context) => (ids.push(context.requestId), textResult(''))));
    await executor.call('Ctx', {});
    await executor.call('Ctx', {});
    assert.deepEqual(ids, ['call-1', 'call-2']);
  });

  test('a call logs exactly one line with reqId, tool, ms, outcome and inputBytes, and not the input', async () => {
    const capture = capturedLogger();
    const registry = new ToolRegistry().register(echo);
    const input = { text: 'sk-very-secret-value' };
    await new ToolExecutor({ registry, logger: capture.logger }).call('Echo', input, { requestId: 'req-7', inputBytes: 31 });
    const lines = capture.lines();
    assert.equal(lines.length, 1, capture.raw());
    const [line] = lines;
    assert.equal(typeof line?.ms, 'number');
    assert.ok((line?.ms as number) >= 0);
    assert.deepEqual(
      { msg: line?.msg, level: line?.level, reqId: line?.reqId, tool: line?.tool, outcome: line?.outcome, inputBytes: line?.inputBytes },
      { msg: 'tool call', level: 30, reqId: 'req-7', tool: 'Echo', outcome: 'ok', inputBytes: 31 },
    );
    assert.doesNotMatch(capture.raw(), /sk-very-secret-value/);
  });

  for (const [outcome, def] of [
    ['tool_error', tool('T', () => textResult('no', true))],
    ['threw', tool('T', () => Promise.reject(new Error('boom')))],
    ['malformed', tool('T', () => 'x' as never)],
    ['timeout', hangingTool('T', {}, { timeoutMs: 20 })],
  ] as const) {
    test(`the log line's outcome is '${outcome}' when the tool ${outcome === 'tool_error' ? 'reports an error' : outcome === 'timeout' ? 'times out' : outcome}`, async () => {
      const capture = capturedLogger();
      await new ToolExecutor({ registry: new ToolRegistry().register(def), logger: capture.logger }).call('T', {});
      const calls = capture.lines().filter((l) => l.msg === 'tool call');
      assert.equal(calls.length, 1);
      assert.equal(calls[0]?.outcome, outcome);
    });
  }

  test("the log line's outcome is 'aborted' when the caller aborts", async () => {
    const capture = capturedLogger();
    const controller = new AbortController();
    const pending = new ToolExecutor({ registry: new ToolRegistry().register(hangingTool('T', {})), logger: capture.logger }).call(
      'T',
      {},
      { signal: controller.signal },
    );
    controller.abort();
    await pending;
    assert.deepEqual(
      capture
        .lines()
        .filter((l) => l.msg === 'tool call')
        .map((l) => l.outcome),
      ['aborted'],
    );
  });

  test('an unknown tool or invalid input logs nothing (the caller answers it)', async () => {
    const capture = capturedLogger();
    const executor = new ToolExecutor({ registry: new ToolRegistry().register(echo), logger: capture.logger });
    await assert.rejects(executor.call('Nope', {}));
    await assert.rejects(executor.call('Echo', {}));
    assert.equal(capture.raw(), '');
  });
});

describe('ToolExecutor: concurrency limits', () => {
  function limited(def: ToolDef, options: { maxConcurrency?: number; queueSize?: number; observer?: CallObserver; logger?: pino.Logger } = {}) {
    return new ToolExecutor({ registry: new ToolRegistry().register(def), ...options });
  }

  test("a tool's own maxConcurrency below the server cap is its limit: the next call waits and starts when a slot frees", async () => {
    const gated = gatedTool('G', { maxConcurrency: 2 });
    const executor = limited(gated.tool, { maxConcurrency: 16 });
    const calls = ['a', 'b', 'c'].map((id) => executor.call('G', { id }));
    const runs = await gated.started(2);
    assert.deepEqual(executor.load('G'), { running: 2, waiting: 1, limit: 2 });
    assert.deepEqual(
      runs.map((r) => r.id),
      ['a', 'b'],
    );
    runs[0]?.release('first');
    await gated.started(3);
    assert.equal(runs[2]?.id, 'c');
    for (const run of runs.slice(1)) run.release();
    assert.deepEqual(
      (await Promise.all(calls)).map((r) => r.content),
      [[{ type: 'text', text: 'first' }], [{ type: 'text', text: 'done' }], [{ type: 'text', text: 'done' }]],
    );
    assert.deepEqual(executor.load('G'), { running: 0, waiting: 0, limit: 2 });
  });

  test('the server cap applies to a tool whose own limit is higher, and to tools without one', () => {
    const registry = new ToolRegistry().register(gatedTool('High', { maxConcurrency: 8 }).tool).register(gatedTool('None').tool);
    const executor = new ToolExecutor({ registry, maxConcurrency: 3 });
    assert.equal(executor.load('High').limit, 3);
    assert.equal(executor.load('None').limit, 3);
    assert.equal(new ToolExecutor({ registry }).load('None').limit, 16, 'the default cap is 16');
  });

  test('waiting calls start in the order they were made (FIFO)', async () => {
    const gated = gatedTool('G', { maxConcurrency: 1 });
    const executor = limited(gated.tool);
    const calls = ['a', 'b', 'c', 'd'].map((id) => executor.call('G', { id }));
    for (let n = 1; n <= 4; n++) (await gated.started(n))[n - 1]?.release();
    await Promise.all(calls);
    assert.deepEqual(
      gated.runs.map((r) => r.id),
      ['a', 'b', 'c', 'd'],
    );
  });

  test('a call past a full queue rejects with QUEUE_FULL (503, Retry-After: 1) and its tool never runs', async () => {
    const gated = gatedTool('G', { maxConcurrency: 1 });
    const executor = limited(gated.tool, { queueSize: 1 });
    const first = executor.call('G', { id: 'a' });
    const second = executor.call('G', { id: 'b' });
    await assert.rejects(executor.call('G', { id: 'c' }), (err: unknown) => {
      assert.ok(err instanceof ToolportError);
      assert.deepEqual(
        { code: err.code, status: err.statusCode, message: err.message, details: err.details, retryAfterSeconds: err.retryAfterSeconds },
        {
          code: 'QUEUE_FULL',
          status: 503,
          message: 'Tool "G" is busy: 1 call running and 1 waiting; retry later.',
          details: { tool: 'G', running: 1, waiting: 1, maxConcurrency: 1, queueSize: 1 },
          retryAfterSeconds: 1,
        },
      );
      return true;
    });
    (await gated.started(1))[0]?.release();
    (await gated.started(2))[1]?.release();
    await Promise.all([first, second]);
    assert.deepEqual(
      gated.runs.map((r) => r.id),
      ['a', 'b'],
    );
  });

  test('queueSize 0 refuses a call at once while every slot is taken', async () => {
    const gated = gatedTool('G', { maxConcurrency: 1 });
    const executor = limited(gated.tool, { queueSize: 0 });
    const first = executor.call('G', {});
    await assert.rejects(executor.call('G', {}), { code: 'QUEUE_FULL', message: 'Tool "G" is busy: 1 call running and 0 waiting; retry later.' });
    (await gated.started(1))[0]?.release();
    await first;
    const again = executor.call('G', {});
    (await gated.started(2))[1]?.release();
    assert.equal((await again).isError, false, 'a free slot takes calls again');
  });

  test('a waiting call whose signal aborts answers "aborted" at once, never runs, and logs outcome aborted with its wait', async () => {
    const capture = capturedLogger();
    const gated = gatedTool('G', { maxConcurrency: 1 });
    const executor = limited(gated.tool, { logger: capture.logger });
    const first = executor.call('G', { id: 'a' });
    const controller = new AbortController();
    const waiting = executor.call('G', { id: 'b' }, { signal: controller.signal, requestId: 'req-q', keyLabel: 'ci' });
    controller.abort(new Error('the client disconnected'));
    assert.deepEqual(await waiting, { content: [{ type: 'text', text: 'Tool "G" was aborted: the client disconnected.' }], isError: true });
    assert.deepEqual(executor.load('G'), { running: 1, waiting: 0, limit: 1 });
    (await gated.started(1))[0]?.release();
    await first;
    assert.deepEqual(
      gated.runs.map((r) => r.id),
      ['a'],
      'the aborted call never ran',
    );
    const line = capture.lines().find((l) => l.reqId === 'req-q');
    assert.deepEqual(
      { outcome: line?.outcome, ms: line?.ms, key: line?.key, waits: typeof line?.waitMs },
      { outcome: 'aborted', ms: 0, key: 'ci', waits: 'number' },
    );
  });

  for (const [how, end] of [
    ['returns', (run: GatedRun) => run.release()],
    ['throws', (run: GatedRun) => run.fail()],
  ] as const) {
    test(`the slot is released when the tool ${how}, and the waiting call runs`, async () => {
      const gated = gatedTool('G', { maxConcurrency: 1 });
      const executor = limited(gated.tool);
      const first = executor.call('G', {});
      const second = executor.call('G', {});
      end((await gated.started(1))[0]!);
      await first;
      (await gated.started(2))[1]?.release();
      assert.equal((await second).isError, false);
      assert.deepEqual(executor.load('G'), { running: 0, waiting: 0, limit: 1 });
    });
  }

  test(`the slot of a tool that times out and ignores its signal is released ${STOPPING_GRACE_MS} ms after the call answered`, async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const gated = gatedTool('G', { maxConcurrency: 1, timeoutMs: 1_000 });
    const executor = limited(gated.tool);
    const first = executor.call('G', {});
    const second = executor.call('G', {});
    await gated.started(1);
    t.mock.timers.tick(1_000);
    assert.deepEqual(await first, { content: [{ type: 'text', text: 'Tool "G" timed out after 1000 ms and was aborted.' }], isError: true });
    assert.deepEqual(executor.load('G'), { running: 1, waiting: 1, limit: 1 }, 'the tool still runs: it keeps its slot');
    t.mock.timers.tick(STOPPING_GRACE_MS - 1);
    await Promise.resolve();
    assert.equal(gated.runs.length, 1);
    t.mock.timers.tick(1);
    (await gated.started(2))[1]?.release();
    assert.equal((await second).isError, false);
    assert.deepEqual(executor.load('G'), { running: 0, waiting: 0, limit: 1 });
  });

  test('an aborted call answers at once, and its slot goes to the next call once the tool has stopped', async () => {
    const gated = gatedTool('G', { maxConcurrency: 1 });
    const executor = limited(gated.tool);
    const controller = new AbortController();
    const first = executor.call('G', {}, { signal: controller.signal });
    const second = executor.call('G', {});
    await gated.started(1);
    controller.abort(new Error('shutting down'));
    assert.equal((await first).isError, true);
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(gated.runs.length, 1, 'the aborted tool has not stopped yet: the next call waits');
    gated.runs[0]?.fail('stopped');
    (await gated.started(2))[1]?.release();
    assert.equal((await second).isError, false);
  });

  test('the deadline starts when the tool starts: time spent waiting for a slot does not count', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const gated = gatedTool('G', { maxConcurrency: 1, timeoutMs: 1_000 });
    const executor = limited(gated.tool);
    const first = executor.call('G', {});
    const second = executor.call('G', {});
    await gated.started(1);
    t.mock.timers.tick(900);
    gated.runs[0]?.release();
    await first;
    const [, run] = await gated.started(2);
    t.mock.timers.tick(999);
    assert.equal(run?.signal.aborted, false, '1899 ms after it was made, 999 ms after it started');
    t.mock.timers.tick(1);
    assert.equal(run?.signal.aborted, true);
    assert.deepEqual(await second, { content: [{ type: 'text', text: 'Tool "G" timed out after 1000 ms and was aborted.' }], isError: true });
  });

  test('the observer hears the running and waiting counts and every finished call with its outcome and run time', async () => {
    const load: Array<[string, number, number]> = [];
    const finished: Array<[string, string, string]> = [];
    const observer: CallObserver = {
      loadChanged: (tool, running, waiting) => load.push([tool, running, waiting]),
      callFinished: (tool, outcome, seconds) => finished.push([tool, outcome, seconds === undefined ? 'never ran' : typeof seconds]),
    };
    const gated = gatedTool('G', { maxConcurrency: 1 });
    const executor = limited(gated.tool, { observer });
    const first = executor.call('G', {});
    const controller = new AbortController();
    const abandoned = executor.call('G', {}, { signal: controller.signal });
    const second = executor.call('G', {});
    controller.abort();
    await abandoned;
    (await gated.started(1))[0]?.release();
    await first;
    (await gated.started(2))[1]?.fail();
    await second;
    assert.deepEqual(load, [
      ['G', 1, 0],
      ['G', 1, 1],
      ['G', 1, 2],
      ['G', 1, 1],
      ['G', 1, 0],
      ['G', 0, 0],
    ]);
    assert.deepEqual(finished, [
      ['G', 'aborted', 'never ran'],
      ['G', 'ok', 'number'],
      ['G', 'threw', 'number'],
    ]);
  });

  test('maxConcurrency must be a positive integer and queueSize a non-negative one', () => {
    const registry = new ToolRegistry();
    assert.throws(() => new ToolExecutor({ registry, maxConcurrency: 0 }), RangeError);
    assert.throws(() => new ToolExecutor({ registry, queueSize: -1 }), RangeError);
    assert.doesNotThrow(() => new ToolExecutor({ registry, maxConcurrency: 1, queueSize: 0 }));
  });
});

describe('ToolExecutor: audit line', () => {
  test("the log line carries the API key's label as `key`, and no key field without one", async () => {
    const capture = capturedLogger();
    const executor = new ToolExecutor({ registry: new ToolRegistry().register(echo), logger: capture.logger });
    await executor.call('Echo', { text: 'a' }, { requestId: 'with', keyLabel: 'ci-bot' });
    await executor.call('Echo', { text: 'b' }, { requestId: 'without' });
    const [withKey, withoutKey] = capture.lines();
    assert.deepEqual({ reqId: withKey?.reqId, key: withKey?.key }, { reqId: 'with', key: 'ci-bot' });
    assert.equal(withoutKey?.reqId, 'without');
    assert.equal('key' in (withoutKey ?? {}), false);
    assert.equal('waitMs' in (withKey ?? {}), false, 'a call that did not wait logs no waitMs');
  });
});
