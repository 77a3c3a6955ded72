import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { openResourceServer } from '#src/auth/open.js';
import type { KeySpec } from '#src/auth/keyring.js';
import { Echo } from '#src/tools/echo.js';
import { startTestIssuer, type TestIssuer } from '../../support/oidc-provider.js';
import { appWith } from '../../support/app.js';

const PUBLIC_URL = 'https://tools.example.com';
const KEY: KeySpec = { label: 'ci', key: 'static-key-0123456789abcdef' };
const DISCOVERY_PATHS = [
  '/.well-known/oauth-protected-resource',
  '/.well-known/oauth-protected-resource/mcp',
  '/.well-known/oauth-authorization-server',
  '/.well-known/openid-configuration',
];

function notFound(method: string, path: string, instead: string) {
  const message = `Route ${method} ${path} not found: this server is not an OAuth authorization server; ${instead}.`;
  return { content: [{ type: 'text', text: message }], isError: true, error: { code: 'ROUTE_NOT_FOUND', message } };
}

describe('without OAuth', () => {
  test('with keys, the OAuth discovery paths and /register answer 404 saying a key is needed, not 401', async (t) => {
    const app = await appWith([Echo], { apiKeys: [KEY] }, t);
    const instead = 'it uses no OAuth: send an API key in the header "Authorization: Bearer <key>"';
    for (const path of DISCOVERY_PATHS) {
      const response = await app.inject({ method: 'GET', url: path });
      assert.equal(response.statusCode, 404, path);
      assert.deepEqual(response.json(), notFound('GET', path, instead));
      assert.equal(response.headers['www-authenticate'], undefined);
    }
    const register = await app.inject({ method: 'POST', url: '/register', payload: { redirect_uris: ['http://localhost/cb'] } });
    assert.equal(register.statusCode, 404);
    assert.deepEqual(register.json(), notFound('POST', '/register', instead));
    // Everything else still needs the key.
    assert.equal((await app.inject({ method: 'GET', url: '/tools' })).statusCode, 401);
  });

  test('without keys, they answer 404 too', async (t) => {
    const app = await appWith([Echo], {}, t);
    const response = await app.inject({ method: 'GET', url: '/.well-known/oauth-protected-resource' });
    assert.equal(response.statusCode, 404);
    assert.deepEqual(response.json(), notFound('GET', '/.well-known/oauth-protected-resource', 'it uses no OAuth and takes requests without credentials'));
  });
});

describe('with OAuth', () => {
  let idp: TestIssuer;
  before(async () => {
    idp = await startTestIssuer();
  });
  after(() => idp.close());

  const oauthApp = async (t: { after(fn: () => Promise<unknown>): void }, scopes?: string[]) =>
    appWith(
      [Echo],
      {
        apiKeys: [KEY],
        oauth: await openResourceServer({
          issuers: [idp.issuer],
          publicUrl: PUBLIC_URL,
          audiences: undefined,
          jwksUrl: undefined,
          scopes,
          toolsClaim: undefined,
          mappingFile: undefined,
          introspectionClient: undefined,
        }),
      },
      t,
    );

  test('the protected-resource metadata of the server and of /mcp name the issuer, the scopes and the header method, without credentials', async (t) => {
    const app = await oauthApp(t);
    for (const [path, resource] of [
      ['/.well-known/oauth-protected-resource', PUBLIC_URL],
      ['/.well-known/oauth-protected-resource/mcp', `${PUBLIC_URL}/mcp`],
    ] as const) {
      const response = await app.inject({ method: 'GET', url: path });
      assert.equal(response.statusCode, 200, path);
      assert.deepEqual(response.json(), {
        resource,
        authorization_servers: [idp.issuer],
        scopes_supported: ['tools:*', 'tools:Echo'],
        bearer_methods_supported: ['header'],
        resource_name: 'toolport',
      });
      assert.equal(response.headers['access-control-allow-origin'], '*');
    }
  });

  test('configured scopes are advertised instead', async (t) => {
    const app = await oauthApp(t, ['mcp:tools']);
    const response = await app.inject({ method: 'GET', url: '/.well-known/oauth-protected-resource' });
    assert.deepEqual((response.json() as { scopes_supported: string[] }).scopes_supported, ['mcp:tools']);
  });

  test('the authorization-server paths and /register answer 404 naming the metadata', async (t) => {
    const app = await oauthApp(t);
    const instead = `its authorization servers are named at ${PUBLIC_URL}/.well-known/oauth-protected-resource`;
    for (const [method, path] of [
      ['GET', '/.well-known/oauth-authorization-server'],
      ['GET', '/.well-known/openid-configuration'],
      ['POST', '/register'],
    ] as const) {
      const response = await app.inject({ method, url: path });
      assert.equal(response.statusCode, 404);
      assert.deepEqual(response.json(), notFound(method, path, instead));
    }
  });

  test('the OpenAPI document declares the OAuth scheme with the issuer endpoints beside the bearer scheme', async (t) => {
    const app = await oauthApp(t);
    const response = await app.inject({ method: 'GET', url: '/openapi.json', headers: { authorization: `Bearer ${KEY.key}` } });
    const document = response.json() as {
      components: { securitySchemes: Record<string, { type: string; flows?: Record<string, unknown> }> };
      security: unknown;
    };
    const { bearerAuth, oauth2 } = document.components.securitySchemes;
    assert.equal(bearerAuth?.type, 'http');
    assert.equal(oauth2?.type, 'oauth2');
    const scopes = { 'tools:*': 'Every tool.', 'tools:Echo': 'The tools tools:Echo names.' };
    assert.deepEqual(oauth2?.flows, {
      authorizationCode: { authorizationUrl: `${idp.issuer}/auth`, tokenUrl: `${idp.issuer}/token`, scopes },
      clientCredentials: { tokenUrl: `${idp.issuer}/token`, scopes },
    });
    assert.deepEqual(document.security, [{ bearerAuth: [] }, { oauth2: [] }]);
  });
});
