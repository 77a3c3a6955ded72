import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Echo } from '#src/tools/echo.js';
import { appWith } from '../../support/app.js';
import { errorBody } from '#src/core/errors.js';

const WEBUI = 'https://webui.example.com';
const ELSEWHERE = 'https://elsewhere.example';
const KEY = 'cors-test-secret-0123456789';
const ALLOWED_HEADERS = 'Authorization, Content-Type, X-Request-Id, Mcp-Protocol-Version, Mcp-Method, Mcp-Name, Mcp-Session-Id, Last-Event-ID';
const EXPOSED_HEADERS = 'X-Request-Id, Retry-After, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, WWW-Authenticate';

const preflight = (origin: string, url = '/tools/Echo', headers = 'authorization, content-type') => ({
  method: 'OPTIONS' as const,
  url,
  headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': headers },
});
const call = (origin: string, headers: Record<string, string> = {}) => ({
  method: 'POST' as const,
  url: '/tools/Echo',
  payload: '{"text":"hi"}',
  headers: { origin, 'content-type': 'application/json', ...headers },
});
const HI = { content: [{ type: 'text', text: 'hi' }], isError: false };

const refusedOnLoopback = (origin: string) =>
  errorBody(
    'FORBIDDEN',
    `Request refused: it comes from the web origin ${JSON.stringify(origin)}, which is not local or allowed. This server listens on loopback only and, to protect against DNS rebinding and cross-site requests, refuses calls from pages of sites not in TOOLPORT_ALLOWED_ORIGINS or TOOLPORT_CORS_ORIGINS.`,
  );

test('a browser preflight from a listed origin is answered 204 with the allowed methods and headers, before the Origin check and without a key', async (t) => {
  for (const options of [{ localOnly: true }, { apiKeys: [{ label: 'k', key: KEY }] }]) {
    const app = await appWith([Echo], { pressure: false, corsOrigins: [WEBUI], ...options });
    t.after(() => app.close());
    const res = await app.inject(preflight(WEBUI));
    assert.equal(res.statusCode, 204);
    assert.equal(res.body, '');
    assert.equal(res.headers['access-control-allow-origin'], WEBUI);
    assert.equal(res.headers['access-control-allow-methods'], 'GET, POST, DELETE');
    assert.equal(res.headers['access-control-allow-headers'], ALLOWED_HEADERS);
    assert.equal(res.headers['access-control-expose-headers'], EXPOSED_HEADERS);
    assert.equal(res.headers['access-control-max-age'], '600');
    assert.equal(res.headers['access-control-allow-credentials'], undefined);
    assert.match(String(res.headers.vary), /Origin/);
    assert.ok(res.headers['x-request-id']);
    // MCP's Streamable HTTP endpoint too, with its own headers.
    const mcp = await app.inject(preflight(WEBUI, '/mcp', 'content-type, mcp-protocol-version, mcp-method, mcp-name'));
    assert.equal(mcp.statusCode, 204);
    assert.equal(mcp.headers['access-control-allow-origin'], WEBUI);
  }
});

test('a browser preflight from an origin not listed gets no CORS headers: the Origin check refuses it on loopback, authentication with keys', async (t) => {
  const loopback = await appWith([Echo], { pressure: false, corsOrigins: [WEBUI], localOnly: true });
  t.after(() => loopback.close());
  const refused = await loopback.inject(preflight(ELSEWHERE));
  assert.equal(refused.statusCode, 403);
  assert.deepEqual(refused.json(), refusedOnLoopback(ELSEWHERE));
  assert.equal(refused.headers['access-control-allow-origin'], undefined);
  assert.equal(refused.headers['access-control-allow-methods'], undefined);

  const keyed = await appWith([Echo], { pressure: false, corsOrigins: [WEBUI], apiKeys: [{ label: 'k', key: KEY }] });
  t.after(() => keyed.close());
  const unauthenticated = await keyed.inject(preflight(ELSEWHERE));
  assert.equal(unauthenticated.statusCode, 401);
  assert.deepEqual(unauthenticated.json(), errorBody('UNAUTHORIZED', 'Authentication required: send an API key in the header "Authorization: Bearer <key>".'));
  assert.equal(unauthenticated.headers['access-control-allow-origin'], undefined);
});

