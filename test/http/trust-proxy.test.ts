import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import type { FastifyInstance } from 'fastify';
import type { AppOptions } from '#src/http/app.js';
import { Echo } from '#src/tools/echo.js';
import { appWith } from '../support/app.js';
import { capturedLog } from '../support/log-capture.js';

const PROXY = '10.0.0.2';
const RATE_LIMITED = {
  content: [{ type: 'text', text: 'Rate limit exceeded: this client address may make 1 request per minute; retry in 60 s.' }],
  isError: true,
  error: {
    code: 'RATE_LIMITED',
    message: 'Rate limit exceeded: this client address may make 1 request per minute; retry in 60 s.',
    details: { limit: 1, windowSeconds: 60, retryAfterSeconds: 60 },
  },
};

/** An app that lets a client address make one request a minute, under a fake clock, with its log lines. */
async function limitedApp(t: TestContext, options: Partial<AppOptions>) {
  t.mock.timers.enable({ apis: ['Date'], now: 0 });
  const { lines, logger } = capturedLog();
  return { app: await appWith([Echo], { rateLimit: 1, logger, ...options }, t), lines };
}

/** A call that reached the server from `peer`, carrying X-Forwarded-For `forwardedFor`. */
const call = (app: FastifyInstance, peer: string, forwardedFor?: string) =>
  app.inject({
    method: 'POST',
    url: '/tools/Echo',
    payload: { text: 'hi' },
    remoteAddress: peer,
    headers: forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor },
  });

for (const [name, trustProxy] of [
  ['true', true],
  ['a hop count', 1],
  ["the proxy's address", [PROXY]],
  ["the proxy's CIDR range", ['10.0.0.0/8']],
] as const) {
  test(`trustProxy (${name}): the rate limit counts each client behind the proxy on its own, and the audit line names the client`, async (t) => {
    const { app, lines } = await limitedApp(t, { trustProxy });
    assert.equal((await call(app, PROXY, '203.0.113.5')).statusCode, 200);
    assert.equal((await call(app, PROXY, '203.0.113.6')).statusCode, 200, 'another client has its own budget');
    const limited = await call(app, PROXY, '203.0.113.5');
    assert.equal(limited.statusCode, 429);
    assert.deepEqual(limited.json(), RATE_LIMITED);
    assert.equal(lines.find((l) => l.msg === 'tool call refused')?.ip, '203.0.113.5');
  });
}

test('without trustProxy, X-Forwarded-For is ignored: every client behind the proxy shares its budget', async (t) => {
  const { app, lines } = await limitedApp(t, {});
  assert.equal((await call(app, PROXY, '203.0.113.5')).statusCode, 200);
  const limited = await call(app, PROXY, '203.0.113.6');
  assert.equal(limited.statusCode, 429);
  assert.deepEqual(limited.json(), RATE_LIMITED);
  assert.equal(lines.find((l) => l.msg === 'tool call refused')?.ip, PROXY);
});

test('trustProxy with addresses believes only those peers: a client that sends X-Forwarded-For itself cannot change its address', async (t) => {
  const { app, lines } = await limitedApp(t, { trustProxy: [PROXY] });
  assert.equal((await call(app, '198.51.100.7', '203.0.113.5')).statusCode, 200);
  const limited = await call(app, '198.51.100.7', '203.0.113.99');
  assert.equal(limited.statusCode, 429);
  assert.equal(lines.find((l) => l.msg === 'tool call refused')?.ip, '198.51.100.7');
});
