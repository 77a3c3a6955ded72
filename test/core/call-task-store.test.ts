import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { pino } from 'pino';
import { CallTasks, TaskCancelled, taskOwner } from '#src/core/call-task-store.js';
import type { TaskSnapshot } from '#src/core/call-task.js';
import { ToolportError } from '#src/core/errors.js';
import { Gateway, type Caller } from '#src/core/gateway.js';
import { ToolRegistry } from '#src/core/registry.js';
import type { ToolDef } from '#src/core/types.js';
import { Echo } from '#src/tools/echo.js';
import { gatedTool } from '../fixtures/gated-tool.js';

const ALICE: Caller = { label: 'alice', scope: undefined };
const BOB: Caller = { label: 'bob', scope: undefined };
const ECHO_ONLY: Caller = { label: 'echo-only', scope: new Set(['Echo']) };

function storeWith(tools: ToolDef[], bounds: ConstructorParameters<typeof CallTasks>[1] = {}) {
  const registry = new ToolRegistry();
  for (const tool of tools) registry.register(tool);
  const gateway = new Gateway({ registry, logger: pino({ level: 'silent' }) });
  return { gateway, tasks: new CallTasks(gateway, bounds) };
}

function start(tasks: CallTasks, caller: Caller, tool: string, input: unknown = {}): Promise<TaskSnapshot> {
  return tasks.start({ caller, tool, input, requestId: 'req-1', transport: 'rest' });
}

async function refusalOf(promise: Promise<unknown> | (() => unknown)): Promise<ToolportError> {
  try {
    await (typeof promise === 'function' ? promise() : promise);
  } catch (err) {
    assert.ok(err instanceof ToolportError, `expected a ToolportError, got ${String(err)}`);
    return err;
  }
  assert.fail('expected a refusal');
}

