import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { decodeJwt, generateKeyPair, SignJWT } from 'jose';
import { openResourceServer } from '../../src/auth/open.js';
import { ToolRegistry } from '../../src/core/registry.js';
import { buildApp } from '../../src/http/app.js';
import { Echo } from '../../src/tools/echo.js';
import { resourceServerSettings, startTestIssuer, type TestIssuer } from '../support/oidc-provider.js';

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
