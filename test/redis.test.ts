import assert from 'node:assert/strict';
import { test } from 'node:test';
import { connectRedis, RedisUnavailableError } from '../src/redis.js';
import { capturedLog } from './fixtures/log-capture.js';
import { freePort, REDIS_MISSING, startRedis } from './fixtures/redis-server.js';

test('connectRedis refuses after its timeout when nothing answers, naming TOOLPORT_REDIS_URL but not the password', async () => {
  const port = await freePort();
  const { logger } = capturedLog();
  const started = Date.now();
  const error = await connectRedis(`redis://:hunter2-secret@127.0.0.1:${port}/0`, logger, 300).then(
    () => assert.fail('connected'),
    (err: unknown) => err,
  );
  assert.ok(error instanceof RedisUnavailableError);
  assert.equal(
    error.message,
    `Cannot reach Redis at TOOLPORT_REDIS_URL (redis://:***@127.0.0.1:${port}/0) within 0.3 s: connect ECONNREFUSED 127.0.0.1:${port}. ` +
      'The rate limits are to be shared through it: start it or correct the URL, or unset TOOLPORT_REDIS_URL to count limits in each process.',
  );
  assert.ok(Date.now() - started < 2_000);
});

test('connectRedis resolves once Redis answers, says so, and logs a lost connection and its return', { skip: REDIS_MISSING }, async (t) => {
  const redis = await startRedis();
  t.after(() => redis.stop());
  const { logger, lines } = capturedLog();
  const client = await connectRedis(redis.url, logger);
  t.after(() => client.disconnect());
  assert.equal(await client.ping(), 'PONG');
  assert.deepEqual(lines.map((l) => [l.msg, l.redis]), [['rate limits are shared through Redis', redis.url]]);

  await redis.stop();
  // No offline queue: a command fails at once rather than waiting for the connection.
  await assert.rejects(client.ping());
  await redis.restart();
  const deadline = Date.now() + 10_000;
  while (!lines.some((l) => l.msg === 'connected to Redis again') && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
  assert.equal(await client.ping(), 'PONG');
  const lost = lines.filter((l) => l.msg === 'lost the connection to Redis (TOOLPORT_REDIS_URL); reconnecting');
  assert.equal(lost.length, 1, 'one warning, however many reconnection attempts fail');
  assert.equal(lost[0]!.level, 40);
  assert.equal(lines.filter((l) => l.msg === 'connected to Redis again').length, 1);
});

test('a connection closed on purpose is not logged as lost', { skip: REDIS_MISSING }, async (t) => {
  const redis = await startRedis();
  t.after(() => redis.stop());
  const { logger, lines } = capturedLog();
  const client = await connectRedis(redis.url, logger);
  await client.quit();
  assert.deepEqual(lines.map((l) => l.msg), ['rate limits are shared through Redis']);
});
