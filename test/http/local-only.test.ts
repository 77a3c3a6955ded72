import assert from 'node:assert/strict';
import { connect, type AddressInfo } from 'node:net';
import { test } from 'node:test';
import { ToolRegistry } from '../../src/core/registry.js';
import { buildApp, type AppOptions } from '../../src/http/app.js';
import { isLocalHostHeader, isLocalOrigin } from '../../src/http/local-only.js';
import { Echo } from '../../src/tools/echo.js';
import { NoArgs } from '../fixtures/tools.js';

async function appWith(options: Partial<AppOptions> = {}) {
  const registry = new ToolRegistry().register(Echo).register(NoArgs);
  return buildApp({ registry, localOnly: true, ...options });
}

function forbidden(message: string) {
  return { content: [{ type: 'text', text: message }], isError: true, error: { code: 'FORBIDDEN', message } };
}

const hostRefused = (what: string) =>
  forbidden(`Request refused: it has ${what}. This server listens on loopback only and, to protect against DNS rebinding, answers only to localhost, 127.0.0.1 or [::1].`);
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
  for (const host of [undefined, '', 'evil.example', 'evil.example:3000', 'localhost.evil.example', '127.0.0.1.nip.io', '0.0.0.0:3000', '10.0.0.1', '::1', '[::2]:3000', 'localhost:3000:1', 'localhost:x']) {
    assert.equal(isLocalHostHeader(host), false, String(host));
  }
});

test('isLocalOrigin takes http(s) origins on localhost, 127.x.x.x and [::1]; null and others are not local', () => {
  for (const origin of ['http://localhost', 'http://localhost:5173', 'https://127.0.0.1:3000', 'http://[::1]:3000', 'HTTP://LOCALHOST']) {
    assert.equal(isLocalOrigin(origin), true, origin);
  }
  for (const origin of ['null', '', 'http://evil.example', 'http://localhost.evil.example', 'file://', 'ftp://localhost', 'http://localhost/path', 'http://127.0.0.1@evil.example']) {
    assert.equal(isLocalOrigin(origin), false, origin);
  }
});

test('on loopback, a request whose Host is not local is a 403 (DNS rebinding protection)', async (t) => {
  const app = await appWith();
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
  const app = await appWith();
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
  const app = await appWith();
  t.after(() => app.close());
  const res = await app.inject({ method: 'POST', url: '/tools/NoArgs', headers: { origin: 'https://evil.example' } });
  assert.equal(res.statusCode, 403);
  assert.deepEqual(res.json(), originRefused('https://evil.example'));
});

test('on loopback, Origin: null (sandboxed frames, file pages) is a 403', async (t) => {
  const app = await appWith();
  t.after(() => app.close());
  const res = await app.inject({ method: 'POST', url: '/tools/Echo', headers: { origin: 'null' }, payload: { text: 'x' } });
  assert.equal(res.statusCode, 403);
  assert.deepEqual(res.json(), originRefused('null'));
});

test('on loopback, local Host and Origin headers, or no Origin at all, are let through', async (t) => {
  const app = await appWith();
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
  const app = await appWith();
  t.after(() => app.close());
  const fromPage = await app.inject({ method: 'POST', url: '/tools/Echo', headers: { origin: 'https://evil.example', 'content-type': 'text/plain' }, payload: '{"text":"x"}' });
  assert.equal(fromPage.statusCode, 403);
  const noOrigin = await app.inject({ method: 'POST', url: '/tools/Echo', headers: { 'content-type': 'text/plain' }, payload: '{"text":"x"}' });
  assert.equal(noOrigin.statusCode, 415);
  assert.equal(noOrigin.json().error.code, 'UNSUPPORTED_MEDIA_TYPE');
});

test('the loopback guard runs before authentication', async (t) => {
  const app = await appWith({ apiKeys: [{ label: 'key-1', key: 'a-secret-0123456789abcdef' }] });
  t.after(() => app.close());
  const res = await app.inject({ url: '/tools', headers: { host: 'evil.example' } });
  assert.equal(res.statusCode, 403);
  assert.equal(res.headers['www-authenticate'], undefined);
  const local = await app.inject({ url: '/tools' });
  assert.equal(local.statusCode, 401);
});

test('with localOnly off, Host and Origin are not checked', async (t) => {
  const app = await appWith({ localOnly: false });
  t.after(() => app.close());
  for (const headers of [{ host: 'evil.example' }, { origin: 'https://evil.example' }, { origin: 'null' }]) {
    const res = await app.inject({ method: 'POST', url: '/tools/NoArgs', headers });
    assert.equal(res.statusCode, 200, JSON.stringify(headers));
  }
});
