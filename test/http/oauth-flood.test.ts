import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { decodeJwt, generateKeyPair, SignJWT } from 'jose';
import { openResourceServer } from '#src/auth/open.js';
import { ToolRegistry } from '#src/core/registry.js';
import { buildApp } from '#src/http/app.js';
import { Echo } from '#src/tools/echo.js';
import { capturedLog } from '../support/log-capture.js';
import { INTROSPECTION_CLIENT, OPAQUE_CLIENT, resourceServerSettings, startTestIssuer, type TestIssuer } from '../support/oidc-provider.js';

const PUBLIC_URL = 'http://127.0.0.1:3000';

let idp: TestIssuer;
before(async () => {
  idp = await startTestIssuer();
});
after(() => idp.close());

const echo = (app: FastifyInstance, token: string, remoteAddress = '192.0.2.1') =>
  app.inject({ method: 'POST', url: '/tools/Echo', headers: { authorization: `Bearer ${token}` }, payload: { text: 'hi' }, remoteAddress });

function invalidToken(message: string) {
  return { content: [{ type: 'text', text: message }], isError: true, error: { code: 'UNAUTHORIZED', message } };
}

/** Resolves once the real clock has passed `until` (epoch ms): polled, never a guess at how long is enough. */
async function clockPassed(until: number): Promise<void> {
  while (Date.now() <= until) await new Promise((resolve) => setTimeout(resolve, 20));
}

describe('a failing JWKS endpoint under a flood of forged tokens', () => {
  test('is fetched at most once per cooldown whatever it answers, while real tokens keep working', async (t) => {
    const cooldownMs = 1_000;
    // toolport's clock stands still during each flood and moves only when told; the real clock
    // passes the cooldown too, so any implementation that reads it sees the interval lapse.
    let now = Date.now();
    const oauth = await openResourceServer(resourceServerSettings(idp.issuer, PUBLIC_URL), { now: () => now, jwksCooldownMs: cooldownMs });
    const registry = new ToolRegistry();
    registry.register(Echo);
    const app = await buildApp({ registry, oauth });
    t.after(() => app.close());
    const real = await idp.clientCredentials({ resource: PUBLIC_URL, scope: 'tools:Echo' });
    const { privateKey } = await generateKeyPair('RS256');
    // Forged by an anonymous client: the issuer's claims, a key and a kid of its own, new every time.
    const forged = () => new SignJWT(decodeJwt(real)).setProtectedHeader({ alg: 'RS256', typ: 'at+jwt', kid: randomBytes(8).toString('hex') }).sign(privateKey);

    idp.failJwks(503);
    const flood = async (waves: number, perWave: number) => {
      const statuses: number[] = [];
      let realUsers = 0;
      for (let wave = 0; wave < waves; wave += 1) {
        // Each wave: forged tokens from many addresses at once, and a real user's fresh token among them.
        const user = await idp.clientCredentials({ resource: PUBLIC_URL, scope: 'tools:Echo' });
        const answers = await Promise.all([
          ...Array.from({ length: perWave }, async (_, i) => echo(app, await forged(), `198.51.100.${(wave * perWave + i) % 250}`)),
          echo(app, user, '203.0.113.7'),
        ]);
        const mine = answers.pop()!;
        assert.equal(mine.statusCode, 200, mine.body);
        realUsers += 1;
        for (const answer of answers) {
          statuses.push(answer.statusCode);
          if (answer.statusCode === 401) {
            assert.deepEqual(answer.json(), invalidToken("The access token is signed with a key that is not among the issuer's published keys."));
          }
        }
      }
      return { statuses, realUsers };
    };

    const started = Date.now();
    await clockPassed(started + cooldownMs);
    now += cooldownMs + 1;
    let fetches = idp.jwksFetches;
    const first = await flood(20, 10);
    assert.equal(idp.jwksFetches - fetches, 1, 'one fetch for 200 forged tokens: the failure starts the cooldown too');
    // The request whose fetch failed is a 500 that blames no token; every other is refused without a fetch.
    assert.equal(first.statuses.filter((status) => status === 500).length, 1);
    assert.equal(first.statuses.filter((status) => status === 401).length, 199);
    assert.equal(first.realUsers, 20);

    // The next interval: one attempt again, still failing.
    await clockPassed(Date.now() + cooldownMs);
    now += cooldownMs + 1;
    fetches = idp.jwksFetches;
    await flood(10, 10);
    assert.equal(idp.jwksFetches - fetches, 1);

    // The endpoint answers again: after the cooldown, a rotated key is found at the next attempt.
    idp.failJwks(undefined);
    await idp.rotateKeys();
    const rotated = await idp.clientCredentials({ resource: PUBLIC_URL, scope: 'tools:Echo' });
    assert.equal((await echo(app, rotated)).statusCode, 401, 'within the cooldown: the new kid is not fetched for');
    await clockPassed(Date.now() + cooldownMs);
    now += cooldownMs + 1;
    const response = await echo(app, rotated);
    assert.equal(response.statusCode, 200, response.body);
  });
});

