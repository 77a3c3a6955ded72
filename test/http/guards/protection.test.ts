import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { Echo } from '#src/tools/echo.js';
import { gatedTool } from '../../fixtures/gated-tool.js';
import { until } from '../../support/wait.js';
import { appWith } from '../../support/app.js';
import { errorBody } from '#src/core/errors.js';

/**
 * Stands in for the authentication hook: an app-level onRequest hook that sets `request.principal`
 * from an `x-test-key` header. Added after buildApp, it still runs before the route-level rate
 * limit, as the real one does.
 */
function fakeKeys(app: FastifyInstance): void {
  app.addHook('onRequest', async (request) => {
    const label = request.headers['x-test-key'];
    // Only the label matters here; the cast keeps this stand-in apart from the key type's other fields.
    if (typeof label === 'string') request.principal = { label } as NonNullable<typeof request.principal>;
  });
}

/** Polls a condition until it holds or the deadline passes. */
const echo = (app: FastifyInstance, headers: Record<string, string> = {}, remoteAddress?: string) =>
  app.inject({ method: 'POST', url: '/tools/Echo', payload: { text: 'hi' }, headers, ...(remoteAddress && { remoteAddress }) });

test('POST /tools/:name while every slot is taken and queueSize is 0 is a 503 QUEUE_FULL with Retry-After: 1', async (t) => {
  const gated = gatedTool('Busy', { maxConcurrency: 1 });
  const app = await appWith([gated.tool], { queueSize: 0 });
  t.after(() => app.close());
  const first = app.inject({ method: 'POST', url: '/tools/Busy', payload: { id: 'a' } });
  await gated.started(1);
  const res = await app.inject({ method: 'POST', url: '/tools/Busy', payload: { id: 'b' } });
  assert.equal(res.statusCode, 503);
  assert.equal(res.headers['retry-after'], '1');
  assert.deepEqual(
    res.json(),
    errorBody('QUEUE_FULL', 'Tool "Busy" is busy: 1 call running and 0 waiting; retry later.', {
      tool: 'Busy',
      running: 1,
      waiting: 0,
      maxConcurrency: 1,
      queueSize: 0,
    }),
  );
  gated.runs[0]?.release();
  assert.equal((await first).statusCode, 200);
  assert.deepEqual(
    gated.runs.map((r) => r.id),
    ['a'],
  );
});

test('POST /tools/:name waits in the queue for a slot, and past a full queue gets 503 QUEUE_FULL', async (t) => {
  const gated = gatedTool('Busy');
  const app = await appWith([gated.tool], { maxConcurrency: 1, queueSize: 1 });
  t.after(() => app.close());
  const call = (id: string) => app.inject({ method: 'POST', url: '/tools/Busy', payload: { id } });
  const first = call('a');
  await gated.started(1);
  const second = call('b');
  await until(() => app.toolport.executor.load('Busy').waiting === 1, 'the second call to queue', 5_000, 0);
  const third = await call('c');
  assert.equal(third.statusCode, 503);
  assert.equal(third.headers['retry-after'], '1');
  assert.equal(third.json().error.message, 'Tool "Busy" is busy: 1 call running and 1 waiting; retry later.');
  gated.runs[0]?.release('first');
  (await gated.started(2))[1]?.release('second');
  assert.deepEqual((await first).json(), { content: [{ type: 'text', text: 'first' }], isError: false });
  assert.deepEqual((await second).json(), { content: [{ type: 'text', text: 'second' }], isError: false });
});

test('a queued call whose client disconnects leaves the queue at once and never runs', async (t) => {
  const gated = gatedTool('Busy', { maxConcurrency: 1 });
  const app = await appWith([gated.tool]);
  t.after(() => app.close());
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as AddressInfo;
  const call = (id: string, signal?: AbortSignal) =>
    fetch(`http://127.0.0.1:${port}/tools/Busy`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ id }), signal });
  const first = call('a');
  await gated.started(1);
  const client = new AbortController();
  const second = call('b', client.signal).catch((err: unknown) => err);
  await until(() => app.toolport.executor.load('Busy').waiting === 1, 'the second call to queue', 5_000, 0);
  client.abort();
  assert.equal(((await second) as Error).name, 'AbortError');
  await until(() => app.toolport.executor.load('Busy').waiting === 0, 'the second call to leave the queue', 5_000, 0);
  gated.runs[0]?.release();
  assert.equal((await first).status, 200);
  assert.deepEqual(
    gated.runs.map((r) => r.id),
    ['a'],
  );
  assert.deepEqual(app.toolport.executor.load('Busy'), { running: 0, waiting: 0, limit: 1 });
});

