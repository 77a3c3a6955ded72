import assert from 'node:assert/strict';
import { connect, type AddressInfo } from 'node:net';
import { test } from 'node:test';
import { isLocalHostHeader, isLocalOrigin } from '#src/http/guards/local-only.js';
import { Echo } from '#src/tools/echo.js';
import { NoArgs } from '../../fixtures/tools.js';
import { appWith } from '../../support/app.js';

function forbidden(message: string) {
  return { content: [{ type: 'text', text: message }], isError: true, error: { code: 'FORBIDDEN', message } };
}

const hostRefused = (what: string) =>
  forbidden(
    `Request refused: it has ${what}. This server listens on loopback only and, to protect against DNS rebinding, answers only to localhost, 127.0.0.1 or [::1].`,
  );
const originRefused = (origin: string) =>
  forbidden(
    `Request refused: it comes from the web origin ${JSON.stringify(origin)}, which is not local. This server listens on loopback only and, to protect against DNS rebinding and cross-site requests, refuses calls from pages of other sites.`,
  );

test('isLocalHostHeader takes localhost, 127.x.x.x and [::1], with or without a port', () => {
  for (const host of ['localhost', 'localhost:3000', 'LocalHost:80', '127.0.0.1', '127.0.0.1:3000', '127.9.8.7:1', '[::1]', '[::1]:3000', 'localhost:']) {
    assert.equal(isLocalHostHeader(host), true, host);
  }
});

test('isLocalHostHeader refuses other names, public addresses, bare IPv6 and a missing header', () => {
  for (const host of [
    undefined,
    '',
    'evil.example',
    'evil.example:3000',
    'localhost.evil.example',
    '127.0.0.1.nip.io',
    '0.0.0.0:3000',
    '10.0.0.1',
    '::1',
    '[::2]:3000',
    'localhost:3000:1',
    'localhost:x',
  ]) {
    assert.equal(isLocalHostHeader(host), false, String(host));
  }
});

test('isLocalOrigin takes http(s) origins on localhost, 127.x.x.x and [::1]; null and others are not local', () => {
  for (const origin of ['http://localhost', 'http://localhost:5173', 'https://127.0.0.1:3000', 'http://[::1]:3000', 'HTTP://LOCALHOST']) {
    assert.equal(isLocalOrigin(origin), true, origin);
  }
  for (const origin of [
    'null',
    '',
    'http://evil.example',
    'http://localhost.evil.example',
    'file://',
    'ftp://localhost',
    'http://localhost/path',
    'http://127.0.0.1@evil.example',
  ]) {
    assert.equal(isLocalOrigin(origin), false, origin);
  }
});

test('on loopback, a request whose Host is not local is a 403 (DNS rebinding protection)', async (t) => {
  const app = await appWith([Echo, NoArgs], { localOnly: true });
  t.after(() => app.close());
  const res = await app.inject({ method: 'POST', url: '/tools/NoArgs', headers: { host: 'evil.example:3000' } });
  assert.equal(res.statusCode, 403);
  assert.match(res.headers['content-type'] as string, /^application\/json/);
  assert.deepEqual(res.json(), hostRefused('the Host header "evil.example:3000", which is not local'));
  // Health endpoints get no exemption: a probe that reaches a loopback listener sends a local Host.
  const health = await app.inject({ url: '/healthz', headers: { host: 'evil.example' } });
  assert.equal(health.statusCode, 403);
});

test('on loopback, a request without a Host header is a 403', async (t) => {
  const app = await appWith([Echo, NoArgs], { localOnly: true });
  t.after(() => app.close());
  // Only a real socket can leave Host out: HTTP/1.0 allows it, and inject always adds one.
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as AddressInfo;
  const socket = connect(port, '127.0.0.1');
  socket.end('GET /tools HTTP/1.0\r\n\r\n');
  let response = '';
  for await (const chunk of socket) response += String(chunk);
  const [head, body] = response.split('\r\n\r\n') as [string, string];
  assert.match(head, /^HTTP\/1\.[01] 403 /);
  assert.deepEqual(JSON.parse(body), hostRefused('no Host header'));
});

