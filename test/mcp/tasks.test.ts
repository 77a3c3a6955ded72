import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { CallTasks, TASK_NOT_FOUND_MESSAGE } from '#src/core/call-task-store.js';
import type { CallTaskBounds } from '#src/core/call-task.js';
import { Gateway, type Caller } from '#src/core/gateway.js';
import type { JsonRpcNotification } from '#src/core/json-rpc.js';
import { ToolRegistry } from '#src/core/registry.js';
import { McpDispatcher, type DispatchContext } from '#src/mcp/dispatcher.js';
import { gatewayBackend } from '#src/mcp/gateway-backend.js';
import { Echo } from '#src/tools/echo.js';
import { gatedTool } from '../fixtures/gated-tool.js';

const ALICE: Caller = { label: 'alice', scope: undefined };
const MALLORY: Caller = { label: 'mallory', scope: undefined };
const LEGACY = '2025-11-25';
const MODERN = '2026-07-28';
const WITH_TASKS = { extensions: { 'io.modelcontextprotocol/tasks': {} } };

function setUp(bounds: Partial<CallTaskBounds> = {}, withTasks = true) {
  const gated = gatedTool();
  const registry = new ToolRegistry();
  registry.register(Echo);
  registry.register(gated.tool);
  const gateway = new Gateway({ registry });
  const tasks = new CallTasks(gateway, bounds);
  const backend = gatewayBackend(gateway, { transport: 'mcp', serverInfo: { name: 'toolport', version: '0.1.0' }, ...(withTasks ? { tasks } : {}) });
  const dispatcher = new McpDispatcher(backend);
  let id = 0;
  /** One request in a revision: legacy through the transport's declared version, modern through `_meta`. */
  const rpc = async (
    method: string,
    params: Record<string, unknown> = {},
    options: { version?: string; caller?: Caller; capabilities?: object; context?: Partial<DispatchContext<Caller>> } = {},
  ) => {
    const version = options.version ?? LEGACY;
    const modern = version === MODERN;
    const meta = modern
      ? { 'io.modelcontextprotocol/protocolVersion': MODERN, 'io.modelcontextprotocol/clientCapabilities': options.capabilities ?? {} }
      : undefined;
    const message = { jsonrpc: '2.0', id: ++id, method, params: meta ? { ...params, _meta: { ...meta, ...(params['_meta'] as object) } } : params };
    const outcome = await dispatcher.handle(message, { caller: options.caller ?? ALICE, ...(modern ? {} : { protocolVersion: version }), ...options.context });
    return outcome.reply as { result?: Record<string, unknown>; error?: { code: number; message: string; data?: unknown } };
  };
  return { rpc, gated, tasks };
}