test('past rateLimit calls a minute from one address, a call is a 429 RATE_LIMITED with Retry-After and x-ratelimit-* headers', async (t) => {
  t.mock.timers.enable({ apis: ['Date'], now: 0 });
  const app = await appWith([Echo], { rateLimit: 3 });
  t.after(() => app.close());
  for (const remaining of ['2', '1', '0']) {
    const ok = await echo(app);
    assert.equal(ok.statusCode, 200);
    assert.deepEqual([ok.headers['x-ratelimit-limit'], ok.headers['x-ratelimit-remaining'], ok.headers['x-ratelimit-reset']], ['3', remaining, '60']);
  }
  const res = await echo(app);
  assert.equal(res.statusCode, 429);
  assert.deepEqual(
    {
      'retry-after': res.headers['retry-after'],
      'x-ratelimit-limit': res.headers['x-ratelimit-limit'],
      'x-ratelimit-remaining': res.headers['x-ratelimit-remaining'],
      'x-ratelimit-reset': res.headers['x-ratelimit-reset'],
    },
    { 'retry-after': '60', 'x-ratelimit-limit': '3', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': '60' },
  );
  assert.match(res.headers['content-type'] as string, /^application\/json/);
  assert.deepEqual(
    res.json(),
    errorBody('RATE_LIMITED', 'Rate limit exceeded: this client address may make 3 requests per minute; retry in 60 s.', {
      limit: 3,
      windowSeconds: 60,
      retryAfterSeconds: 60,
    }),
  );
});

test('the rate limit window is fixed: Retry-After counts down, and a new minute allows calls again', async (t) => {
  t.mock.timers.enable({ apis: ['Date'], now: 0 });
  const app = await appWith([Echo], { rateLimit: 1 });
  t.after(() => app.close());
  assert.equal((await echo(app)).statusCode, 200);
  t.mock.timers.tick(45_500);
  const limited = await echo(app);
  assert.equal(limited.statusCode, 429);
  assert.equal(limited.headers['retry-after'], '15');
  t.mock.timers.tick(14_500);
  assert.equal((await echo(app)).statusCode, 200);
});

test('requests counted at the same moment get exactly the limit: 21 at once under a limit of 20, one 429', async (t) => {
  const app = await appWith([Echo], { rateLimit: 20 });
  t.after(() => app.close());
  const statuses = (await Promise.all(Array.from({ length: 21 }, () => echo(app)))).map((res) => res.statusCode);
  assert.deepEqual(statuses.filter((s) => s === 200).length, 20);
  assert.deepEqual(statuses.filter((s) => s === 429).length, 1);
});

test('the rate limit counts per client address without keys: another address has its own budget', async (t) => {
  const app = await appWith([Echo], { rateLimit: 2 });
  t.after(() => app.close());
  for (let i = 0; i < 2; i++) assert.equal((await echo(app, {}, '10.0.0.1')).statusCode, 200);
  assert.equal((await echo(app, {}, '10.0.0.1')).statusCode, 429);
  assert.equal((await echo(app, {}, '10.0.0.2')).statusCode, 200);
});

test('the rate limit counts per key label: keys from one address have their own budgets, and a key is limited from any address', async (t) => {
  const app = await appWith([Echo], { rateLimit: 2 });
  fakeKeys(app);
  t.after(() => app.close());
  assert.equal((await echo(app, { 'x-test-key': 'ci' }, '10.0.0.1')).statusCode, 200);
  assert.equal((await echo(app, { 'x-test-key': 'ci' }, '10.0.0.2')).statusCode, 200);
  const res = await echo(app, { 'x-test-key': 'ci' }, '10.0.0.3');
  assert.equal(res.statusCode, 429);
  assert.equal(res.json().error.message, 'Rate limit exceeded: key "ci" may make 2 requests per minute; retry in 60 s.');
  assert.equal((await echo(app, { 'x-test-key': 'laptop' }, '10.0.0.1')).statusCode, 200, 'another key from the same address');
  assert.equal((await echo(app, {}, '10.0.0.1')).statusCode, 200, 'no key: the address budget, apart from the keys');
});

test('with API keys configured, each key has its own budget and a limited key is named in the 429', async (t) => {
  const apiKeys = [
    { label: 'ci', key: 'k'.repeat(40) },
    { label: 'laptop', key: 'l'.repeat(40) },
  ];
  const app = await appWith([Echo], { rateLimit: 1, apiKeys });
  t.after(() => app.close());
  const as = (key: string) => ({ authorization: `Bearer ${key}` });
  assert.equal((await echo(app, as('k'.repeat(40)))).statusCode, 200);
  const limited = await echo(app, as('k'.repeat(40)));
  assert.equal(limited.statusCode, 429);
  assert.equal(limited.json().error.message, 'Rate limit exceeded: key "ci" may make 1 request per minute; retry in 60 s.');
  assert.equal((await echo(app, as('l'.repeat(40)))).statusCode, 200, 'the other key, from the same address');
});

test('the rate limit counts every route but the probes and /metrics', async (t) => {
  const app = await appWith([Echo], { rateLimit: 1 });
  t.after(() => app.close());
  assert.equal((await app.inject({ url: '/tools' })).statusCode, 200);
  assert.equal((await app.inject({ url: '/tools/Echo' })).statusCode, 429, 'GET /tools used the budget');
  assert.equal((await echo(app)).statusCode, 429);
  for (const url of ['/healthz', '/readyz', '/metrics', '/healthz', '/metrics']) {
    assert.equal((await app.inject({ url })).statusCode, 200, url);
  }
});

test('rateLimit 0 switches the rate limit off: no 429 and no x-ratelimit headers', async (t) => {
  const app = await appWith([Echo], { rateLimit: 0 });
  t.after(() => app.close());
  for (let i = 0; i < 5; i++) {
    const res = await echo(app);
    assert.equal(res.statusCode, 200);
    assert.equal(res.headers['x-ratelimit-limit'], undefined);
  }
});

test('under pressure, tool calls and readiness get 503 OVERLOADED with Retry-After, while /healthz and /metrics answer', async (t) => {
  const app = await appWith([Echo], { pressure: { healthCheck: () => false } });
  t.after(() => app.close());
  for (const [method, url] of [
    ['POST', '/tools/Echo'],
    ['GET', '/tools'],
    ['GET', '/readyz'],
  ] as const) {
    const res = await app.inject({ method, url, ...(method === 'POST' && { payload: { text: 'hi' } }) });
    assert.equal(res.statusCode, 503, url);
    assert.equal(res.headers['retry-after'], '5', url);
    assert.deepEqual(res.json(), errorBody('OVERLOADED', 'The server is overloaded; retry in 5 s.'), url);
  }
  assert.equal((await app.inject({ url: '/healthz' })).statusCode, 200);
  assert.equal((await app.inject({ url: '/metrics' })).statusCode, 200);
});

test('when the pressure ends, calls are taken again', async (t) => {
  let overloaded = true;
  const app = await appWith([Echo], { pressure: { healthCheck: () => !overloaded, healthCheckIntervalMs: 5 } });
  t.after(() => app.close());
  assert.equal((await echo(app)).statusCode, 503);
  overloaded = false;
  await until(async () => (await echo(app)).statusCode === 200, 'a call to be taken', 5_000, 0);
});

test('an overloaded server sheds a call before the rate limit counts it', async (t) => {
  let overloaded = true;
  const app = await appWith([Echo], { rateLimit: 1, pressure: { healthCheck: () => !overloaded, healthCheckIntervalMs: 5 } });
  t.after(() => app.close());
  assert.equal((await echo(app)).statusCode, 503);
  overloaded = false;
  let status = 503;
  await until(async () => (status = (await echo(app)).statusCode) !== 503, 'the pressure to end', 5_000, 0);
  assert.equal(status, 200, 'the shed calls used none of the budget');
});

test('pressure: false switches load shedding off', async (t) => {
  const app = await appWith([Echo], { pressure: false });
  t.after(() => app.close());
  assert.equal((await echo(app)).statusCode, 200);
  assert.equal(app.hasDecorator('isUnderPressure'), false);
});