test('on loopback, a request from a foreign web origin is a 403, even a bodiless POST', async (t) => {
  const app = await appWith([Echo, NoArgs], { localOnly: true });
  t.after(() => app.close());
  const res = await app.inject({ method: 'POST', url: '/tools/NoArgs', headers: { origin: 'https://evil.example' } });
  assert.equal(res.statusCode, 403);
  assert.deepEqual(res.json(), originRefused('https://evil.example'));
});

test('on loopback, Origin: null (sandboxed frames, file pages) is a 403', async (t) => {
  const app = await appWith([Echo, NoArgs], { localOnly: true });
  t.after(() => app.close());
  const res = await app.inject({ method: 'POST', url: '/tools/Echo', headers: { origin: 'null' }, payload: { text: 'x' } });
  assert.equal(res.statusCode, 403);
  assert.deepEqual(res.json(), originRefused('null'));
});

test('on loopback, local Host and Origin headers, or no Origin at all, are let through', async (t) => {
  const app = await appWith([Echo, NoArgs], { localOnly: true });
  t.after(() => app.close());
  for (const headers of [{}, { host: '127.0.0.1:3000' }, { host: '[::1]:3000', origin: 'http://localhost:5173' }, { origin: 'http://127.0.0.1:3000' }]) {
    const res = await app.inject({ method: 'POST', url: '/tools/Echo', headers, payload: { text: 'ok' } });
    assert.equal(res.statusCode, 200, JSON.stringify(headers));
    assert.deepEqual(res.json(), { content: [{ type: 'text', text: 'ok' }], isError: false });
  }
  const bodiless = await app.inject({ method: 'POST', url: '/tools/NoArgs', headers: { host: 'localhost:3000' } });
  assert.equal(bodiless.statusCode, 200);
  assert.deepEqual(bodiless.json(), { content: [{ type: 'text', text: 'done' }], isError: false });
});

test('on loopback, a cross-site form body is refused twice over: foreign Origin 403, and 415 for its type', async (t) => {
  const app = await appWith([Echo, NoArgs], { localOnly: true });
  t.after(() => app.close());
  const fromPage = await app.inject({
    method: 'POST',
    url: '/tools/Echo',
    headers: { origin: 'https://evil.example', 'content-type': 'text/plain' },
    payload: '{"text":"x"}',
  });
  assert.equal(fromPage.statusCode, 403);
  const noOrigin = await app.inject({ method: 'POST', url: '/tools/Echo', headers: { 'content-type': 'text/plain' }, payload: '{"text":"x"}' });
  assert.equal(noOrigin.statusCode, 415);
  assert.equal(noOrigin.json().error.code, 'UNSUPPORTED_MEDIA_TYPE');
});

test('the loopback guard runs before authentication', async (t) => {
  const app = await appWith([Echo, NoArgs], { localOnly: true, apiKeys: [{ label: 'key-1', key: 'a-secret-0123456789abcdef' }] });
  t.after(() => app.close());
  const res = await app.inject({ url: '/tools', headers: { host: 'evil.example' } });
  assert.equal(res.statusCode, 403);
  assert.equal(res.headers['www-authenticate'], undefined);
  const local = await app.inject({ url: '/tools' });
  assert.equal(local.statusCode, 401);
});

const KEY = { label: 'key-1', key: 'a-secret-0123456789abcdef' };
const withKey = { authorization: `Bearer ${KEY.key}` };
const ALLOWED_HOSTS_TEXT = 'localhost, 127.0.0.1, [::1] or the names in TOOLPORT_ALLOWED_HOSTS';

const hostNotAllowed = (what: string, loopback: boolean) =>
  forbidden(
    `Request refused: it has ${what}. ` +
      (loopback
        ? `This server listens on loopback only and, to protect against DNS rebinding, answers only to ${ALLOWED_HOSTS_TEXT}.`
        : `To protect against DNS rebinding, this server answers only to ${ALLOWED_HOSTS_TEXT}.`),
  );
