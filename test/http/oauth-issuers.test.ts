import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { decodeJwt, importJWK, SignJWT } from 'jose';
import { parseMapping } from '#src/auth/mapping.js';
import { openResourceServer } from '#src/auth/open.js';
import { ToolRegistry } from '#src/core/registry.js';
import { buildApp } from '#src/http/app.js';
import { Echo } from '#src/tools/echo.js';
import { NoArgs } from '../fixtures/tools.js';
import { capturedLog } from '../support/log-capture.js';
import { resourceServerSettings, startTestIssuer, TEST_USER, type TestIssuer } from '../support/oidc-provider.js';

const PUBLIC_URL = 'http://127.0.0.1:3000';
const METADATA = `${PUBLIC_URL}/.well-known/oauth-protected-resource`;

// Two real authorization servers, each logging its user in as "alice": toolport's own (`home`)
// and a partner's (`partner`), whose administrators are not toolport's.
let home: TestIssuer;
let partner: TestIssuer;
before(async () => {
  [home, partner] = await Promise.all([startTestIssuer(), startTestIssuer()]);
});
after(async () => {
  await Promise.all([home.close(), partner.close()]);
});

async function toolport(
  t: { after(fn: () => Promise<unknown>): void },
  document: unknown,
): Promise<{ app: FastifyInstance; lines: Array<Record<string, unknown>> }> {
  const registry = new ToolRegistry();
  registry.register(Echo);
  registry.register(NoArgs);
  const settings = resourceServerSettings(home.issuer, PUBLIC_URL, { issuers: [home.issuer, partner.issuer] });
  const oauth = await openResourceServer(settings, { mapping: parseMapping(document, 'oauth.json') });
  const { lines, logger } = capturedLog();
  const app = await buildApp({ registry, oauth, logger });
  t.after(() => app.close());
  return { app, lines };
}

const echo = (app: FastifyInstance, token: string) =>
  app.inject({ method: 'POST', url: '/tools/Echo', headers: { authorization: `Bearer ${token}` }, payload: { text: 'hi' } });

/** A token of `issuer`, signed with its own key, as anyone who administers that issuer can mint: `claims` over a real token's. */
async function mintedBy(issuer: TestIssuer, claims: object): Promise<string> {
  const real = await issuer.clientCredentials({ resource: PUBLIC_URL, scope: 'openid' });
  return new SignJWT({ ...decodeJwt(real), ...claims })
    .setProtectedHeader({ alg: 'RS256', typ: 'at+jwt', kid: issuer.signingKey.kid! })
    .sign(await importJWK(issuer.signingKey, 'RS256'));
}

const MESSAGE = 'The access token does not grant the tool "Echo": it needs the scope "tools:Echo" (or "tools:*").';
const FORBIDDEN = {
  content: [{ type: 'text', text: MESSAGE }],
  isError: true,
  error: { code: 'FORBIDDEN', message: MESSAGE, details: { tool: 'Echo', scope: 'tools:Echo' } },
};

describe('mapping entries bound to their issuer', () => {
  test("another issuer's alice gets nothing of alice's entry, and its group admins nothing of the admins'", async (t) => {
    const { app, lines } = await toolport(t, {
      issuers: {
        [home.issuer]: { scopes: { staff: ['Echo'] }, subjects: { [TEST_USER]: { tools: ['Echo'] } }, groups: { admins: { tools: ['*'] } } },
      },
    });
    // The same login name at both issuers, through the authorization code flow.
    const homeAlice = await home.authorizationCode({ resource: PUBLIC_URL, scope: 'openid' });
    const partnerAlice = await partner.authorizationCode({ resource: PUBLIC_URL, scope: 'openid' });
    assert.deepEqual([decodeJwt(homeAlice).sub, decodeJwt(partnerAlice).sub], [TEST_USER, TEST_USER]);
    const calls = await Promise.all([
      echo(app, homeAlice),
      echo(app, partnerAlice),
      echo(app, await mintedBy(home, { sub: 'bob', groups: ['admins'] })),
      echo(app, await mintedBy(partner, { sub: 'mallory', groups: ['admins'] })),
      echo(app, await mintedBy(home, { sub: 'carol', scope: 'staff' })),
      echo(app, await mintedBy(partner, { sub: 'mallory', scope: 'staff' })),
    ]);
    assert.deepEqual(
      calls.map((response) => response.statusCode),
      [200, 403, 200, 403, 200, 403],
    );
    for (const refused of [calls[1]!, calls[3]!, calls[5]!]) {
      assert.deepEqual(refused.json(), FORBIDDEN);
      assert.equal(
        refused.headers['www-authenticate'],
        `Bearer realm="toolport", error="insufficient_scope", scope="tools:Echo", error_description="${MESSAGE.replaceAll('"', "'")}", resource_metadata="${METADATA}"`,
      );
    }
    // The audit lines keep the two alices apart too.
    const keys = lines.filter((line) => line.tool === 'Echo').map((line) => line.key);
    assert.ok(keys.includes(`sub:${TEST_USER}@${home.issuer}`) && keys.includes(`sub:${TEST_USER}@${partner.issuer}`), String(keys));
  });

  test("each issuer's section grants its own tokens, with its own groups claim", async (t) => {
    const { app } = await toolport(t, {
      issuers: { [home.issuer]: { groups: { ops: { tools: ['NoArgs'] } } }, [partner.issuer]: { groupsClaim: 'roles', groups: { ops: { tools: ['Echo'] } } } },
    });
    assert.equal((await echo(app, await mintedBy(partner, { sub: 'p', roles: ['ops'] }))).statusCode, 200);
    assert.equal((await echo(app, await mintedBy(partner, { sub: 'p', groups: ['ops'] }))).statusCode, 403);
    assert.equal((await echo(app, await mintedBy(home, { sub: 'h', groups: ['ops'] }))).statusCode, 403);
  });

  test('start-up refuses a mapping whose entries name no issuer while several are configured', async () => {
    const settings = resourceServerSettings(home.issuer, PUBLIC_URL, { issuers: [home.issuer, partner.issuer] });
    await assert.rejects(openResourceServer(settings, { mapping: parseMapping({ groups: { admins: { tools: ['*'] } } }, 'oauth.json') }), {
      name: 'OAuthSetupError',
      message:
        'TOOLPORT_OAUTH_MAPPING: the mapping: groups["admins"] names no issuer, and 2 issuers are configured (TOOLPORT_OAUTH_ISSUER), so a token of any of them could claim it; ' +
        'with several issuers, put every entry under "issuers": {"<issuer>": {"groups": {...}}}',
    });
  });
});