/** toolport taking the issuer's opaque tokens (introspected) and JWTs, with a rate limit per key or address. */
async function introspecting(t: { after(fn: () => Promise<unknown>): void }, rateLimit: number): Promise<FastifyInstance> {
  const oauth = await openResourceServer(resourceServerSettings(idp.issuer, PUBLIC_URL, { introspectionClient: INTROSPECTION_CLIENT }));
  const registry = new ToolRegistry();
  registry.register(Echo);
  const app = await buildApp({ registry, oauth, rateLimit });
  t.after(() => app.close());
  return app;
}

const NOT_ACTIVE = 'The access token is not active: it expired, was revoked, or was never issued.';
const opaque = () => idp.clientCredentials({ resource: PUBLIC_URL, scope: 'tools:Echo', client: OPAQUE_CLIENT });

/** Polls `ready` until it holds or `deadlineMs` passes; what is asserted afterwards decides, not this. */
async function until(ready: () => boolean, deadlineMs = 10_000): Promise<void> {
  const end = Date.now() + deadlineMs;
  while (!ready() && Date.now() < end) await new Promise((resolve) => setTimeout(resolve, 10));
}

describe('made-up opaque tokens against a slow identity provider', () => {
  test("one client's flood cannot take the introspection slots other clients' real tokens need", async (t) => {
    const app = await introspecting(t, 10_000);
    const users = await Promise.all(Array.from({ length: 15 }, opaque));
    const base = idp.introspections;
    // The provider holds every introspection until released: as slow as the test needs, with no clock.
    const provider = idp.holdIntrospections();
    t.after(() => provider.release());
    let settled = 0;
    const flood = Array.from({ length: 48 }, (_, i) =>
      echo(app, `made-up-opaque-token-${i}-${randomBytes(8).toString('hex')}`, '198.51.100.66').finally(() => (settled += 1)),
    );
    // The flood's share reached the provider; the rest was queued or refused.
    await until(() => provider.held >= 4 && settled >= 36);
    assert.equal(idp.introspections - base, 4, 'one address holds at most its share of the slots');
    const real = users.map((token, i) => echo(app, token, `203.0.113.${i + 1}`));
    await until(() => provider.held >= 16);
    assert.equal(idp.introspections - base, 16, "every slot left went to the real users' tokens");
    provider.release();
    const answers = await Promise.all(real);
    assert.deepEqual(
      answers.map((response) => response.statusCode),
      Array(15).fill(200),
    );
    const flooded = await Promise.all(flood);
    const byStatus = (status: number) => flooded.filter((response) => response.statusCode === status);
    assert.equal(byStatus(401).length, 12, 'its share and its place in the queue were asked about, and refused');
    for (const response of byStatus(401)) assert.deepEqual(response.json(), invalidToken(NOT_ACTIVE));
    assert.equal(byStatus(503).length, 36);
    const busy = byStatus(503)[0]!;
    const message =
      "Checking access tokens with the identity provider is busy with this caller's calls: 4 running and 8 waiting, the most one caller may have (4 running, 8 waiting); retry later.";
    assert.deepEqual(busy.json(), {
      content: [{ type: 'text', text: message }],
      isError: true,
      error: {
        code: 'QUEUE_FULL',
        message,
        details: { tool: 'introspection', running: 4, waiting: 8, maxConcurrencyPerCaller: 4, queuePerCaller: 8 },
      },
    });
    assert.equal(busy.headers['retry-after'], '1');
    assert.equal(idp.introspections - base, 15 + 12, 'the provider was asked 27 questions for 63 tokens');
  });

  test('refused requests count against the address budget before anything is asked of the provider', async (t) => {
    const app = await introspecting(t, 10);
    const real = await opaque();
    const base = idp.introspections;
    const attacker = '198.51.100.77';
    const anonymous = await app.inject({ method: 'POST', url: '/tools/Echo', payload: { text: 'hi' }, remoteAddress: attacker });
    assert.equal(anonymous.statusCode, 401);
    for (let i = 0; i < 4; i += 1)
      assert.equal((await app.inject({ method: 'POST', url: '/tools/Echo', payload: {}, remoteAddress: attacker })).statusCode, 401);
    const answers = [];
    for (let i = 0; i < 10; i += 1) answers.push(await echo(app, `made-up-${i}-${randomBytes(8).toString('hex')}`, attacker));
    assert.deepEqual(
      answers.map((response) => response.statusCode),
      [401, 401, 401, 401, 401, 429, 429, 429, 429, 429],
    );
    assert.equal(idp.introspections - base, 5, 'five made-up tokens fitted in the budget the 401s left; the rest were not sent');
    const limited = answers.at(-1)!;
    const retry = Number(limited.headers['retry-after']);
    const message = `Rate limit exceeded: this client address may make 10 requests per minute; retry in ${retry} s.`;
    assert.deepEqual(limited.json(), {
      content: [{ type: 'text', text: message }],
      isError: true,
      error: { code: 'RATE_LIMITED', message, details: { limit: 10, windowSeconds: 60, retryAfterSeconds: retry } },
    });
    // The budget is the address's: a real token from it waits too, one from elsewhere works.
    assert.equal((await echo(app, real, attacker)).statusCode, 429);
    assert.equal(idp.introspections - base, 5);
    assert.equal((await echo(app, real, '203.0.113.50')).statusCode, 200);
  });
});