const originRefusedUnauthenticated = (origin: string, allowing: boolean) =>
  forbidden(
    `Request refused: it comes from the web origin ${JSON.stringify(origin)}, which is not ${allowing ? 'local or allowed' : 'local'}. ` +
      'This server takes calls without an API key and, to protect against DNS rebinding and cross-site requests, refuses calls from ' +
      (allowing ? 'pages of sites not in TOOLPORT_ALLOWED_ORIGINS or TOOLPORT_CORS_ORIGINS.' : 'pages of other sites.'),
  );

/** Sends a request without a Host header (HTTP/1.0; inject always adds one) and returns status and body. */
async function withoutHost(app: Awaited<ReturnType<typeof appWith>>): Promise<{ head: string; body: unknown }> {
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as AddressInfo;
  const socket = connect(port, '127.0.0.1');
  socket.end('GET /tools HTTP/1.0\r\n\r\n');
  let response = '';
  for await (const chunk of socket) response += String(chunk);
  const [head, body] = response.split('\r\n\r\n') as [string, string];
  return { head, body: JSON.parse(body) };
}

test('without keys on a non-loopback address, a request from a foreign web origin is a 403, a bodiless POST and Origin: null included', async (t) => {
  const app = await appWith([Echo, NoArgs], { localOnly: false });
  t.after(() => app.close());
  for (const origin of ['http://rebind.example:3000', 'https://evil.example', 'null']) {
    const res = await app.inject({ method: 'POST', url: '/tools/NoArgs', headers: { host: 'rebind.example:3000', origin } });
    assert.equal(res.statusCode, 403, origin);
    assert.deepEqual(res.json(), originRefusedUnauthenticated(origin, false), origin);
  }
});

test('without keys on a non-loopback address and no allowed hosts, any Host is answered, and local origins or none pass', async (t) => {
  const app = await appWith([Echo, NoArgs], { localOnly: false });
  t.after(() => app.close());
  for (const headers of [{ host: 'toolport.internal:3000' }, { host: '10.0.0.5:3000', origin: 'http://localhost:5173' }, { origin: 'http://127.0.0.1:8080' }]) {
    const res = await app.inject({ method: 'POST', url: '/tools/NoArgs', headers });
    assert.equal(res.statusCode, 200, JSON.stringify(headers));
    assert.deepEqual(res.json(), { content: [{ type: 'text', text: 'done' }], isError: false });
  }
});

test('with keys on a non-loopback address, Origin is not checked: a page cannot know a key', async (t) => {
  const app = await appWith([Echo, NoArgs], { localOnly: false, apiKeys: [KEY] });
  t.after(() => app.close());
  for (const headers of [{ host: 'evil.example' }, { origin: 'https://evil.example' }, { origin: 'null' }]) {
    const res = await app.inject({ method: 'POST', url: '/tools/NoArgs', headers: { ...headers, ...withKey } });
    assert.equal(res.statusCode, 200, JSON.stringify(headers));
  }
});

test('allowedOrigins: a listed origin may call, on loopback and without keys elsewhere; any other is a 403 that names the setting', async (t) => {
  for (const localOnly of [true, false]) {
    const app = await appWith([Echo, NoArgs], { localOnly, allowedOrigins: ['https://app.example.com'] });
    t.after(() => app.close());
    const allowed = await app.inject({ method: 'POST', url: '/tools/Echo', headers: { origin: 'https://app.example.com' }, payload: { text: 'ok' } });
    assert.equal(allowed.statusCode, 200, `localOnly ${localOnly}`);
    // Same host, another scheme or port: another origin.
    for (const origin of ['http://app.example.com', 'https://app.example.com:8443', 'https://evil.example']) {
      const res = await app.inject({ method: 'POST', url: '/tools/Echo', headers: { origin }, payload: { text: 'x' } });
      assert.equal(res.statusCode, 403, `${origin}, localOnly ${localOnly}`);
      const expected = localOnly
        ? forbidden(
            `Request refused: it comes from the web origin ${JSON.stringify(origin)}, which is not local or allowed. This server listens on loopback only and, to protect against DNS rebinding and cross-site requests, refuses calls from pages of sites not in TOOLPORT_ALLOWED_ORIGINS or TOOLPORT_CORS_ORIGINS.`,
          )
        : originRefusedUnauthenticated(origin, true);
      assert.deepEqual(res.json(), expected);
    }
  }
});

