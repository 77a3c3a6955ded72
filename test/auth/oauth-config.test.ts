import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ConfigError, loadConfig } from '#src/config/config.js';

const CWD = '/srv/toolport';
const BASE = { TOOLPORT_OAUTH_ISSUER: 'https://idp.example.com/realms/main', TOOLPORT_PUBLIC_URL: 'https://tools.example.com/' };

function assertRejected(env: Record<string, string>, variable: string, message: string): void {
  assert.throws(
    () => loadConfig(env, CWD),
    (err: unknown) => {
      assert.ok(err instanceof ConfigError, `expected ConfigError, got ${String(err)}`);
      assert.equal(err.variable, variable);
      assert.equal(err.message, message);
      return true;
    },
  );
}

describe('loadConfig: OAuth', () => {
  test('without TOOLPORT_OAUTH_ISSUER there is no oauth entry, nor a permissions file', () => {
    const config = loadConfig({}, CWD);
    assert.equal('oauth' in config, false);
    assert.equal('permissionsFile' in config, false);
  });

  test('reads the issuers, the public URL without its trailing slash, and the companions', () => {
    const config = loadConfig(
      {
        ...BASE,
        TOOLPORT_OAUTH_ISSUER: 'https://idp.example.com/realms/main,http://127.0.0.1:8080',
        TOOLPORT_OAUTH_AUDIENCE: 'toolport,api://toolport',
        TOOLPORT_OAUTH_SCOPES: 'tools:*,tools:Read',
        TOOLPORT_OAUTH_TOOLS_CLAIM: 'realm_access.roles',
        TOOLPORT_OAUTH_MAPPING: 'oauth.json',
        TOOLPORT_OAUTH_CLIENT_ID: 'toolport',
        TOOLPORT_OAUTH_CLIENT_SECRET: 's3cret',
        TOOLPORT_PERMISSIONS: '/etc/toolport/permissions.json',
      },
      CWD,
    );
    assert.deepEqual(config.oauth, {
      issuers: ['https://idp.example.com/realms/main', 'http://127.0.0.1:8080'],
      publicUrl: 'https://tools.example.com',
      audiences: ['toolport', 'api://toolport'],
      jwksUrl: undefined,
      scopes: ['tools:*', 'tools:Read'],
      toolsClaim: 'realm_access.roles',
      mappingFile: 'oauth.json',
      introspectionClient: { id: 'toolport', secret: 's3cret' },
    });
    assert.equal(config.permissionsFile, '/etc/toolport/permissions.json');
  });

  test('an issuer over plain http off loopback, or not a URL, is refused', () => {
    const expected =
      'Invalid TOOLPORT_OAUTH_ISSUER: expected a comma-separated list of absolute https URLs (http only on a loopback host) without query, fragment or credentials, got ';
    assertRejected({ ...BASE, TOOLPORT_OAUTH_ISSUER: 'http://idp.example.com' }, 'TOOLPORT_OAUTH_ISSUER', `${expected}"http://idp.example.com"`);
    assertRejected({ ...BASE, TOOLPORT_OAUTH_ISSUER: 'idp.example.com' }, 'TOOLPORT_OAUTH_ISSUER', `${expected}"idp.example.com"`);
  });

  test('the public URL is required with an issuer, and must be absolute', () => {
    assertRejected(
      { TOOLPORT_OAUTH_ISSUER: BASE.TOOLPORT_OAUTH_ISSUER },
      'TOOLPORT_PUBLIC_URL',
      'TOOLPORT_PUBLIC_URL is required with TOOLPORT_OAUTH_ISSUER: the absolute URL clients reach toolport at',
    );
    for (const bad of ['/mcp', 'https://tools.example.com/?a=1', 'http://tools.example.com'])
      assertRejected(
        { ...BASE, TOOLPORT_PUBLIC_URL: bad },
        'TOOLPORT_PUBLIC_URL',
        `Invalid TOOLPORT_PUBLIC_URL: expected an absolute https URL (http only on a loopback host) without query, fragment or credentials, got ${JSON.stringify(bad)}`,
      );
  });

  test('a JWKS URL goes with one issuer only', () => {
    assertRejected(
      { ...BASE, TOOLPORT_OAUTH_ISSUER: 'https://a.example.com,https://b.example.com', TOOLPORT_OAUTH_JWKS_URL: 'https://a.example.com/jwks' },
      'TOOLPORT_OAUTH_JWKS_URL',
      'Invalid TOOLPORT_OAUTH_JWKS_URL: expected one issuer in TOOLPORT_OAUTH_ISSUER (each of several issuers names its own keys), got "https://a.example.com/jwks"',
    );
  });

  test('a client id without its secret, or a secret without its id, is refused without showing the secret', () => {
    assertRejected(
      { ...BASE, TOOLPORT_OAUTH_CLIENT_ID: 'toolport' },
      'TOOLPORT_OAUTH_CLIENT_SECRET',
      'TOOLPORT_OAUTH_CLIENT_SECRET is required with TOOLPORT_OAUTH_CLIENT_ID',
    );
    assertRejected(
      { ...BASE, TOOLPORT_OAUTH_CLIENT_SECRET: 'hidden' },
      'TOOLPORT_OAUTH_CLIENT_ID',
      'TOOLPORT_OAUTH_CLIENT_ID is required with TOOLPORT_OAUTH_CLIENT_SECRET',
    );
  });

  test('an OAuth setting without TOOLPORT_OAUTH_ISSUER is a mistake, not ignored', () => {
    assertRejected(
      { TOOLPORT_OAUTH_MAPPING: 'oauth.json' },
      'TOOLPORT_OAUTH_MAPPING',
      'TOOLPORT_OAUTH_MAPPING is set but TOOLPORT_OAUTH_ISSUER is not: set the issuer too, or unset TOOLPORT_OAUTH_MAPPING',
    );
  });
});
