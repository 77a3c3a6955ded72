import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { REFUSAL_CACHE_MS } from '#src/auth/access-tokens.js';
import { INTROSPECTION_CACHE_MS } from '#src/auth/introspection.js';
import { openResourceServer } from '#src/auth/open.js';
import type { KeySpec } from '#src/auth/keyring.js';
import { ToolRegistry } from '#src/core/registry.js';
import { buildApp } from '#src/http/app.js';
import { Echo } from '#src/tools/echo.js';
import { NoArgs } from '../fixtures/tools.js';
import { capturedLog } from '../support/log-capture.js';
import { INTROSPECTION_CLIENT, OPAQUE_CLIENT, resourceServerSettings, startTestIssuer, type TestIssuer } from '../support/oidc-provider.js';
import { errorBody } from '#src/core/errors.js';

const PUBLIC_URL = 'http://127.0.0.1:3000';
const METADATA = `${PUBLIC_URL}/.well-known/oauth-protected-resource`;
const KEY: KeySpec = { label: 'ci', key: 'static-key-0123456789abcdef' };
const ECHOED = { content: [{ type: 'text', text: 'hi' }], isError: false };
const NOT_ACTIVE = 'The access token is not active: it expired, was revoked, or was never issued.';
const OTHER_AUDIENCE = `The access token was not issued for this server: its audience (aud) must include ${PUBLIC_URL} or ${PUBLIC_URL}/mcp.`;

let idp: TestIssuer;
before(async () => {
  idp = await startTestIssuer();
});
after(() => idp.close());

interface Toolport {
  /** toolport's clock (epoch ms). */
  clock?: () => number;
  /** toolport's own client at the issuer; undefined: no introspection. */
  client?: { id: string; secret: string } | undefined;
  keys?: KeySpec[];
  logger?: Logger;
}

/** toolport with Echo and NoArgs, the test issuer's tokens (opaque ones introspected with `client`) and `keys`. */
async function toolport(t: { after(fn: () => Promise<unknown>): void }, options: Toolport = {}): Promise<FastifyInstance> {
  const { clock = Date.now, keys = [KEY], logger } = options;
  const registry = new ToolRegistry();
  registry.register(Echo);
  registry.register(NoArgs);
  const settings = resourceServerSettings(idp.issuer, PUBLIC_URL, { introspectionClient: 'client' in options ? options.client : INTROSPECTION_CLIENT });
  const oauth = await openResourceServer(settings, { now: clock });
  const app = await buildApp({ registry, apiKeys: keys, oauth, logger });
  t.after(() => app.close());
  return app;
}

/** An opaque access token for toolport (or `resource`) granting `scope`. */
const opaque = (scope = 'tools:Echo', resource: string | undefined = PUBLIC_URL, dpop = false) =>
  idp.clientCredentials({ resource, scope, client: OPAQUE_CLIENT, dpop });

const echo = (app: FastifyInstance, token: string, headers: Record<string, string> = {}) =>
  app.inject({ method: 'POST', url: '/tools/Echo', headers: { authorization: `Bearer ${token}`, ...headers }, payload: { text: 'hi' } });

async function assertInvalidToken(response: Awaited<ReturnType<typeof echo>>, message: string): Promise<void> {
  assert.equal(response.statusCode, 401);
  assert.deepEqual(response.json(), errorBody('UNAUTHORIZED', message));
  assert.equal(
    response.headers['www-authenticate'],
    `Bearer realm="toolport", error="invalid_token", error_description="${message.replaceAll('"', "'")}", resource_metadata="${METADATA}"`,
  );
}

