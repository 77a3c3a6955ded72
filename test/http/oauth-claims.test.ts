import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { decodeJwt, importJWK } from 'jose';
import { AccessTokens } from '#src/auth/access-tokens.js';
import { IdentityMapper } from '#src/auth/identity.js';
import { Introspector } from '#src/auth/introspection.js';
import { JwtVerifier } from '#src/auth/jwt-verifier.js';
import { EMPTY_MAPPING } from '#src/auth/mapping.js';
import { defaultAudiences, openResourceServer } from '#src/auth/open.js';
import { ToolRegistry } from '#src/core/registry.js';
import { Echo } from '#src/tools/echo.js';
import { NoArgs } from '../fixtures/tools.js';
import { resourceServerSettings, startTestIssuer, type TestIssuer } from '../support/oidc-provider.js';
import { appWith } from '../support/app.js';

const PUBLIC_URL = 'http://127.0.0.1:3000';
const METADATA = `${PUBLIC_URL}/.well-known/oauth-protected-resource`;

let idp: TestIssuer;
before(async () => {
  idp = await startTestIssuer();
});
after(() => idp.close());

function registry(): ToolRegistry {
  const tools = new ToolRegistry();
  tools.register(Echo);
  tools.register(NoArgs);
  return tools;
}

const echo = (app: FastifyInstance, token: string) =>
  app.inject({ method: 'POST', url: '/tools/Echo', headers: { authorization: `Bearer ${token}` }, payload: { text: 'hi' } });

async function assertInvalidToken(response: Awaited<ReturnType<typeof echo>>, message: string): Promise<void> {
  assert.equal(response.statusCode, 401, response.body);
  assert.deepEqual(response.json(), { content: [{ type: 'text', text: message }], isError: true, error: { code: 'UNAUTHORIZED', message } });
  assert.equal(
    response.headers['www-authenticate'],
    `Bearer realm="toolport", error="invalid_token", error_description="${message.replaceAll('"', "'")}", resource_metadata="${METADATA}"`,
  );
}

/** A token signed with the issuer's own key, header and claims as an attacker who held it (or a broken issuer) would write them. */
async function signed(header: Record<string, unknown>, claims: Record<string, unknown>): Promise<string> {
  const real = await idp.clientCredentials({ resource: PUBLIC_URL, scope: 'tools:*' });
  const b64 = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
  // SignJWT checks the header's typ; the signature is made over the raw parts instead.
  const key = await importJWK(idp.signingKey, 'RS256');
  const input = `${b64({ alg: 'RS256', kid: idp.signingKey.kid, ...header })}.${b64({ ...decodeJwt(real), ...claims })}`;
  const signature = new Uint8Array(
    await crypto.subtle.sign('RSASSA-PKCS1-v1_5', key as Parameters<typeof crypto.subtle.sign>[1], new TextEncoder().encode(input)),
  );
  return `${input}.${Buffer.from(signature).toString('base64url')}`;
}

describe('claims and headers of the wrong type', () => {
  test('a typ header that is a number, an array or an object is a 401, not a 500', async (t) => {
    const app = await appWith(registry(), { oauth: await openResourceServer(resourceServerSettings(idp.issuer, PUBLIC_URL)) }, t);
    for (const typ of [1, ['at+jwt'], { at: 'jwt' }, null, true]) {
      await assertInvalidToken(await echo(app, await signed({ typ }, {})), "The token's type (typ) is not a string.");
    }
    // Other header fields of the wrong type: refused as well, never a 500.
    for (const header of [{ kid: 5 }, { kid: ['a'] }, { crit: 'exp' }, { crit: [1] }]) {
      const response = await echo(app, await signed({ typ: 'at+jwt', ...header }, {}));
      assert.equal(response.statusCode, 401, `${JSON.stringify(header)}: ${response.body}`);
    }
    // The same signing path makes a token that is accepted.
    assert.equal((await echo(app, await signed({ typ: 'at+jwt' }, {}))).statusCode, 200);
  });

  test('a claim of the wrong type is a 401 naming it', async (t) => {
    const app = await appWith(registry(), { oauth: await openResourceServer(resourceServerSettings(idp.issuer, PUBLIC_URL)) }, t);
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ exp: String(Math.floor(Date.now() / 1000) + 600) }, "The access token's exp claim is not of the type it must have."],
      [{ iat: 'now' }, "The access token's iat claim is not of the type it must have."],
      [{ nbf: [1] }, "The access token's nbf claim is not of the type it must have."],
      [{ sub: 7 }, "The access token's sub claim is not a non-empty string."],
      [{ client_id: { id: 'x' } }, "The access token's client_id claim is not a non-empty string."],
      [{ scope: ['tools:*'] }, "The access token's scope claim is not a string of space-separated scopes."],
      [{ scope: undefined, scp: [1, 2] }, "The access token's scp claim is not a string or an array of strings."],
      [{ aud: 3000 }, `The access token was not issued for this server: its audience (aud) must include ${PUBLIC_URL} or ${PUBLIC_URL}/mcp.`],
      [{ iss: ['x'] }, 'The access token was issued by an issuer this server does not accept.'],
    ];
    for (const [claims, message] of cases) await assertInvalidToken(await echo(app, await signed({ typ: 'at+jwt' }, claims)), message);
  });
});

