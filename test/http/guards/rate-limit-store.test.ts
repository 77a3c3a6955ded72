import assert from 'node:assert/strict';
import { describe, test, type TestContext } from 'node:test';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import type { Redis } from 'ioredis';
import { ToolRegistry } from '#src/core/registry.js';
import { buildApp } from '#src/http/app.js';
import { callsAheadOfRedis, REDIS_KEY_PREFIX, sharedRateLimitStore, type RateLimitStore } from '#src/http/guards/rate-limit-store.js';
import { connectRedis } from '#src/infra/redis.js';
import { Echo } from '#src/tools/echo.js';
import { capturedLog } from '../../support/log-capture.js';
import { scrapeMetrics } from '../../support/metrics-text.js';
import { REDIS_MISSING, startRedis, type RedisServer } from '../../support/redis-server.js';
import { until } from '../../support/wait.js';
import { requiredOptions } from '../../support/require.js';

const TEAM = { label: 'team', key: 'team-secret-0123456789abcdef' };
const OTHER = { label: 'other', key: 'other-secret-0123456789abcdef' };
const FALLBACK_WARNING = 'rate-limit counts cannot be shared through Redis (TOOLPORT_REDIS_URL); counting in this process until it is back';
const STORE_ERRORS = 'toolport_rate_limit_store_errors_total';

/** An app with a rate limit whose counts live in `redis`, as a replica of a fleet would have it. */
async function replica(t: TestContext, redis: RedisServer, rateLimit: number) {
  const { logger, lines } = capturedLog();
  const client = await connectRedis(redis.url, logger);
  t.after(() => client.disconnect());
  const app = await buildApp({ registry: new ToolRegistry().register(Echo), logger, apiKeys: [TEAM, OTHER], rateLimit, redis: client, pressure: false });
  t.after(() => app.close());
  return { app, client, lines };
}

const echo = (app: FastifyInstance, key = TEAM.key) =>
  app.inject({ method: 'POST', url: '/tools/Echo', headers: { authorization: `Bearer ${key}` }, payload: { text: 'hi' } });