test('allowedHosts on a non-loopback address: listed names (any case, any port) and local names are answered; any other Host is a 403', async (t) => {
  const app = await appWith([Echo, NoArgs], { localOnly: false, allowedHosts: ['toolport.example.com', '10.0.0.5', '[fd00::5]'] });
  t.after(() => app.close());
  for (const host of ['toolport.example.com', 'TOOLPORT.example.com:8443', '10.0.0.5:3000', '[fd00::5]:3000', 'localhost:3000', '127.0.0.1']) {
    const res = await app.inject({ method: 'POST', url: '/tools/NoArgs', headers: { host } });
    assert.equal(res.statusCode, 200, host);
  }
  for (const host of ['rebind.example:3000', 'toolport.example.com.evil.example', '10.0.0.6', 'toolport.example.com:x']) {
    const res = await app.inject({ method: 'GET', url: '/tools', headers: { host } });
    assert.equal(res.statusCode, 403, host);
    assert.deepEqual(res.json(), hostNotAllowed(`the Host header ${JSON.stringify(host)}, which is not local or allowed`, false), host);
  }
  // Health endpoints get no exemption.
  assert.equal((await app.inject({ url: '/healthz', headers: { host: 'rebind.example' } })).statusCode, 403);
});

test('allowedHosts on a non-loopback address: a request without a Host header is a 403', async (t) => {
  const app = await appWith([Echo, NoArgs], { localOnly: false, allowedHosts: ['toolport.example.com'] });
  t.after(() => app.close());
  const { head, body } = await withoutHost(app);
  assert.match(head, /^HTTP\/1\.[01] 403 /);
  assert.deepEqual(body, hostNotAllowed('no Host header', false));
});

test('allowedHosts on loopback: a reverse proxy forwarding a public name is answered, other names are still a 403', async (t) => {
  const app = await appWith([Echo, NoArgs], { localOnly: true, allowedHosts: ['toolport.example.com'] });
  t.after(() => app.close());
  const proxied = await app.inject({ method: 'POST', url: '/tools/NoArgs', headers: { host: 'toolport.example.com' } });
  assert.equal(proxied.statusCode, 200);
  const res = await app.inject({ method: 'POST', url: '/tools/NoArgs', headers: { host: 'rebind.example' } });
  assert.equal(res.statusCode, 403);
  assert.deepEqual(res.json(), hostNotAllowed('the Host header "rebind.example", which is not local or allowed', true));
});

test('allowedHosts applies with keys too, before the key is looked at', async (t) => {
  const app = await appWith([Echo, NoArgs], { localOnly: false, apiKeys: [KEY], allowedHosts: ['toolport.example.com'] });
  t.after(() => app.close());
  const res = await app.inject({ method: 'POST', url: '/tools/NoArgs', headers: { host: 'rebind.example', ...withKey } });
  assert.equal(res.statusCode, 403);
  assert.deepEqual(res.json(), hostNotAllowed('the Host header "rebind.example", which is not local or allowed', false));
  assert.equal((await app.inject({ method: 'POST', url: '/tools/NoArgs', headers: { host: 'toolport.example.com', ...withKey } })).statusCode, 200);
});

test('the Host check reads the Host header, never X-Forwarded-Host, even behind a trusted proxy', async (t) => {
  const app = await appWith([Echo, NoArgs], { localOnly: false, allowedHosts: ['toolport.example.com'], trustProxy: true });
  t.after(() => app.close());
  const forged = await app.inject({ method: 'GET', url: '/tools', headers: { host: 'rebind.example', 'x-forwarded-host': 'toolport.example.com' } });
  assert.equal(forged.statusCode, 403);
  assert.deepEqual(forged.json(), hostNotAllowed('the Host header "rebind.example", which is not local or allowed', false));
  const forwarded = await app.inject({ method: 'GET', url: '/tools', headers: { host: 'toolport.example.com', 'x-forwarded-host': 'rebind.example' } });
  assert.equal(forwarded.statusCode, 200);
});