/** toolport whose introspection endpoint (a hand-rolled issuer: a real one does not answer this) answers `answer` for every token. */
async function introspecting(t: { after(fn: () => Promise<unknown>): void }, answer: Record<string, unknown>): Promise<FastifyInstance> {
  const issuer = 'http://127.0.0.1:1';
  const fetchFn = (async () => new Response(JSON.stringify(answer), { headers: { 'content-type': 'application/json' } })) as typeof fetch;
  const audiences = defaultAudiences(PUBLIC_URL);
  const introspector = new Introspector({ endpoint: `${issuer}/introspect`, client: { id: 'toolport', secret: 's' }, issuer, audiences, fetchFn });
  const verifier = new JwtVerifier({ issuers: new Map(), audiences });
  const tokens = new AccessTokens({ verifier, mapper: new IdentityMapper(), introspector });
  const metadata = {
    issuer,
    jwksUri: undefined,
    authorizationEndpoint: undefined,
    tokenEndpoint: undefined,
    introspectionEndpoint: `${issuer}/introspect`,
    grantTypes: [],
  };
  return appWith(registry(), { oauth: { tokens, publicUrl: PUBLIC_URL, issuers: [metadata], mapping: EMPTY_MAPPING, scopes: undefined } }, t);
}

describe('introspection answers', () => {
  const now = () => Math.floor(Date.now() / 1000);
  const active = () => ({ active: true, sub: 'alice', aud: PUBLIC_URL, scope: 'tools:Echo', exp: now() + 600 });

  test('a future nbf (past the clock skew) is refused; one within it is accepted', async (t) => {
    await assertInvalidToken(await echo(await introspecting(t, { ...active(), nbf: now() + 120 }), 'opaque-1'), 'The access token is not valid yet.');
    await assertInvalidToken(await echo(await introspecting(t, { ...active(), iat: now() + 120 }), 'opaque-2'), 'The access token is not valid yet.');
    assert.equal((await echo(await introspecting(t, { ...active(), nbf: now() + 10 }), 'opaque-3')).statusCode, 200);
  });

  test('token_type refresh_token (or any other that is not an access token) is refused; absent, Bearer and access_token are accepted', async (t) => {
    for (const type of ['refresh_token', 'urn:ietf:params:oauth:token-type:refresh_token', 'N_A', 7]) {
      await assertInvalidToken(
        await echo(await introspecting(t, { ...active(), token_type: type }), 'opaque'),
        `The token's type (token_type) is ${JSON.stringify(type)}, not an access token's (Bearer).`,
      );
    }
    for (const type of [undefined, 'Bearer', 'bearer', 'access_token', 'urn:ietf:params:oauth:token-type:access_token']) {
      assert.equal((await echo(await introspecting(t, { ...active(), token_type: type }), 'opaque')).statusCode, 200, String(type));
    }
  });

  test('dates and names of the wrong type are refused', async (t) => {
    await assertInvalidToken(
      await echo(await introspecting(t, { ...active(), exp: String(now() + 600) }), 'o'),
      "The access token's exp claim is not a number.",
    );
    await assertInvalidToken(await echo(await introspecting(t, { ...active(), nbf: 'later' }), 'o'), "The access token's nbf claim is not a number.");
    await assertInvalidToken(await echo(await introspecting(t, { ...active(), sub: 1 }), 'o'), "The access token's sub claim is not a non-empty string.");
    await assertInvalidToken(
      await echo(await introspecting(t, { ...active(), scope: ['tools:Echo'] }), 'o'),
      "The access token's scope claim is not a string of space-separated scopes.",
    );
  });
});

describe('the OpenAPI documents follow the caller scope', () => {
  test('/openapi.json and /docs/json list only the tools a token grants, as /openapi.tools.json does', async (t) => {
    const app = await appWith(registry(), { oauth: await openResourceServer(resourceServerSettings(idp.issuer, PUBLIC_URL)) }, t);
    const paths = async (url: string, token: string) => {
      const response = await app.inject({ url, headers: { authorization: `Bearer ${token}` } });
      assert.equal(response.statusCode, 200, response.body);
      return Object.keys((response.json() as { paths: object }).paths).filter((path) => path.startsWith('/tools/') && path !== '/tools/{name}');
    };
    const one = await idp.clientCredentials({ resource: PUBLIC_URL, scope: 'tools:Echo' });
    const every = await idp.clientCredentials({ resource: PUBLIC_URL, scope: 'tools:*' });
    for (const url of ['/openapi.json', '/docs/json', '/openapi.tools.json']) {
      assert.deepEqual(await paths(url, one), ['/tools/Echo'], url);
      assert.deepEqual(await paths(url, every), ['/tools/Echo', '/tools/NoArgs'], url);
    }
    const none = await idp.clientCredentials({ resource: PUBLIC_URL, scope: 'openid' });
    assert.deepEqual(await paths('/openapi.json', none), []);
    // The service routes stay, whatever the scope.
    const document = (await app.inject({ url: '/openapi.json', headers: { authorization: `Bearer ${none}` } })).json() as { paths: object };
    assert.ok(['/healthz', '/tools', '/tools/{name}', '/calls'].every((path) => path in document.paths));
    // The YAML form is the whole document: a scoped caller does not get it.
    const yaml = await app.inject({ url: '/docs/yaml', headers: { authorization: `Bearer ${one}` } });
    assert.equal(yaml.statusCode, 404);
    const message = 'Route GET /docs/yaml not found.';
    assert.deepEqual(yaml.json(), { content: [{ type: 'text', text: message }], isError: true, error: { code: 'ROUTE_NOT_FOUND', message } });
  });
});