describe('opaque access tokens, introspected at the issuer (RFC 7662)', () => {
  test('an opaque token with the scope calls the tool, its subject named in the audit line and the token never logged', async (t) => {
    const { lines, logger } = capturedLog();
    const app = await toolport(t, { logger });
    const token = await opaque();
    assert.equal(token.split('.').length, 1, 'the issuer made an opaque token, not a JWT');
    const response = await echo(app, token);
    assert.equal(response.statusCode, 200);
    assert.deepEqual(response.json(), ECHOED);
    // A client-credentials token names no user: its client is its subject.
    assert.equal(lines.find((line) => line.tool === 'Echo')?.key, `sub:${OPAQUE_CLIENT.id}`);
    assert.ok(!JSON.stringify(lines).includes(token), 'the token is never logged');
    // Keys still work beside introspected tokens.
    assert.equal((await echo(app, KEY.key)).statusCode, 200);
  });

  test('an opaque token without the scope of the tool is a 403 insufficient_scope naming the scope', async (t) => {
    const app = await toolport(t);
    const response = await echo(app, await opaque('tools:NoArgs'));
    const message = 'The access token does not grant the tool "Echo": it needs the scope "tools:Echo" (or "tools:*").';
    assert.equal(response.statusCode, 403);
    assert.deepEqual(response.json(), errorBody('FORBIDDEN', message, { tool: 'Echo', scope: 'tools:Echo' }));
    assert.equal(
      response.headers['www-authenticate'],
      `Bearer realm="toolport", error="insufficient_scope", scope="tools:Echo", error_description="${message.replaceAll('"', "'")}", resource_metadata="${METADATA}"`,
    );
  });

  test('the answer is reused within the cache time, asked for once by requests that arrive together, and asked again after it', async (t) => {
    let now = Date.now();
    const app = await toolport(t, { clock: () => now });
    const token = await opaque();
    const asked = idp.introspections;
    const together = await Promise.all([echo(app, token), echo(app, token), echo(app, token)]);
    assert.deepEqual(
      together.map((response) => response.statusCode),
      [200, 200, 200],
    );
    assert.equal(idp.introspections, asked + 1, 'three requests at once, one introspection');
    now += INTROSPECTION_CACHE_MS - 1;
    assert.equal((await echo(app, token)).statusCode, 200);
    assert.equal(idp.introspections, asked + 1, 'within the cache time, no introspection');
    now += 1;
    assert.equal((await echo(app, token)).statusCode, 200);
    assert.equal(idp.introspections, asked + 2, 'past the cache time, the issuer is asked again');
  });

  test('a revoked token is refused once the cached answer ends, and the refusal is itself reused briefly', async (t) => {
    let now = Date.now();
    const app = await toolport(t, { clock: () => now });
    const token = await opaque();
    assert.equal((await echo(app, token)).statusCode, 200);
    await idp.revoke(token, OPAQUE_CLIENT);
    // The documented trade-off: a revocation takes effect within the cache time, not at once.
    assert.equal((await echo(app, token)).statusCode, 200);
    now += INTROSPECTION_CACHE_MS;
    const asked = idp.introspections;
    await assertInvalidToken(await echo(app, token), NOT_ACTIVE);
    assert.equal(idp.introspections, asked + 1);
    now += REFUSAL_CACHE_MS - 1;
    await assertInvalidToken(await echo(app, token), NOT_ACTIVE);
    assert.equal(idp.introspections, asked + 1, 'an inactive token is refused for a while without asking again');
    now += 1;
    await assertInvalidToken(await echo(app, token), NOT_ACTIVE);
    assert.equal(idp.introspections, asked + 2);
  });

  test('a token revoked before its first use, and a token the issuer never issued, are refused as not active', async (t) => {
    const app = await toolport(t);
    const token = await opaque();
    await idp.revoke(token, OPAQUE_CLIENT);
    await assertInvalidToken(await echo(app, token), NOT_ACTIVE);
    await assertInvalidToken(await echo(app, 'made-up-opaque-token-0123456789'), NOT_ACTIVE);
  });

  test('an opaque token past its expiry is refused, whatever the cached answer said', async (t) => {
    let now = Date.now();
    const app = await toolport(t, { clock: () => now });
    const token = await opaque();
    assert.equal((await echo(app, token)).statusCode, 200);
    // toolport's clock past the token's exp (3600 s): the cached answer ends with it, and the issuer's "active" does not outweigh exp.
    now += 3_601_000;
    const asked = idp.introspections;
    await assertInvalidToken(await echo(app, token), 'The access token has expired.');
    assert.equal(idp.introspections, asked + 1);
  });

  test('an active token for another resource, or for none, is refused (audience)', async (t) => {
    const app = await toolport(t);
    await assertInvalidToken(await echo(app, await opaque('tools:*', 'https://sibling.example.com')), OTHER_AUDIENCE);
    // Client credentials without a resource indicator: an opaque token with no audience at all.
    const unbound = await idp.clientCredentials({ resource: undefined, scope: 'tools:Echo' });
    assert.equal(unbound.split('.').length, 1);
    await assertInvalidToken(await echo(app, unbound), OTHER_AUDIENCE);
  });

  test('a token bound to a key by DPoP is refused as a bearer token', async (t) => {
    const app = await toolport(t);
    const bound = await opaque('tools:Echo', PUBLIC_URL, true);
    await assertInvalidToken(await echo(app, bound), 'The access token is bound to a key (cnf) and cannot be used as a bearer token here.');
  });

  test('a huge opaque token is refused without asking the issuer', async (t) => {
    const app = await toolport(t);
    const asked = idp.introspections;
    await assertInvalidToken(await echo(app, 'x'.repeat(8193)), 'The access token is larger than 8192 bytes.');
    assert.equal(idp.introspections, asked);
  });

  test('without the introspection client an opaque token is refused, and the issuer is not asked', async (t) => {
    const token = await opaque();
    const asked = idp.introspections;
    const keyed = await toolport(t, { client: undefined });
    await assertInvalidToken(await echo(keyed, token), 'The API key is not valid.');
    const tokensOnly = await toolport(t, { client: undefined, keys: [] });
    await assertInvalidToken(await echo(tokensOnly, token), 'The access token is not valid: it is not a JWT.');
    assert.equal(idp.introspections, asked);
  });

  test('an issuer that refuses the introspection client is a 500 that blames no token, logged, and not remembered', async (t) => {
    const { lines, logger } = capturedLog();
    const app = await toolport(t, { client: { id: INTROSPECTION_CLIENT.id, secret: 'not-the-secret' }, logger });
    const token = await opaque();
    const response = await echo(app, token, { 'x-request-id': 'introspection-refused' });
    assert.equal(response.statusCode, 500);
    assert.deepEqual(response.json(), errorBody('INTERNAL_ERROR', 'Internal server error (request id introspection-refused).'));
    const logged = lines.find((line) => line.msg === 'unexpected error');
    assert.equal((logged?.err as { message?: string } | undefined)?.message, 'the introspection endpoint answered HTTP 401');
    assert.ok(!JSON.stringify(lines).includes(token), 'the token is never logged');
    const asked = idp.introspections;
    assert.equal((await echo(app, token)).statusCode, 500);
    assert.equal(idp.introspections, asked + 1, 'a failure to ask is not an answer: the next request asks again');
  });
});
