import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { describe, test } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { Echo } from '#src/tools/echo.js';
import { prefersAsync } from '#src/http/routes/prefer.js';
import { gatedTool } from '../../fixtures/gated-tool.js';
import { readStream, type StreamItem } from '../../support/sse-client.js';
import { appWith } from '../../support/app.js';

const ALICE_KEY = 'tasks-route-alice-secret-0123456789';
const BOB_KEY = 'tasks-route-bob-secret-0123456789';
const ECHO_KEY = 'tasks-route-echo-secret-0123456789';
const KEYS = [
  { label: 'alice', key: ALICE_KEY },
  { label: 'bob', key: BOB_KEY },
  { label: 'echo-only', key: ECHO_KEY, tools: ['Echo'] },
];
const ASYNC = { prefer: 'respond-async' };
const as = (key: string) => ({ authorization: `Bearer ${key}` });
const NOT_FOUND_MESSAGE = 'No such task: it does not exist, was forgotten after its retention, or is not yours.';
const NOT_FOUND = { content: [{ type: 'text', text: NOT_FOUND_MESSAGE }], isError: true, error: { code: 'TASK_NOT_FOUND', message: NOT_FOUND_MESSAGE } };

async function appFor(t: { after(fn: () => unknown): void }, callTasks = {}) {
  const gated = gatedTool();
  const app = await appWith([Echo, gated.tool], { docs: false, pressure: false, apiKeys: KEYS, callTasks }, t);
  return { app, gated };
}

async function startTask(app: FastifyInstance, key: string, tool = 'Gated', payload: unknown = {}) {
  const res = await app.inject({ method: 'POST', url: `/tools/${tool}`, headers: { ...as(key), ...ASYNC }, payload: payload as object });
  assert.equal(res.statusCode, 202, res.body);
  return res;
}