describe('MCP tasks, 2025-11-25 (the tasks utility)', () => {
  test('initialize declares the tasks capability and tools/list says every tool may run as a task; older revisions get neither', async () => {
    const { rpc } = setUp();
    const init = await rpc('initialize', { protocolVersion: LEGACY, capabilities: {}, clientInfo: { name: 't', version: '1' } });
    assert.deepEqual(init.result?.['capabilities'], { tools: { listChanged: false }, tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } });
    const list = await rpc('tools/list');
    for (const tool of list.result?.['tools'] as Array<Record<string, unknown>>) assert.deepEqual(tool['execution'], { taskSupport: 'optional' });
    const older = await rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } });
    assert.deepEqual(older.result?.['capabilities'], { tools: { listChanged: false } });
    const olderList = await rpc('tools/list', {}, { version: '2025-06-18' });
    assert.equal((olderList.result?.['tools'] as Array<Record<string, unknown>>)[0]!['execution'], undefined);
    assert.equal((await rpc('tasks/list', {}, { version: '2025-06-18' })).error?.code, -32601);
  });

  test('a task-augmented tools/call answers a CreateTaskResult; get, list and result follow it to the end', async () => {
    const { rpc, gated } = setUp({ pollIntervalMs: 250 });
    const created = await rpc('tools/call', { name: 'Gated', arguments: { id: 'a' }, task: { ttl: 60_000 } });
    const task = created.result?.['task'] as Record<string, unknown>;
    assert.match(task['taskId'] as string, /^task_/);
    assert.deepEqual(Object.keys(task).sort(), ['createdAt', 'lastUpdatedAt', 'pollInterval', 'status', 'taskId', 'ttl']);
    assert.equal(task['status'], 'working');
    assert.equal(task['pollInterval'], 250);
    const taskId = task['taskId'] as string;
    assert.equal((await rpc('tasks/get', { taskId })).result?.['status'], 'working');
    assert.deepEqual(
      ((await rpc('tasks/list')).result?.['tasks'] as Array<{ taskId: string }>).map((t) => t.taskId),
      [taskId],
    );
    const result = rpc('tasks/result', { taskId });
    const [run] = await gated.started(1);
    run!.release('the end');
    assert.deepEqual((await result).result, {
      content: [{ type: 'text', text: 'the end' }],
      isError: false,
      _meta: { 'io.modelcontextprotocol/related-task': { taskId } },
    });
    assert.equal((await rpc('tasks/get', { taskId })).result?.['status'], 'completed');
    const late = await rpc('tasks/cancel', { taskId });
    assert.deepEqual(late.error, { code: -32602, message: 'Invalid params: the task is already completed', data: { status: 'completed' } });
  });

  test('a caller waiting on as many tasks/result as it may is refused the next with TOO_MANY_TASKS; a wait that ended frees its place', async () => {
    const { rpc, gated } = setUp({ maxWaitsPerCaller: 1 });
    const taskId = ((await rpc('tools/call', { name: 'Gated', arguments: {}, task: {} })).result?.['task'] as { taskId: string }).taskId;
    const waiting = rpc('tasks/result', { taskId });
    const [run] = await gated.started(1);
    const message = 'You hold 1 stream or wait on tasks open, the most you may; close one, or poll the task instead.';
    assert.deepEqual((await rpc('tasks/result', { taskId })).error, {
      code: -31011,
      message,
      data: { code: 'TOO_MANY_TASKS', details: { limit: 1, counted: 'streams and waits' } },
    });
    assert.equal((await rpc('tasks/get', { taskId })).result?.['status'], 'working', 'polling is never refused');
    run!.release('done');
    assert.equal((await waiting).result?.['isError'], false);
    assert.equal((await rpc('tasks/result', { taskId })).result?.['isError'], false);
  });

  test('tasks/cancel aborts the call and answers the cancelled task; tasks/result then says so', async () => {
    const { rpc, gated } = setUp();
    const taskId = ((await rpc('tools/call', { name: 'Gated', arguments: {}, task: {} })).result?.['task'] as { taskId: string }).taskId;
    const [run] = await gated.started(1);
    const cancelled = await rpc('tasks/cancel', { taskId });
    assert.equal(cancelled.result?.['status'], 'cancelled');
    assert.equal(run!.signal.aborted, true);
    const result = await rpc('tasks/result', { taskId });
    assert.equal(result.result?.['isError'], true);
  });

  test("another caller's task id and a guessed id get the same -32602 error", async () => {
    const { rpc, gated } = setUp();
    const taskId = ((await rpc('tools/call', { name: 'Gated', arguments: {}, task: {} })).result?.['task'] as { taskId: string }).taskId;
    const expected = { code: -32602, message: TASK_NOT_FOUND_MESSAGE, data: { code: 'TASK_NOT_FOUND' } };
    for (const method of ['tasks/get', 'tasks/result', 'tasks/cancel']) {
      assert.deepEqual((await rpc(method, { taskId }, { caller: MALLORY })).error, expected, `${method} of a stolen id`);
      assert.deepEqual((await rpc(method, { taskId: 'task_AAAAAAAAAAAAAAAAAAAAAA' }, { caller: MALLORY })).error, expected, `${method} of a guessed id`);
    }
    assert.deepEqual((await rpc('tasks/list', {}, { caller: MALLORY })).result, { tasks: [] });
    assert.equal((await rpc('tasks/get', { taskId })).result?.['status'], 'working', 'the owner still has it');
    (await gated.started(1))[0]!.release();
  });

  test('a refused call never becomes a task, and a caller at its cap gets TOO_MANY_TASKS', async () => {
    const { rpc, gated } = setUp({ maxPerCaller: 1 });
    const unknown = await rpc('tools/call', { name: 'Nope', arguments: {}, task: {} });
    assert.equal(unknown.error?.code, -32602);
    assert.match(unknown.error!.message, /Tool "Nope" not found/);
    assert.equal((await rpc('tools/call', { name: 'Gated', arguments: {}, task: 'soon' })).error?.message, 'Invalid params: task must be an object');
    await rpc('tools/call', { name: 'Gated', arguments: {}, task: {} });
    const capped = await rpc('tools/call', { name: 'Gated', arguments: {}, task: {} });
    assert.equal(capped.error?.code, -31011);
    assert.deepEqual(capped.error?.data, { code: 'TOO_MANY_TASKS', details: { limit: 1 } });
    // Another caller is not held up by the first one's cap.
    assert.equal(
      ((await rpc('tools/call', { name: 'Gated', arguments: {}, task: {} }, { caller: MALLORY })).result?.['task'] as { status: string }).status,
      'working',
    );
    for (const run of await gated.started(2)) run.release();
  });

  test('where notifications may go at any time (stdio), each change of status is told as notifications/tasks/status', async () => {
    const { rpc, gated } = setUp();
    const heard: JsonRpcNotification[] = [];
    const created = await rpc('tools/call', { name: 'Gated', arguments: {}, task: {} }, { context: { notifyAnytime: (n) => heard.push(n) } });
    const taskId = (created.result?.['task'] as { taskId: string }).taskId;
    (await gated.started(1))[0]!.release('told');
    await until(() => heard.length > 0);
    assert.equal(heard[0]!.method, 'notifications/tasks/status');
    assert.deepEqual([heard[0]!.params?.['taskId'], heard[0]!.params?.['status']], [taskId, 'completed']);
  });

  test('a server without a task store offers no tasks: no capability, and task params are ignored', async () => {
    const { rpc } = setUp({}, false);
    const init = await rpc('initialize', { protocolVersion: LEGACY, capabilities: {}, clientInfo: { name: 't', version: '1' } });
    assert.deepEqual(init.result?.['capabilities'], { tools: { listChanged: false } });
    const called = await rpc('tools/call', { name: 'Echo', arguments: { text: 'plain' }, task: {} });
    assert.deepEqual(called.result, { content: [{ type: 'text', text: 'plain' }], isError: false });
    assert.equal((await rpc('tasks/get', { taskId: 'x' })).error?.code, -32601);
  });
});

