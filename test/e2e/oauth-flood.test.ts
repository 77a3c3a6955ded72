import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, test } from 'node:test';
import { INTROSPECTION_CLIENT, OPAQUE_CLIENT, startTestIssuer, type TestIssuer } from '../support/oidc-provider.js';
import { kill, startServer, type ServerProcess } from '../support/server-process.js';

const PUBLIC_URL = 'http://127.0.0.1:3000';

let idp: TestIssuer;
let server: ServerProcess;
before(async () => {
  idp = await startTestIssuer();
  server = await startServer({
    TOOLPORT_OAUTH_ISSUER: idp.issuer,
    TOOLPORT_PUBLIC_URL: PUBLIC_URL,
    TOOLPORT_OAUTH_CLIENT_ID: INTROSPECTION_CLIENT.id,
    TOOLPORT_OAUTH_CLIENT_SECRET: INTROSPECTION_CLIENT.secret,
    // Clients are told apart by X-Forwarded-For, as behind a proxy: every test client is on loopback.
    TOOLPORT_TRUST_PROXY: 'true',
    TOOLPORT_TOOLS: 'Echo',
    TOOLPORT_BASH_SANDBOX: 'false',
  });
});
after(async () => {
  kill(server);
  await idp.close();
});

const call = (token: string | undefined, address: string) =>
  fetch(`${server.url}/tools/Echo`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-forwarded-for': address, ...(token === undefined ? {} : { authorization: `Bearer ${token}` }) },
    body: '{"text":"hi"}',
  }).then(async (response) => ({ status: response.status, body: await response.text() }));

async function until(ready: () => boolean, deadlineMs = 15_000): Promise<void> {
  const end = Date.now() + deadlineMs;
  while (!ready() && Date.now() < end) await new Promise((resolve) => setTimeout(resolve, 10));
}

test("the running server: one client's 48 connections of made-up opaque tokens leave real users' tokens their introspections", async (t) => {
  const users = await Promise.all(
    Array.from({ length: 12 }, () => idp.clientCredentials({ resource: PUBLIC_URL, scope: 'tools:Echo', client: OPAQUE_CLIENT })),
  );
  const base = idp.introspections;
  const provider = idp.holdIntrospections();
  t.after(() => provider.release());
  let settled = 0;
  const flood = Array.from({ length: 48 }, () => call(`made-up-${randomBytes(12).toString('hex')}`, '198.51.100.66').finally(() => (settled += 1)));
  await until(() => provider.held >= 4 && settled >= 36);
  const real = users.map((token, i) => call(token, `203.0.113.${i + 1}`));
  await until(() => provider.held >= 16);
  assert.equal(idp.introspections - base, 16, "the flood's share (4) and every real user's token (12) reached the provider");
  provider.release();
  assert.deepEqual(
    (await Promise.all(real)).map((response) => response.status),
    Array(12).fill(200),
  );
  const statuses = (await Promise.all(flood)).map((response) => response.status).sort();
  assert.deepEqual(statuses, [...Array(12).fill(401), ...Array(36).fill(503)]);
  assert.equal(idp.introspections - base, 24, '24 questions to the provider for 60 tokens');
});

test('the running server: 500 requests without credentials write at most 100 audit lines per 10 s', async () => {
  const before = server.lines.length;
  const started = Date.now();
  for (let wave = 0; wave < 5; wave += 1) {
    const answers = await Promise.all(Array.from({ length: 100 }, (_, i) => call(undefined, `192.0.2.${i + 1}`)));
    assert.ok(answers.every((response) => response.status === 401));
  }
  // 100 lines per error code and 10-second interval (the waves may straddle one).
  const intervals = Math.floor((Date.now() - started) / 10_000) + 2;
  const refused = server.lines.slice(before).filter((line) => line.msg === 'tool call refused');
  assert.ok(refused.length <= 100 * intervals, `${refused.length} audit lines for 500 refusals`);
});