describe('the log under a flood of refused requests', () => {
  test('refusals are sampled per error code: 1000 refused requests write 100 audit lines, and a real refusal of another kind is still written', async (t) => {
    const { lines, logger } = capturedLog();
    const oauth = await openResourceServer(resourceServerSettings(idp.issuer, PUBLIC_URL));
    const registry = new ToolRegistry();
    registry.register(Echo);
    const app = await buildApp({ registry, oauth, logger });
    t.after(() => app.close());
    const started = Date.now();
    for (let wave = 0; wave < 10; wave += 1) {
      const answers = await Promise.all(
        Array.from({ length: 100 }, (_, i) =>
          app.inject({ method: 'POST', url: '/tools/Echo', payload: { text: 'hi' }, remoteAddress: `198.51.100.${(wave * 100 + i) % 250}` }),
        ),
      );
      assert.ok(answers.every((response) => response.statusCode === 401));
    }
    const intervals = Math.floor((Date.now() - started) / 10_000) + 1;
    const refused = lines.filter((line) => line.msg === 'tool call refused');
    const bytes = lines.reduce((sum, line) => sum + JSON.stringify(line).length + 1, 0);
    t.diagnostic(`1000 refused requests: ${refused.length} audit lines, ${bytes} bytes of log`);
    assert.ok(refused.length <= 100 * intervals, `${refused.length} audit lines for 1000 refusals`);
    assert.ok(refused.every((line) => line.code === 'UNAUTHORIZED' && line.status === 401));
    // A real caller's refusal of another kind is still written during the flood.
    const scoped = await idp.clientCredentials({ resource: PUBLIC_URL, scope: 'tools:NoArgs' });
    assert.equal((await echo(app, scoped)).statusCode, 403);
    assert.ok(lines.some((line) => line.msg === 'tool call refused' && line.code === 'FORBIDDEN'));
  });
});
