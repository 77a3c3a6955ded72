import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ToolRegistry } from '../../../src/core/registry.js';
import { buildApp, type AppOptions } from '../../../src/http/app.js';
import { Echo } from '../../../src/tools/echo.js';
import { NoArgs } from '../../fixtures/tools.js';

const FULL_KEY = 'tools-route-full-secret-0123456789';
const SCOPED_KEY = 'tools-route-scoped-secret-0123456789';

async function appWith(options: Partial<AppOptions> = {}) {
  return buildApp({ registry: new ToolRegistry().register(Echo).register(NoArgs), docs: false, pressure: false, ...options });
}

/** The headers of an answer, without the ones every answer carries (date, connection). */
function headersOf(res: { headers: Record<string, unknown> }): Record<string, unknown> {
  return Object.fromEntries(Object.entries(res.headers).filter(([name]) => !['date', 'connection', 'keep-alive'].includes(name)));
}

test('GET /tools answers the list as bytes with a strong ETag and Cache-Control: no-cache, the same tag every time', async (t) => {
  const app = await appWith();
  t.after(() => app.close());
  const first = await app.inject({ url: '/tools', headers: { 'x-request-id': 'list-1' } });
  assert.equal(first.statusCode, 200);
  const etag = first.headers.etag as string;
  assert.match(etag, /^"[\w-]{22}"$/);
  assert.deepEqual(headersOf(first), {
    'x-request-id': 'list-1',
    etag,
    'cache-control': 'no-cache',
    'content-type': 'application/json; charset=utf-8',
    'content-length': String(Buffer.byteLength(first.body)),
  });
  assert.deepEqual(first.json().map((tool: { name: string }) => tool.name), ['Echo', 'NoArgs']);
  const again = await app.inject({ url: '/tools' });
  assert.equal(again.headers.etag, etag);
  assert.equal(again.body, first.body);
  const openai = await app.inject({ url: '/tools?format=openai' });
  assert.notEqual(openai.headers.etag, etag, 'another format is another list');
});

test('GET /tools with If-None-Match naming its ETag is a 304 with no body; another tag gets the list', async (t) => {
  const app = await appWith();
  t.after(() => app.close());
  const etag = (await app.inject({ url: '/tools' })).headers.etag as string;
  for (const given of [etag, `W/${etag}`, `"other", ${etag}`, '*']) {
    const res = await app.inject({ url: '/tools', headers: { 'if-none-match': given, 'x-request-id': 'revalidate-1' } });
    assert.equal(res.statusCode, 304, given);
    assert.equal(res.body, '');
    assert.deepEqual(headersOf(res), { 'x-request-id': 'revalidate-1', etag, 'cache-control': 'no-cache' }, given);
  }
  const stale = await app.inject({ url: '/tools', headers: { 'if-none-match': '"stale"' } });
  assert.equal(stale.statusCode, 200);
  assert.equal(stale.headers.etag, etag);
  const openai = await app.inject({ url: '/tools?format=openai', headers: { 'if-none-match': etag } });
  assert.equal(openai.statusCode, 200, 'the tag of one format does not match another');
});

test('GET /tools gives each scope its own list and ETag; a key is checked before a 304', async (t) => {
  const app = await appWith({ apiKeys: [{ label: 'full', key: FULL_KEY }, { label: 'echo-only', key: SCOPED_KEY, tools: ['Echo'] }] });
  t.after(() => app.close());
  const full = await app.inject({ url: '/tools', headers: { authorization: `Bearer ${FULL_KEY}` } });
  const scoped = await app.inject({ url: '/tools', headers: { authorization: `Bearer ${SCOPED_KEY}` } });
  assert.deepEqual(scoped.json().map((tool: { name: string }) => tool.name), ['Echo']);
  assert.notEqual(scoped.headers.etag, full.headers.etag);
  const revalidated = await app.inject({ url: '/tools', headers: { authorization: `Bearer ${SCOPED_KEY}`, 'if-none-match': String(scoped.headers.etag) } });
  assert.equal(revalidated.statusCode, 304);
  const otherScope = await app.inject({ url: '/tools', headers: { authorization: `Bearer ${SCOPED_KEY}`, 'if-none-match': String(full.headers.etag) } });
  assert.equal(otherScope.statusCode, 200, "another scope's tag gets this scope's list");
  const anonymous = await app.inject({ url: '/tools', headers: { 'if-none-match': String(full.headers.etag) } });
  assert.equal(anonymous.statusCode, 401);
});
