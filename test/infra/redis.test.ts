import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { ToolRegistry } from '#src/core/registry.js';
import { buildApp } from '#src/http/app.js';
import { connectRedis, openCancellationChannel, RedisUnavailableError } from '#src/infra/redis.js';
import { gatedTool } from '../fixtures/gated-tool.js';
import { capturedLog } from '../support/log-capture.js';
import { freePort } from '../support/ports.js';
import { startRedis } from '../support/redis-server.js';
import { until } from '../support/wait.js';

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

test('connectRedis resolves once Redis answers, says so, and logs a lost connection and its return', async (t) => {
  const redis = await startRedis();
  t.after(() => redis.stop());
  const { logger, lines } = capturedLog();
  const client = await connectRedis(redis.url, logger);
  t.after(() => client.disconnect());
  assert.equal(await client.ping(), 'PONG');
  assert.deepEqual(
    lines.map((l) => [l.msg, l.redis]),
    [['rate limits are shared through Redis', redis.url]],
  );

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

test('a connection closed on purpose is not logged as lost', async (t) => {
  const redis = await startRedis();
  t.after(() => redis.stop());
  const { logger, lines } = capturedLog();
  const client = await connectRedis(redis.url, logger);
  await client.quit();
  assert.deepEqual(
    lines.map((l) => l.msg),
    ['rate limits are shared through Redis'],
  );
});

test("replicas share MCP cancellations through Redis: a notification that reaches one cancels the caller's call on the other, and no other caller's", async (t) => {
  const redis = await startRedis();
  t.after(() => redis.stop());
  const keys = [
    { label: 'team', key: 'team-secret-0123456789abcdef' },
    { label: 'other', key: 'other-secret-0123456789abcdef' },
  ];
  // Two replicas on database 0, and one of another deployment on database 1 of the same Redis.
  const replica = async (db: number) => {
    const { logger, lines } = capturedLog();
    const client = await connectRedis(`${redis.url}/${db}`, logger);
    const gated = gatedTool('Gated');
    const app = await buildApp({ registry: new ToolRegistry().register(gated.tool), logger, apiKeys: keys, redis: client, pressure: false });
    t.after(async () => {
      await app.close();
      client.disconnect();
    });
    await app.ready();
    return { app, gated, lines };
  };
  const [one, two, elsewhere] = [await replica(0), await replica(0), await replica(1)];
  assert.ok(one.lines.some((l) => l.msg === 'MCP cancellations are shared through Redis' && l.channel === 'toolport:cancel:0'));
  const mcp = (app: FastifyInstance, key: string, payload: unknown) =>
    app.inject({
      method: 'POST',
      url: '/mcp',
      headers: { 'content-type': 'application/json', 'mcp-protocol-version': '2025-06-18', authorization: `Bearer ${key}` },
      payload: JSON.stringify(payload),
    });
  const call = (id: number) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'Gated', arguments: {} } });
  const cancel = (requestId: number) => ({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId, reason: 'stop' } });

  const onTwo = mcp(two.app, keys[0]!.key, call(3));
  const onElsewhere = mcp(elsewhere.app, keys[0]!.key, call(3));
  const [run] = await two.gated.started(1);
  const [other] = await elsewhere.gated.started(1);
  // Another key's cancellation crosses to the other replica too, and cancels nothing there.
  assert.equal((await mcp(one.app, keys[1]!.key, cancel(3))).statusCode, 202);
  assert.equal((await mcp(one.app, keys[0]!.key, cancel(3))).statusCode, 202);
  await until(() => run!.signal.aborted, 'the call on the other replica to be cancelled');
  assert.equal((run!.signal.reason as Error).message, 'Cancelled by the client: stop');
  assert.equal((await onTwo).statusCode, 202, 'the cancelled call gets no response');
  assert.equal(other!.signal.aborted, false, 'a deployment on another database hears nothing');
  other!.release('not cancelled');
  assert.equal((await onElsewhere).json().result.content[0].text, 'not cancelled');
});

test('a cancellation channel ignores its own messages and messages that are not cancellations, never throws while Redis is away, and subscribes again when it is back', async (t) => {
  const redis = await startRedis();
  t.after(() => redis.stop());
  const { logger, lines } = capturedLog();
  const client = await connectRedis(redis.url, logger);
  t.after(() => client.disconnect());
  const heard: unknown[] = [];
  const channel = await openCancellationChannel(client, logger, (c) => heard.push(c));
  t.after(() => channel.close());
  const other = await connectRedis(redis.url, logger);
  t.after(() => other.disconnect());
  channel.publish({ caller: 'me', requestId: 1, reason: 'mine' });
  // Answered after the publish on the same connection: the replica's own message went out first.
  await client.ping();
  for (const text of ['not json', '[]', '{"from":"x","caller":1,"requestId":2,"reason":"r"}', '{"from":"x","caller":"c","requestId":null,"reason":"r"}']) {
    await other.publish('toolport:cancel:0', text);
  }
  await other.publish('toolport:cancel:0', JSON.stringify({ from: 'x', caller: 'c', requestId: 'r-1', reason: 'why'.repeat(100) }));
  await until(() => heard.length > 0, 'the well-formed message');
  assert.deepEqual(heard, [{ caller: 'c', requestId: 'r-1', reason: 'why'.repeat(100).slice(0, 200) }]);

  await redis.stop();
  await until(() => client.status !== 'ready', 'the client to see Redis gone');
  channel.publish({ caller: 'me', requestId: 2, reason: 'lost' });
  channel.publish({ caller: 'me', requestId: 3, reason: 'lost' });
  await until(
    () => lines.some((l) => l.msg === 'cannot share an MCP cancellation through Redis (TOOLPORT_REDIS_URL); it reaches the calls of this replica only'),
    'the warning',
  );
  assert.equal(lines.filter((l) => String(l.msg).startsWith('cannot share an MCP cancellation')).length, 1, 'one warning in 10 s');

  // Redis back: the channel subscribes again, says so, and hears cancellations again.
  await redis.restart();
  await until(() => lines.some((l) => l.msg === 'MCP cancellations are shared through Redis again'), 'the channel to subscribe again');
  await until(() => other.status === 'ready', 'the other client to reconnect');
  await other.publish('toolport:cancel:0', JSON.stringify({ from: 'x', caller: 'c', requestId: 9, reason: 'after' }));
  await until(() => heard.length === 2, 'a cancellation after the restart');
  assert.deepEqual(heard[1], { caller: 'c', requestId: 9, reason: 'after' });
});

/** Polls `condition` every 10 ms for up to 10 s. */