describe('POST /tools/:name with Prefer: respond-async', () => {
  test('answers 202 with Location, Preference-Applied and the working task; GET gives the result once done', async (t) => {
    const { app, gated } = await appFor(t);
    const res = await startTask(app, ALICE_KEY, 'Gated', { id: 'one' });
    const task = res.json();
    assert.match(task.id, /^task_[\w-]{22}$/);
    assert.equal(res.headers.location, `/tasks/${task.id}`);
    assert.equal(res.headers['preference-applied'], 'respond-async');
    assert.equal(res.headers['content-type'], 'application/json; charset=utf-8');
    assert.deepEqual(Object.keys(task).sort(), ['createdAt', 'id', 'lastUpdatedAt', 'pollIntervalMs', 'status', 'tool', 'ttlMs']);
    assert.equal(task.status, 'working');
    assert.equal(task.tool, 'Gated');
    assert.equal(task.ttlMs, 3_600_000);
    const working = await app.inject({ url: res.headers.location as string, headers: as(ALICE_KEY) });
    assert.equal(working.statusCode, 200);
    assert.equal(working.json().status, 'working');
    const [run] = await gated.started(1);
    run!.release('finished');
    await until(async () => (await app.inject({ url: `/tasks/${task.id}`, headers: as(ALICE_KEY) })).json().status !== 'working');
    const done = await app.inject({ url: `/tasks/${task.id}`, headers: as(ALICE_KEY) });
    assert.equal(done.json().status, 'completed');
    assert.deepEqual(done.json().result, { content: [{ type: 'text', text: 'finished' }], isError: false });
    const list = await app.inject({ url: '/tasks', headers: as(ALICE_KEY) });
    assert.deepEqual(
      list.json().tasks.map((t: { id: string; status: string; result?: unknown }) => [t.id, t.status, t.result]),
      [[task.id, 'completed', undefined]],
    );
  });

  test('a refused call is answered as without the preference: 404 TOOL_NOT_FOUND, 400 INVALID_INPUT, 403 FORBIDDEN', async (t) => {
    const { app } = await appFor(t);
    const direct = await app.inject({ method: 'POST', url: '/tools/Nope', headers: as(ALICE_KEY), payload: {} });
    const asTask = await app.inject({ method: 'POST', url: '/tools/Nope', headers: { ...as(ALICE_KEY), ...ASYNC }, payload: {} });
    assert.equal(asTask.statusCode, 404);
    assert.deepEqual(asTask.json(), direct.json());
    const invalid = await app.inject({ method: 'POST', url: '/tools/Echo', headers: { ...as(ALICE_KEY), ...ASYNC }, payload: { text: 1 } });
    assert.equal(invalid.statusCode, 400);
    assert.equal(invalid.json().error.code, 'INVALID_INPUT');
    const forbidden = await app.inject({ method: 'POST', url: '/tools/Gated', headers: { ...as(ECHO_KEY), ...ASYNC }, payload: {} });
    assert.equal(forbidden.statusCode, 403);
    assert.equal(forbidden.json().error.code, 'FORBIDDEN');
    assert.deepEqual((await app.inject({ url: '/tasks', headers: as(ALICE_KEY) })).json(), { tasks: [] });
  });

  test('Prefer: respond-async with ?format= is refused with 400 INVALID_QUERY', async (t) => {
    const { app } = await appFor(t);
    const res = await app.inject({ method: 'POST', url: '/tools/Echo?format=mcp', headers: { ...as(ALICE_KEY), ...ASYNC }, payload: { text: 'x' } });
    assert.equal(res.statusCode, 400);
    const message = 'Invalid querystring:\n- $.format: does not apply with Prefer: respond-async: a task keeps a ToolResult (GET /tasks/{id})';
    assert.deepEqual(res.json(), {
      content: [{ type: 'text', text: message }],
      isError: true,
      error: {
        code: 'INVALID_QUERY',
        message,
        details: { violations: [{ path: '$.format', message: 'does not apply with Prefer: respond-async: a task keeps a ToolResult (GET /tasks/{id})' }] },
      },
    });
  });

  test('a key at its cap gets 429 TOO_MANY_TASKS, and another key still starts tasks and calls', async (t) => {
    const { app, gated } = await appFor(t, { maxPerCaller: 2 });
    await startTask(app, ALICE_KEY);
    await startTask(app, ALICE_KEY);
    const refused = await app.inject({ method: 'POST', url: '/tools/Gated', headers: { ...as(ALICE_KEY), ...ASYNC }, payload: {} });
    assert.equal(refused.statusCode, 429);
    const message = 'You have 2 tasks working, the most you may; wait for one to finish or cancel one, or call without a task.';
    assert.deepEqual(refused.json(), {
      content: [{ type: 'text', text: message }],
      isError: true,
      error: { code: 'TOO_MANY_TASKS', message, details: { limit: 2 } },
    });
    await startTask(app, BOB_KEY);
    const echo = await app.inject({ method: 'POST', url: '/tools/Echo', headers: as(ALICE_KEY), payload: { text: 'still served' } });
    assert.equal(echo.statusCode, 200);
    for (const run of await gated.started(3)) run.release();
  });

  test('the server total gives 503 TASKS_FULL with Retry-After', async (t) => {
    const { app, gated } = await appFor(t, { maxTotal: 1 });
    await startTask(app, ALICE_KEY);
    const refused = await app.inject({ method: 'POST', url: '/tools/Gated', headers: { ...as(BOB_KEY), ...ASYNC }, payload: {} });
    assert.equal(refused.statusCode, 503);
    assert.equal(refused.headers['retry-after'], '5');
    assert.equal(refused.json().error.code, 'TASKS_FULL');
    for (const run of await gated.started(1)) run.release();
  });

  test('other preferences and a Prefer without respond-async leave the call synchronous', async (t) => {
    const { app } = await appFor(t);
    const res = await app.inject({ method: 'POST', url: '/tools/Echo', headers: { ...as(ALICE_KEY), prefer: 'return=minimal' }, payload: { text: 'now' } });
    assert.equal(res.statusCode, 200);
    assert.equal(res.headers['preference-applied'], undefined);
    assert.deepEqual(res.json(), { content: [{ type: 'text', text: 'now' }], isError: false });
  });

  test('prefersAsync reads RFC 7240 lists, parameters and case', () => {
    assert.equal(prefersAsync('respond-async'), true);
    assert.equal(prefersAsync('return=minimal, Respond-Async; foo=bar'), true);
    assert.equal(prefersAsync(['wait=10', 'respond-async']), true);
    assert.equal(prefersAsync('respond-asyncx'), false);
    assert.equal(prefersAsync(undefined), false);
  });
});