describe('MCP tasks, 2026-07-28 (the tasks extension)', () => {
  test('server/discover advertises the extension; a slow call of a client that declares it becomes a task, a quick one or one of a client that does not is answered directly', async () => {
    const { rpc, gated, tasks } = setUp();
    const discover = await rpc('server/discover', {}, { version: MODERN });
    assert.deepEqual((discover.result?.['capabilities'] as Record<string, unknown>)['extensions'], { 'io.modelcontextprotocol/tasks': {} });
    const plain = await rpc('tools/call', { name: 'Echo', arguments: { text: 'now' } }, { version: MODERN });
    assert.equal(plain.result?.['resultType'], 'complete');
    const quick = await rpc('tools/call', { name: 'Echo', arguments: { text: 'quick' } }, { version: MODERN, capabilities: WITH_TASKS });
    assert.equal(quick.result?.['resultType'], 'complete');
    assert.deepEqual(quick.result?.['content'], [{ type: 'text', text: 'quick' }]);
    assert.deepEqual(tasks.list('alice'), [], 'a call answered directly leaves no task behind');
    const created = await rpc('tools/call', { name: 'Gated', arguments: {} }, { version: MODERN, capabilities: WITH_TASKS });
    assert.equal(created.result?.['resultType'], 'task');
    assert.equal(created.result?.['status'], 'working');
    assert.deepEqual(
      Object.keys(created.result!)
        .filter((k) => k !== '_meta')
        .sort(),
      ['createdAt', 'lastUpdatedAt', 'pollIntervalMs', 'resultType', 'status', 'taskId', 'ttlMs'],
    );
    const taskId = created.result?.['taskId'] as string;
    (await gated.started(1))[0]!.release('inline');
    await until(async () => (await rpc('tasks/get', { taskId }, { version: MODERN, capabilities: WITH_TASKS })).result?.['status'] === 'completed');
    const done = await rpc('tasks/get', { taskId }, { version: MODERN, capabilities: WITH_TASKS });
    assert.equal(done.result?.['resultType'], 'complete');
    assert.deepEqual(done.result?.['result'], { resultType: 'complete', content: [{ type: 'text', text: 'inline' }], isError: false });
    assert.equal((await rpc('tasks/result', { taskId }, { version: MODERN })).error?.code, -32601, 'the extension has no tasks/result');
    assert.equal((await rpc('tasks/list', {}, { version: MODERN })).error?.code, -32601, 'nor tasks/list');
  });

  test('tasks/cancel acknowledges with an empty result; a stolen id is the same error as an unknown one', async () => {
    const { rpc, gated } = setUp();
    const taskId = (await rpc('tools/call', { name: 'Gated', arguments: {} }, { version: MODERN, capabilities: WITH_TASKS })).result?.['taskId'] as string;
    const stolen = await rpc('tasks/cancel', { taskId }, { version: MODERN, caller: MALLORY, capabilities: WITH_TASKS });
    const guessed = await rpc('tasks/cancel', { taskId: 'task_AAAAAAAAAAAAAAAAAAAAAA' }, { version: MODERN, caller: MALLORY, capabilities: WITH_TASKS });
    assert.deepEqual(stolen.error, { code: -32602, message: TASK_NOT_FOUND_MESSAGE, data: { code: 'TASK_NOT_FOUND' } });
    assert.deepEqual(guessed.error, stolen.error);
    const ack = await rpc('tasks/cancel', { taskId }, { version: MODERN, capabilities: WITH_TASKS });
    assert.equal(ack.result?.['resultType'], 'complete');
    const [run] = await gated.started(1);
    assert.equal(run!.signal.aborted, true);
    assert.equal((await rpc('tasks/get', { taskId }, { version: MODERN, capabilities: WITH_TASKS })).result?.['status'], 'cancelled');
    // tasks/update: no task waits for input, so any response is ignored with an acknowledgement; 2025-11-25 has no such method.
    assert.equal(
      (await rpc('tasks/update', { taskId, inputResponses: { x: {} } }, { version: MODERN, capabilities: WITH_TASKS })).result?.['resultType'],
      'complete',
    );
    assert.equal((await rpc('tasks/update', { taskId, inputResponses: {} })).error?.code, -32601);
    // Cancelling a task that ended is the same acknowledgement.
    assert.equal((await rpc('tasks/cancel', { taskId }, { version: MODERN, capabilities: WITH_TASKS })).result?.['resultType'], 'complete');
  });

  test("the task methods need the extension in the request's client capabilities: -32021 without it", async () => {
    const { rpc } = setUp();
    for (const method of ['tasks/get', 'tasks/cancel', 'tasks/update']) {
      assert.deepEqual((await rpc(method, { taskId: 'task_AAAAAAAAAAAAAAAAAAAAAA', inputResponses: {} }, { version: MODERN })).error, {
        code: -32021,
        message: 'Missing required client capability',
        data: { requiredCapabilities: { extensions: { 'io.modelcontextprotocol/tasks': {} } } },
      });
    }
  });

  test('at the task cap the server answers the call directly instead', async () => {
    const { rpc } = setUp({ maxPerCaller: 0 });
    const answered = await rpc('tools/call', { name: 'Echo', arguments: { text: 'direct' } }, { version: MODERN, capabilities: WITH_TASKS });
    assert.equal(answered.result?.['resultType'], 'complete');
    assert.deepEqual(answered.result?.['content'], [{ type: 'text', text: 'direct' }]);
  });
});

async function until(condition: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!(await condition())) {
    if (Date.now() > deadline) assert.fail('timed out');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