describe('CallTasks', () => {
  test('a task runs the call through the gateway and keeps its result', async () => {
    const gated = gatedTool();
    const { gateway, tasks } = storeWith([gated.tool]);
    const task = await start(tasks, ALICE, 'Gated', { id: 'one' });
    assert.equal(task.status, 'working');
    assert.match(task.id, /^task_[A-Za-z0-9_-]{22}$/);
    assert.equal(gateway.inFlight, 1, 'the task is a call in flight');
    assert.equal(tasks.running, 1);
    const [run] = await gated.started(1);
    const done = tasks.settled('alice', task.id);
    run!.release('the answer');
    const final = await done;
    assert.equal(final.status, 'completed');
    assert.deepEqual(final.result, { content: [{ type: 'text', text: 'the answer' }], isError: false });
    assert.deepEqual(tasks.get('alice', task.id), final);
    assert.equal(tasks.running, 0);
    assert.equal(gateway.inFlight, 0);
  });

  test('a refused call never becomes a task: the refusal is thrown as a direct call would', async () => {
    const { tasks } = storeWith([Echo, gatedTool().tool]);
    assert.equal((await refusalOf(start(tasks, ALICE, 'Nope'))).code, 'TOOL_NOT_FOUND');
    assert.equal((await refusalOf(start(tasks, ALICE, 'Echo', { text: 1 }))).code, 'INVALID_INPUT');
    assert.equal((await refusalOf(start(tasks, ECHO_ONLY, 'Gated'))).code, 'FORBIDDEN');
    assert.equal(tasks.running, 0);
    assert.deepEqual(tasks.list('alice'), []);
  });

  test('ids of another caller, unknown ids and malformed ids get the same TASK_NOT_FOUND', async () => {
    const { tasks } = storeWith([Echo]);
    const task = await start(tasks, ALICE, 'Echo', { text: 'x' });
    const answers = [
      await refusalOf(() => tasks.get('bob', task.id)),
      await refusalOf(() => tasks.get('alice', 'task_AAAAAAAAAAAAAAAAAAAAAA')),
      await refusalOf(() => tasks.cancel('bob', task.id)),
      await refusalOf(() => tasks.get('alice', '')),
      await refusalOf(() => tasks.settled('bob', task.id)),
    ];
    for (const err of answers) assert.deepEqual([err.code, err.statusCode, err.message], [answers[0]!.code, 404, answers[0]!.message]);
    assert.deepEqual(tasks.list('bob'), []);
    assert.equal(taskOwner(ALICE), 'alice');
  });

  test('a caller at its cap is refused with TOO_MANY_TASKS while another caller still starts tasks', async () => {
    const gated = gatedTool();
    const { tasks } = storeWith([gated.tool], { maxPerCaller: 2, maxTotal: 3 });
    await start(tasks, ALICE, 'Gated');
    await start(tasks, ALICE, 'Gated');
    const refused = await refusalOf(start(tasks, ALICE, 'Gated'));
    assert.equal(refused.code, 'TOO_MANY_TASKS');
    assert.equal(refused.statusCode, 429);
    assert.equal((await start(tasks, BOB, 'Gated')).status, 'working');
    const full = await refusalOf(start(tasks, BOB, 'Gated'));
    assert.equal(full.code, 'TASKS_FULL');
    assert.equal(full.retryAfterSeconds, 5);
    // A finished task frees its place.
    const runs = await gated.started(3);
    runs[0]!.release();
    const [first] = tasks.list('alice');
    await tasks.settled('alice', first!.id);
    assert.equal((await start(tasks, ALICE, 'Gated')).status, 'working');
    for (const run of await gated.started(4)) run.release();
  });

  test('a caller holds at most maxWaitsPerCaller streams and waits; a release frees one place once, and other callers hold their own', async () => {
    const { tasks } = storeWith([Echo], { maxWaitsPerCaller: 2 });
    const owner = taskOwner(ALICE);
    const first = tasks.hold(owner);
    tasks.hold(owner);
    const refused = await refusalOf(() => tasks.hold(owner));
    assert.equal(refused.code, 'TOO_MANY_TASKS');
    assert.equal(refused.message, 'You hold 2 streams and waits on tasks open, the most you may; close one, or poll the task instead.');
    assert.deepEqual(refused.details, { limit: 2, counted: 'streams and waits' });
    tasks.hold(taskOwner(BOB));
    first();
    first();
    tasks.hold(owner);
    assert.equal((await refusalOf(() => tasks.hold(owner))).code, 'TOO_MANY_TASKS');
  });

  test('cancel aborts the call through its signal and the task stays cancelled', async () => {
    const gated = gatedTool();
    const { tasks } = storeWith([gated.tool]);
    const task = await start(tasks, ALICE, 'Gated');
    const [run] = await gated.started(1);
    const seen: string[] = [];
    tasks.watch('alice', task.id, (t) => seen.push(t.status));
    const cancelled = tasks.cancel('alice', task.id);
    assert.equal(cancelled.status, 'cancelled');
    assert.equal(run!.signal.aborted, true);
    assert.ok(run!.signal.reason instanceof TaskCancelled);
    assert.deepEqual(seen, ['cancelled']);
    run!.release('too late');
    await until(() => tasks.running === 0);
    assert.equal(tasks.get('alice', task.id).status, 'cancelled');
    assert.equal(tasks.get('alice', task.id).result, undefined);
    // Cancelling a finished task changes nothing.
    assert.equal(tasks.cancel('alice', task.id).status, 'cancelled');
  });

  test('progress reaches watchers and the snapshot while the task works', async () => {
    const tool: ToolDef = {
      name: 'Stepper',
      description: 'Reports a step, then waits.',
      inputSchema: { type: 'object' },
      execute: (_input, context) =>
        new Promise((resolve) => {
          context.progress?.({ progress: 1, total: 2, message: 'half way' });
          context.signal.addEventListener('abort', () => resolve({ content: [{ type: 'text', text: 'stopped' }] }));
        }),
    };
    const { tasks } = storeWith([tool]);
    const task = await start(tasks, ALICE, 'Stepper');
    assert.deepEqual(tasks.get('alice', task.id).progress, { progress: 1, total: 2, message: 'half way' });
    tasks.cancel('alice', task.id);
    assert.equal(tasks.get('alice', task.id).progress, undefined);
  });

  test('finished tasks are kept up to the cap per caller and forgotten after their TTL', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const { tasks } = storeWith([Echo], { maxKeptPerCaller: 2, ttlMs: 1_000 });
    const ids: string[] = [];
    for (const text of ['a', 'b', 'c']) ids.push((await start(tasks, ALICE, 'Echo', { text })).id);
    assert.deepEqual(
      tasks.list('alice').map((task) => task.id),
      ids.slice(1),
      'the oldest finished task is forgotten first',
    );
    t.mock.timers.tick(1_000);
    assert.deepEqual(tasks.list('alice'), []);
    assert.equal((await refusalOf(() => tasks.get('alice', ids[2]!))).code, 'TASK_NOT_FOUND');
  });

  test('forget drops a finished task at once, and leaves a working one alone', async () => {
    const gated = gatedTool();
    const { tasks } = storeWith([Echo, gated.tool]);
    const done = await start(tasks, ALICE, 'Echo', { text: 'x' });
    const working = await start(tasks, ALICE, 'Gated');
    tasks.forget('bob', done.id);
    assert.equal(tasks.get('alice', done.id).status, 'completed', "another caller's forget changes nothing");
    tasks.forget('alice', done.id);
    tasks.forget('alice', working.id);
    assert.deepEqual(
      tasks.list('alice').map((task) => task.id),
      [working.id],
    );
    (await gated.started(1))[0]!.release();
  });

  test("endCallers (a key reload removed them) cancels their working tasks after the grace and forgets all of theirs, and no one else's", async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const gated = gatedTool();
    const { tasks } = storeWith([Echo, gated.tool]);
    const done = await start(tasks, ALICE, 'Echo', { text: 'x' });
    const working = await start(tasks, ALICE, 'Gated');
    const bobs = await start(tasks, BOB, 'Gated');
    const runs = await gated.started(2);
    tasks.endCallers(['alice'], 1_000);
    assert.equal(tasks.get('alice', working.id).status, 'working', 'within the grace it runs on');
    t.mock.timers.tick(1_000);
    assert.equal(runs[0]!.signal.aborted, true);
    assert.equal((await refusalOf(() => tasks.get('alice', done.id))).code, 'TASK_NOT_FOUND');
    assert.equal((await refusalOf(() => tasks.get('alice', working.id))).code, 'TASK_NOT_FOUND');
    assert.equal(tasks.get('bob', bobs.id).status, 'working');
    for (const run of runs) run.release();
  });

  test('a draining gateway refuses new tasks with SHUTTING_DOWN, and shutdown aborts working ones', async () => {
    const gated = gatedTool();
    const { gateway, tasks } = storeWith([gated.tool]);
    const task = await start(tasks, ALICE, 'Gated');
    const [run] = await gated.started(1);
    gateway.drain();
    assert.equal((await refusalOf(start(tasks, ALICE, 'Gated'))).code, 'SHUTTING_DOWN');
    assert.equal(await gateway.drained(0), false, 'a working task holds the drain like a call');
    gateway.abortAll(new Error('the server is shutting down'));
    assert.equal(run!.signal.aborted, true);
    run!.release();
    const final = await tasks.settled('alice', task.id);
    assert.equal(final.status, 'completed');
    assert.equal(final.result?.isError, true);
  });
});

async function until(condition: () => boolean): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!condition()) {
    if (Date.now() > deadline) assert.fail('timed out');
    await new Promise((resolve) => setImmediate(resolve));
  }
}