describe('/tasks/:id', () => {
  test('an unknown id, a stolen id (another key) and a malformed id get the very same 404 body', async (t) => {
    const { app, gated } = await appFor(t);
    const stolen = (await startTask(app, ALICE_KEY)).json().id as string;
    const answers = [
      await app.inject({ url: `/tasks/${stolen}`, headers: as(BOB_KEY) }),
      await app.inject({ method: 'DELETE', url: `/tasks/${stolen}`, headers: as(BOB_KEY) }),
      await app.inject({ url: `/tasks/${stolen}`, headers: { ...as(BOB_KEY), accept: 'text/event-stream' } }),
      await app.inject({ url: '/tasks/task_AAAAAAAAAAAAAAAAAAAAAA', headers: as(BOB_KEY) }),
      await app.inject({ url: '/tasks/not-even-a-task-id', headers: as(BOB_KEY) }),
      await app.inject({ method: 'DELETE', url: '/tasks/task_AAAAAAAAAAAAAAAAAAAAAA', headers: as(ALICE_KEY) }),
    ];
    for (const res of answers) {
      assert.equal(res.statusCode, 404);
      assert.deepEqual(res.json(), NOT_FOUND);
      assert.equal(res.headers['content-type'], 'application/json; charset=utf-8');
    }
    assert.deepEqual((await app.inject({ url: '/tasks', headers: as(BOB_KEY) })).json(), { tasks: [] });
    // The owner's task is untouched by the other key's DELETE.
    assert.equal((await app.inject({ url: `/tasks/${stolen}`, headers: as(ALICE_KEY) })).json().status, 'working');
    for (const run of await gated.started(1)) run.release();
  });

  test('without a key the tasks routes answer 401 like every other route', async (t) => {
    const { app } = await appFor(t);
    const res = await app.inject({ url: '/tasks/task_AAAAAAAAAAAAAAAAAAAAAA' });
    assert.equal(res.statusCode, 401);
    assert.equal(res.json().error.code, 'UNAUTHORIZED');
  });

  test('DELETE cancels a working task through its signal; it stays cancelled', async (t) => {
    const { app, gated } = await appFor(t);
    const id = (await startTask(app, ALICE_KEY)).json().id as string;
    const [run] = await gated.started(1);
    const res = await app.inject({ method: 'DELETE', url: `/tasks/${id}`, headers: as(ALICE_KEY) });
    assert.equal(res.statusCode, 200);
    assert.equal(res.json().status, 'cancelled');
    assert.equal(run!.signal.aborted, true);
    run!.release('after the fact');
    const again = await app.inject({ method: 'DELETE', url: `/tasks/${id}`, headers: as(ALICE_KEY) });
    assert.equal(again.statusCode, 200);
    assert.equal(again.json().status, 'cancelled');
    assert.equal(again.json().result, undefined);
  });

  test('a key holding its bound of event streams gets 429 TOO_MANY_TASKS for the next, another key still streams, and a closed stream frees its place', async (t) => {
    const { app, gated } = await appFor(t, { maxWaitsPerCaller: 2 });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    const id = (await startTask(app, ALICE_KEY)).json().id as string;
    const stream = (key: string, taskId: string, signal?: AbortSignal) =>
      fetch(`${base}/tasks/${taskId}`, { headers: { ...as(key), accept: 'text/event-stream' }, ...(signal && { signal }) });
    const first = new AbortController();
    const held = [await stream(ALICE_KEY, id, first.signal), await stream(ALICE_KEY, id)];
    for (const res of held) assert.equal(res.status, 200);
    const refused = await stream(ALICE_KEY, id);
    assert.equal(refused.status, 429);
    const message = 'You hold 2 streams and waits on tasks open, the most you may; close one, or poll the task instead.';
    assert.deepEqual(await refused.json(), {
      content: [{ type: 'text', text: message }],
      isError: true,
      error: { code: 'TOO_MANY_TASKS', message, details: { limit: 2, counted: 'streams and waits' } },
    });
    // Polling is never refused, and another key's streams are its own.
    assert.equal((await app.inject({ url: `/tasks/${id}`, headers: as(ALICE_KEY) })).statusCode, 200);
    const bobs = (await startTask(app, BOB_KEY)).json().id as string;
    const bob = await stream(BOB_KEY, bobs);
    assert.equal(bob.status, 200);
    // The client that goes away gives its place back.
    first.abort();
    let again: Response | undefined;
    await until(async () => {
      await again?.body?.cancel();
      again = await stream(ALICE_KEY, id);
      return again.status === 200;
    });
    for (const run of await gated.started(2)) run.release();
    for (const res of [held[1]!, bob, again!]) await res.body?.cancel();
  });

  test('GET with Accept: text/event-stream streams each change as a task event until the result', async (t) => {
    const { app, gated } = await appFor(t);
    await app.listen({ port: 0, host: '127.0.0.1' });
    const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    const id = (await startTask(app, ALICE_KEY)).json().id as string;
    const res = await fetch(`${base}/tasks/${id}`, { headers: { ...as(ALICE_KEY), accept: 'text/event-stream' } });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'text/event-stream');
    const items = readStream(res.body!);
    const events: Array<{ status: string; result?: unknown }> = [];
    const next = async (): Promise<void> => {
      for (;;) {
        const { value, done } = await items.next();
        if (done) throw new Error('the stream ended early');
        const item = value as StreamItem;
        if ('event' in item) {
          assert.equal(item.event, 'task');
          events.push(JSON.parse(item.data));
          return;
        }
      }
    };
    await next();
    assert.equal(events[0]!.status, 'working');
    const [run] = await gated.started(1);
    run!.release('streamed');
    await next();
    assert.equal(events[1]!.status, 'completed');
    assert.deepEqual(events[1]!.result, { content: [{ type: 'text', text: 'streamed' }], isError: false });
    assert.equal((await items.next()).done, true, 'the stream ends after the final event');
  });
});

async function until(condition: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!(await condition())) {
    if (Date.now() > deadline) assert.fail('timed out');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
