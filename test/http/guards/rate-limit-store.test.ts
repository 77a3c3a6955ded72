import assert from 'node:assert/strict';
import { describe, test, type TestContext } from 'node:test';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { ToolRegistry } from '../../../src/core/registry.js';
import { buildApp } from '../../../src/http/app.js';
import { REDIS_KEY_PREFIX } from '../../../src/http/guards/rate-limit-store.js';
import { connectRedis } from '../../../src/infra/redis.js';
import { Echo } from '../../../src/tools/echo.js';
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
});
