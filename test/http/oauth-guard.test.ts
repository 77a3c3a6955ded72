import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createPrivateKey, sign as cryptoSign, type JsonWebKey } from 'node:crypto';
import { decodeJwt, decodeProtectedHeader, generateKeyPair, importJWK, SignJWT } from 'jose';
import type { FastifyInstance } from 'fastify';
import { openResourceServer, type OAuthSettings } from '#src/auth/open.js';
import type { KeySpec } from '#src/auth/keyring.js';
import { ToolRegistry } from '#src/core/registry.js';
import { buildApp } from '#src/http/app.js';
import { Echo } from '#src/tools/echo.js';
import { NoArgs } from '../fixtures/tools.js';
import { capturedLog } from '../support/log-capture.js';
import type { Logger } from 'pino';
import { HUGE_CLIENT, resourceServerSettings, startTestIssuer, type TestIssuer } from '../support/oidc-provider.js';
import { errorBody } from '#src/core/errors.js';

const PUBLIC_URL = 'http://127.0.0.1:3000';
const METADATA = `${PUBLIC_URL}/.well-known/oauth-protected-resource`;
const MCP_METADATA = `${METADATA}/mcp`;
const KEY: KeySpec = { label: 'ci', key: 'static-key-0123456789abcdef' };

let idp: TestIssuer;
let stranger: TestIssuer;
before(async () => {
  [idp, stranger] = await Promise.all([startTestIssuer(), startTestIssuer()]);
});
after(async () => {
  await Promise.all([idp.close(), stranger.close()]);
});

function settings(overrides: Partial<OAuthSettings> = {}): OAuthSettings {
  return resourceServerSettings(idp.issuer, PUBLIC_URL, overrides);
}

/** toolport with Echo and NoArgs, a key, and the test issuer's tokens; `clock` is toolport's clock (epoch ms). */
async function toolport(
  t: { after(fn: () => Promise<unknown>): void },
  clock: () => number = Date.now,
  jwksCooldownMs?: number,
  logger?: Logger,
): Promise<FastifyInstance> {
  const registry = new ToolRegistry();
  registry.register(Echo);
  registry.register(NoArgs);
  const oauth = await openResourceServer(settings(), { now: clock, jwksCooldownMs });
  const app = await buildApp({ registry, apiKeys: [KEY], oauth, logger });
  t.after(() => app.close());
  return app;
}

const echo = (app: FastifyInstance, token: string, url = '/tools/Echo') =>
  app.inject({ method: 'POST', url, headers: { authorization: `Bearer ${token}` }, payload: { text: 'hi' } });

function invalidToken(message: string, metadata = METADATA) {
  return {
    body: errorBody('UNAUTHORIZED', message),
    challenge: `Bearer realm="toolport", error="invalid_token", error_description="${message.replaceAll('"', "'")}", resource_metadata="${metadata}"`,
  };
}

async function assertRefused(response: Awaited<ReturnType<typeof echo>>, expected: { body: unknown; challenge: string }, status = 401): Promise<void> {
  assert.equal(response.statusCode, status);
  assert.deepEqual(response.json(), expected.body);
  assert.equal(response.headers['www-authenticate'], expected.challenge);
}

const ECHOED = { content: [{ type: 'text', text: 'hi' }], isError: false };