test('a cross-origin POST from a listed origin runs the tool on a loopback server, and the page may read the answer', async (t) => {
  const app = await appWith([Echo], { pressure: false, corsOrigins: [WEBUI], localOnly: true });
  t.after(() => app.close());
  const res = await app.inject(call(WEBUI));
  assert.equal(res.statusCode, 200);
  assert.deepEqual(res.json(), HI);
  assert.equal(res.headers['access-control-allow-origin'], WEBUI);
  assert.equal(res.headers['access-control-expose-headers'], EXPOSED_HEADERS);
  assert.equal(res.headers['access-control-allow-methods'], undefined, 'preflight headers only on a preflight');
});

test('a cross-origin POST from an origin not listed is refused by the Origin check with 403, and carries no CORS headers', async (t) => {
  const app = await appWith([Echo], { pressure: false, corsOrigins: [WEBUI], localOnly: true });
  t.after(() => app.close());
  const res = await app.inject(call(ELSEWHERE));
  assert.equal(res.statusCode, 403);
  assert.deepEqual(res.json(), refusedOnLoopback(ELSEWHERE));
  assert.equal(res.headers['access-control-allow-origin'], undefined);
});

test('with keys, a listed page reads its refusals too (401 without a key, 429 over the limit), and its calls run with a key', async (t) => {
  const app = await appWith([Echo], { pressure: false, corsOrigins: [WEBUI], apiKeys: [{ label: 'k', key: KEY }], rateLimit: 1 });
  t.after(() => app.close());
  const anonymous = await app.inject(call(WEBUI));
  assert.equal(anonymous.statusCode, 401);
  assert.deepEqual(anonymous.json(), errorBody('UNAUTHORIZED', 'Authentication required: send an API key in the header "Authorization: Bearer <key>".'));
  assert.equal(anonymous.headers['access-control-allow-origin'], WEBUI);
  assert.equal(anonymous.headers['www-authenticate'], 'Bearer realm="toolport"');

  const ok = await app.inject(call(WEBUI, { authorization: `Bearer ${KEY}` }));
  assert.equal(ok.statusCode, 200);
  assert.deepEqual(ok.json(), HI);
  assert.equal(ok.headers['access-control-allow-origin'], WEBUI);

  const limited = await app.inject(call(WEBUI, { authorization: `Bearer ${KEY}` }));
  assert.equal(limited.statusCode, 429);
  assert.equal(limited.json().error.code, 'RATE_LIMITED');
  assert.equal(limited.headers['access-control-allow-origin'], WEBUI);
  assert.ok(limited.headers['retry-after']);
});

test('with keys on a non-loopback server, a POST from an origin not listed runs with its key but gets no CORS headers, so the browser keeps the answer from the page', async (t) => {
  const app = await appWith([Echo], { pressure: false, corsOrigins: [WEBUI], apiKeys: [{ label: 'k', key: KEY }] });
  t.after(() => app.close());
  const res = await app.inject(call(ELSEWHERE, { authorization: `Bearer ${KEY}` }));
  assert.equal(res.statusCode, 200);
  assert.deepEqual(res.json(), HI);
  assert.equal(res.headers['access-control-allow-origin'], undefined);
});

test('without TOOLPORT_CORS_ORIGINS there is no CORS: an OPTIONS request is an unknown route, and an allowed origin gets no CORS headers', async (t) => {
  const app = await appWith([Echo], { pressure: false, allowedOrigins: [WEBUI] });
  t.after(() => app.close());
  const options = await app.inject(preflight(WEBUI));
  assert.equal(options.statusCode, 404);
  assert.deepEqual(options.json(), errorBody('ROUTE_NOT_FOUND', 'Route OPTIONS /tools/Echo not found.'));
  assert.equal(options.headers['access-control-allow-origin'], undefined);
  const res = await app.inject(call(WEBUI));
  assert.equal(res.statusCode, 200);
  assert.equal(res.headers['access-control-allow-origin'], undefined);
});