/** Commands Redis ran since the last `CONFIG RESETSTAT`: those sent (EVALSHA, EVAL) and those the script ran for them. */
async function commandsRun(client: Redis): Promise<{ sent: number; all: number }> {
  const calls = new Map<string, number>();
  for (const [, name, count] of (await client.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) calls.set(name!, Number(count));
  const sent = (calls.get('evalsha') ?? 0) + (calls.get('eval') ?? 0);
  const counting = ['incrby', 'pttl', 'pexpire'].reduce((sum, name) => sum + (calls.get(name) ?? 0), 0);
  return { sent, all: sent + counting };
}

/** `calls` counts of `key` in `store`, started together; resolves to the counts they were answered with. */
function countTogether(store: RateLimitStore, key: string, calls: number): Promise<number[]> {
  return Promise.all(
    Array.from(
      { length: calls },
      () => new Promise<number>((resolve, reject) => store.incr(key, (err, counted) => (err === null && counted ? resolve(counted.current) : reject(err)))),
    ),
  );
}

/** The 429's headers and body, exactly; Retry-After is what is left of the window (a minute at most, as Redis counts it). */
function assertRateLimited(res: LightMyRequestResponse, limit: number): void {
  assert.equal(res.statusCode, 429);
  const retryAfter = Number(res.headers['retry-after']);
  assert.ok(retryAfter >= 55 && retryAfter <= 60, `Retry-After ${retryAfter}`);
  assert.deepEqual(
    [res.headers['x-ratelimit-limit'], res.headers['x-ratelimit-remaining'], res.headers['x-ratelimit-reset']],
    [String(limit), '0', String(retryAfter)],
  );
  const message = `Rate limit exceeded: key "team" may make ${limit} requests per minute; retry in ${retryAfter} s.`;
  assert.deepEqual(res.json(), {
    content: [{ type: 'text', text: message }],
    isError: true,
    error: { code: 'RATE_LIMITED', message, details: { limit, windowSeconds: 60, retryAfterSeconds: retryAfter } },
  });
}

describe('rate limits kept in Redis', requiredOptions('Redis', REDIS_MISSING), () => {
  test('two replicas sharing Redis give a key exactly its limit in all, then 429 RATE_LIMITED; other keys are not touched', async (t) => {
    const redis = await startRedis();
    t.after(() => redis.stop());
    const a = await replica(t, redis, 3);
    const b = await replica(t, redis, 3);
    for (const [app, remaining] of [
      [a.app, '2'],
      [b.app, '1'],
      [a.app, '0'],
    ] as const) {
      const ok = await echo(app);
      assert.equal(ok.statusCode, 200);
      assert.equal(ok.headers['x-ratelimit-remaining'], remaining);
    }
    assertRateLimited(await echo(b.app), 3);
    assertRateLimited(await echo(a.app), 3);
    assert.equal((await echo(b.app, OTHER.key)).statusCode, 200);
    assert.equal(await a.client.get(`${REDIS_KEY_PREFIX}key:team`), '5');
    const ttl = await a.client.pttl(`${REDIS_KEY_PREFIX}key:team`);
    assert.ok(ttl > 50_000 && ttl <= 60_000, `the window's expiry is set: ${ttl}`);
    assert.equal((await scrapeMetrics(a.app, { authorization: `Bearer ${TEAM.key}` })).get(STORE_ERRORS), 0);
  });

  test('while Redis is down, calls go on and each replica counts alone: counted in the metric, one warning, and shared again once it is back', async (t) => {
    const redis = await startRedis();
    t.after(() => redis.stop());
    const { app, client, lines } = await replica(t, redis, 3);
    assert.equal((await echo(app)).statusCode, 200);
    await redis.stop();
    await until(() => client.status !== 'ready', 'the client to see Redis gone');

    // Counted in the process from zero: three more answers, then the limit holds here too.
    for (let i = 0; i < 3; i++) assert.equal((await echo(app)).statusCode, 200);
    assertRateLimited(await echo(app), 3);
    const metrics = await scrapeMetrics(app, { authorization: `Bearer ${OTHER.key}` });
    assert.equal(metrics.get(STORE_ERRORS), 4, 'the four calls Redis could not count (/metrics is not rate-limited)');
    const warnings = lines.filter((l) => l.msg === FALLBACK_WARNING);
    assert.equal(warnings.length, 1, 'one warning in 10 s, however many requests');
    assert.equal(warnings[0]!.level, 40);
    assert.match(String(warnings[0]!.err), /connection is (reconnecting|connecting|close|end)/);

    await redis.restart();
    await until(() => client.status === 'ready', 'the client to reconnect');
    const back = await echo(app);
    assert.equal(back.statusCode, 200);
    assert.equal(back.headers['x-ratelimit-remaining'], '2', 'a fresh count in the new Redis');
    assert.ok(lines.some((l) => l.msg === 'rate-limit counts are shared through Redis again'));
    assert.equal(await client.get(`${REDIS_KEY_PREFIX}key:team`), '1');
  });

  test('a Redis that stops answering costs one request the command timeout; the next ones are counted in the process at once', async (t) => {
    const redis = await startRedis();
    t.after(async () => {
      redis.child.kill('SIGCONT');
      await redis.stop();
    });
    const { app, lines } = await replica(t, redis, 100);
    assert.equal((await echo(app)).statusCode, 200);
    redis.child.kill('SIGSTOP');
    const started = performance.now();
    assert.equal((await echo(app)).statusCode, 200);
    const first = performance.now() - started;
    assert.ok(first >= 400 && first < 3_000, `the first call waited for the 500 ms command timeout: ${first} ms`);
    const next = performance.now();
    assert.equal((await echo(app)).statusCode, 200);
    assert.ok(performance.now() - next < 400, 'the next call does not wait for Redis again');
    assert.match(String(lines.find((l) => l.msg === FALLBACK_WARNING)?.err), /timed? ?out/i);
  });

  test('one command per request at most: calls one after another send one each, calls together share one', async (t) => {
    const redis = await startRedis();
    t.after(() => redis.stop());
    const { app, client } = await replica(t, redis, 100);
    await client.config('RESETSTAT');
    for (let i = 0; i < 20; i++) assert.equal((await echo(app)).statusCode, 200);
    assert.deepEqual(await commandsRun(client), { sent: 20, all: 60 }, 'one EVALSHA each, which runs INCRBY and PTTL (PEXPIRE for the first)');
    await client.config('RESETSTAT');
    const statuses = (await Promise.all(Array.from({ length: 200 }, () => echo(app)))).map((res) => res.statusCode);
    assert.deepEqual([statuses.filter((s) => s === 200).length, statuses.filter((s) => s === 429).length], [80, 120], 'exactly the limit, as before');
    const together = await commandsRun(client);
    assert.ok(together.sent >= 1 && together.all <= 200 && together.sent <= 200 / 3, `200 requests at once: ${JSON.stringify(together)}`);
    assert.equal(await client.get(`${REDIS_KEY_PREFIX}key:team`), '220');
  });

  test('three replicas under a limit of 1,000 or more answer a few calls ahead of Redis: at most the limit plus k a replica, never less than the limit', async (t) => {
    const redis = await startRedis();
    t.after(() => redis.stop());
    const limit = 2_000;
    const k = callsAheadOfRedis(limit);
    assert.equal(k, 2);
    const replicas = [await replica(t, redis, limit), await replica(t, redis, limit), await replica(t, redis, limit)];
    await replicas[0]!.client.config('RESETSTAT');
    // In waves, as a fleet gets them: thousands of injections at once would hold this process's event loop past the command timeout.
    const calls = 3_000;
    const statuses: number[] = [];
    for (let wave = 0; wave < calls / 150; wave++) {
      const answers = await Promise.all(Array.from({ length: 150 }, (_, i) => echo(replicas[i % 3]!.app)));
      statuses.push(...answers.map((res) => res.statusCode));
    }
    const answered = statuses.filter((s) => s === 200).length;
    assert.equal(answered + statuses.filter((s) => s === 429).length, calls);
    assert.ok(answered >= limit && answered <= limit + replicas.length * k, `${answered} answered of ${calls}, limit ${limit}, k ${k}`);
    const { sent, all } = await commandsRun(replicas[0]!.client);
    assert.ok(sent <= calls && all <= calls, `${calls} requests sent ${sent} commands (${all} with the script's)`);
    for (const { app } of replicas) await app.close();
    assert.equal(await replicas[0]!.client.get(`${REDIS_KEY_PREFIX}key:team`), String(calls), 'every call reached Redis, the refused ones too');
  });

  test('a key already at its limit in Redis gets at most k more calls from each replica that has not heard so, then only refusals', async (t) => {
    const redis = await startRedis();
    t.after(() => redis.stop());
    const { logger } = capturedLog();
    const limit = 10_000;
    const k = callsAheadOfRedis(limit);
    const clients = await Promise.all([1, 2, 3, 4].map(() => connectRedis(redis.url, logger)));
    t.after(() => clients.forEach((c) => c.disconnect()));
    await clients[0]!.set(`${REDIS_KEY_PREFIX}key:team`, limit - 5, 'PX', 60_000);
    const stores = clients.map((client) => sharedRateLimitStore({ redis: client, windowMs: 60_000, limit, log: logger }));
    // The worst case: every replica gets many calls before any hears the count.
    const counts = await Promise.all(stores.map((store) => countTogether(store, 'key:team', 3 * k)));
    const answered = counts.flat().filter((current) => current <= limit).length;
    assert.equal(answered, stores.length * k, 'each replica answered its k ahead, no more');
    assert.ok(answered <= 5 + stores.length * k);
    const after = await Promise.all(stores.map((store) => countTogether(store, 'key:team', 2)));
    assert.deepEqual(
      after.flat().filter((current) => current <= limit),
      [],
      'once a replica heard the count, no call passes',
    );
    assert.equal(await clients[0]!.get(`${REDIS_KEY_PREFIX}key:team`), String(limit - 5 + stores.length * (3 * k + 2)));
  });

  test('calls answered ahead of Redis reach it within the sync interval, and when the app closes', async (t) => {
    const redis = await startRedis();
    t.after(() => redis.stop());
    const { app, client } = await replica(t, redis, 1_000_000);
    const first = await echo(app);
    assert.equal(first.statusCode, 200);
    assert.equal(first.headers['x-ratelimit-remaining'], '999999');
    await until(async () => (await client.get(`${REDIS_KEY_PREFIX}key:team`)) === '1', 'the call to be counted in Redis');
    for (let i = 0; i < 3; i++) assert.equal((await echo(app)).statusCode, 200);
    await app.close();
    assert.equal(await client.get(`${REDIS_KEY_PREFIX}key:team`), '4');
  });

  test('a call answered ahead of a Redis that stops answering does not wait, and is counted in the process and in the metric', async (t) => {
    const redis = await startRedis();
    t.after(async () => {
      redis.child.kill('SIGCONT');
      await redis.stop();
    });
    const { app, lines } = await replica(t, redis, 1_000_000);
    await app.ready();
    redis.child.kill('SIGSTOP');
    const started = performance.now();
    assert.equal((await echo(app)).statusCode, 200);
    assert.ok(performance.now() - started < 400, 'answered without waiting for Redis');
    await until(async () => (await scrapeMetrics(app, { authorization: `Bearer ${OTHER.key}` })).get(STORE_ERRORS) === 1, 'the failed count in the metric');
    assert.match(String(lines.find((l) => l.msg === FALLBACK_WARNING)?.err), /timed? ?out/i);
    const next = await echo(app);
    assert.equal(next.statusCode, 200);
    assert.equal(next.headers['x-ratelimit-remaining'], '999998', 'counted in the process, after the call Redis missed');
  });
});