describe('access tokens of the configured issuer', () => {
  test('a request without credentials is a 401 naming the protected-resource metadata', async (t) => {
    const app = await toolport(t);
    const rest = await app.inject({ method: 'POST', url: '/tools/Echo', payload: { text: 'hi' } });
    const message = `Authentication required: send an OAuth access token or an API key in the header "Authorization: Bearer <token>"; the authorization servers are named at ${METADATA}.`;
    await assertRefused(rest, { body: errorBody('UNAUTHORIZED', message), challenge: `Bearer realm="toolport", resource_metadata="${METADATA}"` });
    const mcp = await app.inject({ method: 'POST', url: '/mcp', payload: { jsonrpc: '2.0', id: 1, method: 'tools/list' } });
    assert.equal(mcp.statusCode, 401);
    assert.equal(mcp.headers['www-authenticate'], `Bearer realm="toolport", resource_metadata="${MCP_METADATA}"`);
  });

  test('a token from client credentials with the resource indicator calls the tool, its subject named in the audit line', async (t) => {
    const { lines, logger } = capturedLog();
    const app = await toolport(t, Date.now, undefined, logger);
    const token = await idp.clientCredentials({ resource: PUBLIC_URL, scope: 'tools:Echo' });
    const response = await echo(app, token);
    assert.equal(response.statusCode, 200);
    assert.deepEqual(response.json(), ECHOED);
    const audit = lines.find((line) => line.tool === 'Echo');
    assert.equal(audit?.key, 'sub:service');
    assert.ok(!JSON.stringify(lines).includes(token), 'the token is never logged');
  });

  test('a token from the authorization code flow with PKCE, for /mcp, works on REST and MCP alike', async (t) => {
    const app = await toolport(t);
    const token = await idp.authorizationCode({ resource: `${PUBLIC_URL}/mcp`, scope: 'tools:Echo tools:NoArgs' });
    assert.equal(decodeJwt(token).sub, 'alice');
    assert.deepEqual((await echo(app, token)).json(), ECHOED);
    const listed = await app.inject({ method: 'GET', url: '/tools?format=mcp', headers: { authorization: `Bearer ${token}` } });
    assert.deepEqual(
      (listed.json() as { tools: Array<{ name: string }> }).tools.map((tool) => tool.name),
      ['Echo', 'NoArgs'],
    );
  });

  test('tools:* grants every tool, and a static key still works beside tokens', async (t) => {
    const app = await toolport(t);
    const token = await idp.clientCredentials({ resource: PUBLIC_URL, scope: 'tools:*' });
    assert.equal((await echo(app, token)).statusCode, 200);
    assert.equal((await echo(app, KEY.key)).statusCode, 200);
    await assertRefused(await echo(app, 'not-a-key-nor-a-jwt'), invalidToken('The API key is not valid.'));
  });

  test('a token bound to a key (DPoP) is refused as a bearer token: it is worth nothing without its key', async (t) => {
    const app = await toolport(t);
    const bound = await idp.clientCredentials({ resource: PUBLIC_URL, scope: 'tools:*', dpop: true });
    await assertRefused(await echo(app, bound), invalidToken('The access token is bound to a key (cnf) and cannot be used as a bearer token here.'));
  });

  test('a verified token is accepted up to the clock skew past its expiry, then refused', async (t) => {
    let now = Date.now();
    const app = await toolport(t, () => now);
    const token = await idp.clientCredentials({ resource: PUBLIC_URL, scope: 'tools:Echo' });
    assert.equal((await echo(app, token)).statusCode, 200);
    // Up to the clock skew past exp, the remembered answer; then the refusal.
    now = (decodeJwt(token).exp as number) * 1000 + 29_000;
    assert.equal((await echo(app, token)).statusCode, 200);
    now = (decodeJwt(token).exp as number) * 1000 + 31_000;
    await assertRefused(await echo(app, token), invalidToken('The access token has expired.'));
  });

  test('a token minted for a sibling application of the same provider is refused (audience)', async (t) => {
    const app = await toolport(t);
    const token = await idp.clientCredentials({ resource: 'https://sibling.example.com', scope: 'tools:*' });
    await assertRefused(
      await echo(app, token),
      invalidToken(`The access token was not issued for this server: its audience (aud) must include ${PUBLIC_URL} or ${PUBLIC_URL}/mcp.`),
    );
  });

  test('a token of another issuer is refused, even for this resource', async (t) => {
    const app = await toolport(t);
    const token = await stranger.clientCredentials({ resource: PUBLIC_URL, scope: 'tools:*' });
    await assertRefused(await echo(app, token), invalidToken('The access token was issued by an issuer this server does not accept.'));
  });

  test('an expired token is refused, and so is one not valid yet (past the clock skew)', async (t) => {
    let now = Date.now();
    const app = await toolport(t, () => now);
    const token = await idp.clientCredentials({ resource: PUBLIC_URL, scope: 'tools:*' });
    now = (decodeJwt(token).exp as number) * 1000 + 31_000;
    await assertRefused(await echo(app, token), invalidToken('The access token has expired.'));
    now = (decodeJwt(token).iat as number) * 1000 - 31_000;
    await assertRefused(await echo(app, token), invalidToken('The access token is not valid yet.'));
  });

  test('a token signed by a key not in the JWKS is refused, without fetching the keys again within the interval', async (t) => {
    const app = await toolport(t);
    const real = await idp.clientCredentials({ resource: PUBLIC_URL, scope: 'tools:*' });
    const { privateKey } = await generateKeyPair('RS256');
    const forge = (kid: string) => new SignJWT(decodeJwt(real)).setProtectedHeader({ alg: 'RS256', typ: 'at+jwt', kid }).sign(privateKey);
    const fetches = idp.jwksFetches;
    const message = "The access token is signed with a key that is not among the issuer's published keys.";
    await assertRefused(await echo(app, await forge('unknown-kid')), invalidToken(message));
    await assertRefused(await echo(app, await forge('another-unknown-kid')), invalidToken(message));
    assert.equal(idp.jwksFetches, fetches, 'the keys were fetched at start-up, less than an interval ago');
    // The issuer's own kid, another key: the signature fails.
    await assertRefused(await echo(app, await forge(decodeProtectedHeader(real).kid!)), invalidToken("The access token's signature does not verify."));
  });

  test('alg none and HMAC tokens are refused whatever they claim', async (t) => {
    const app = await toolport(t);
    const real = await idp.clientCredentials({ resource: PUBLIC_URL, scope: 'tools:*' });
    const payload = real.split('.')[1]!;
    const none = `${Buffer.from(JSON.stringify({ alg: 'none', typ: 'at+jwt' })).toString('base64url')}.${payload}.`;
    await assertRefused(await echo(app, none), invalidToken('The access token is signed with the algorithm "none", which is not accepted.'));
    // Signed with the issuer's public key as an HMAC secret: the classic key-confusion attack.
    const publicJwk = { kty: idp.signingKey.kty, n: idp.signingKey.n, e: idp.signingKey.e };
    const hmac = await new SignJWT(decodeJwt(real))
      .setProtectedHeader({ alg: 'HS256', kid: idp.signingKey.kid! })
      .sign(new TextEncoder().encode(JSON.stringify(publicJwk)));
    await assertRefused(await echo(app, hmac), invalidToken('The access token is signed with the algorithm "HS256", which is not accepted.'));
  });

  test('after the issuer rotates its keys, new tokens work and tokens of the withdrawn key do not', async (t) => {
    // No interval between refetches: the rotation comes right after start-up here.
    const app = await toolport(t, Date.now, 0);
    const old = await idp.clientCredentials({ resource: PUBLIC_URL, scope: 'tools:*' });
    await idp.rotateKeys();
    const fresh = await idp.clientCredentials({ resource: PUBLIC_URL, scope: 'tools:*' });
    assert.notEqual(decodeProtectedHeader(fresh).kid, decodeProtectedHeader(old).kid);
    const fetches = idp.jwksFetches;
    assert.equal((await echo(app, fresh)).statusCode, 200);
    assert.equal(idp.jwksFetches, fetches + 1, 'the new kid fetched the keys again');
    await assertRefused(await echo(app, old), invalidToken("The access token is signed with a key that is not among the issuer's published keys."));
  });

  test('a token without the scope of the tool is a 403 insufficient_scope naming the scope', async (t) => {
    const app = await toolport(t);
    const message = 'The access token does not grant the tool "Echo": it needs the scope "tools:Echo" (or "tools:*").';
    const expected = {
      body: errorBody('FORBIDDEN', message, { tool: 'Echo', scope: 'tools:Echo' }),
      challenge: `Bearer realm="toolport", error="insufficient_scope", scope="tools:Echo", error_description="${message.replaceAll('"', "'")}", resource_metadata="${METADATA}"`,
    };
    // Too few scopes: none that names a tool.
    await assertRefused(await echo(app, await idp.clientCredentials({ resource: PUBLIC_URL, scope: 'reader' })), expected, 403);
    // A scope for another tool.
    const other = await idp.clientCredentials({ resource: PUBLIC_URL, scope: 'tools:NoArgs' });
    await assertRefused(await echo(app, other), expected, 403);
    await assertRefused(await echo(app, other, '/tools/Echo'), expected, 403);
    const mcp = await app.inject({
      method: 'POST',
      url: '/mcp',
      headers: { authorization: `Bearer ${other}`, accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' },
      payload: { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'Echo', arguments: { text: 'hi' } } },
    });
    assert.equal(mcp.statusCode, 403);
    assert.equal(
      mcp.headers['www-authenticate'],
      `Bearer realm="toolport", error="insufficient_scope", scope="tools:Echo", error_description="${message.replaceAll('"', "'")}", resource_metadata="${MCP_METADATA}"`,
    );
    assert.equal((mcp.json() as { error: { message: string } }).error.message, message);
  });

  test('a huge token is refused before it is parsed', async (t) => {
    const app = await toolport(t);
    const huge = await idp.clientCredentials({ resource: PUBLIC_URL, scope: 'tools:*', client: HUGE_CLIENT });
    assert.ok(huge.length > 8192);
    await assertRefused(await echo(app, huge), invalidToken('The access token is larger than 8192 bytes.'));
  });

  test('the same token signed again by another key with the issuer kid is refused even after a valid use', async (t) => {
    const app = await toolport(t);
    const real = await idp.clientCredentials({ resource: PUBLIC_URL, scope: 'tools:*' });
    assert.equal((await echo(app, real)).statusCode, 200);
    const { privateKey } = await generateKeyPair('RS256');
    const tampered = await new SignJWT({ ...decodeJwt(real), scope: 'tools:*' })
      .setProtectedHeader({ alg: 'RS256', kid: decodeProtectedHeader(real).kid! })
      .sign(privateKey);
    await assertRefused(await echo(app, tampered), invalidToken("The access token's signature does not verify."));
    // Sanity: the issuer's key does sign what toolport accepts.
    const signed = await new SignJWT(decodeJwt(real))
      .setProtectedHeader({ alg: 'RS256', kid: idp.signingKey.kid! })
      .sign(await importJWK(idp.signingKey, 'RS256'));
    assert.equal((await echo(app, signed)).statusCode, 200);
  });

  test("an ID token, a token of another type, or one with a header this server cannot honour is refused, signed by the issuer's own key", async (t) => {
    const app = await toolport(t);
    const real = await idp.clientCredentials({ resource: PUBLIC_URL, scope: 'tools:*' });
    const key = await importJWK(idp.signingKey, 'RS256');
    const kid = idp.signingKey.kid!;
    const sign = (claims: object, header: object) =>
      new SignJWT({ ...decodeJwt(real), ...claims }).setProtectedHeader({ alg: 'RS256', kid, ...header }).sign(key);
    await assertRefused(await echo(app, await sign({ nonce: 'n-0S6_WzA2Mj' }, { typ: 'JWT' })), invalidToken('The token is an ID token, not an access token.'));
    await assertRefused(await echo(app, await sign({ at_hash: 'x' }, {})), invalidToken('The token is an ID token, not an access token.'));
    await assertRefused(await echo(app, await sign({ typ: 'ID' }, {})), invalidToken('The token is an ID token, not an access token.'));
    await assertRefused(
      await echo(app, await sign({}, { typ: 'logout+jwt' })),
      invalidToken('The token\'s type (typ) is "logout+jwt", not an access token\'s (at+jwt).'),
    );
    // jose will not sign an unknown `crit` extension: signed by hand, as an attacker would.
    const b64 = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
    const input = `${b64({ alg: 'RS256', kid, typ: 'at+jwt', crit: ['zz'], zz: 1 })}.${b64(decodeJwt(real))}`;
    const privateKey = createPrivateKey({ key: idp.signingKey as JsonWebKey, format: 'jwk' });
    const critical = `${input}.${cryptoSign('RSA-SHA256', Buffer.from(input), privateKey).toString('base64url')}`;
    await assertRefused(await echo(app, critical), invalidToken('The access token uses a JOSE feature this server does not support.'));
    // What providers write on access tokens is accepted: `at+jwt`, `JWT`, or no type.
    for (const typ of ['at+jwt', 'JWT', undefined])
      assert.equal((await echo(app, await sign({}, typ === undefined ? {} : { typ }))).statusCode, 200, String(typ));
  });
});
