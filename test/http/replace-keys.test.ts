import assert from 'node:assert/strict';
import type { KeySpec } from '#src/auth/keyring.js';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { formatTools } from '#src/core/formats.js';
import { Echo } from '#src/tools/echo.js';
import { controllableTool, Nested, NoArgs } from '../fixtures/tools.js';
import { appWith } from '../support/app.js';

const ADMIN: KeySpec = { label: 'admin', key: 'admin-secret-0123456789abcdef' };
const BOT: KeySpec = { label: 'ci-bot', key: 'ci-bot-secret-0123456789abcdef', tools: ['Echo', 'NoArgs'] };
const NEW: KeySpec = { label: 'new', key: 'new-secret-0123456789abcdef', tools: ['Nested'] };

const bearer = (key: KeySpec) => ({ authorization: `Bearer ${key.key}` });
const echo = (key: KeySpec) => ({ method: 'POST' as const, url: '/tools/Echo', headers: bearer(key), payload: { text: 'hi' } });
const INVALID = {
  content: [{ type: 'text', text: 'The API key is not valid.' }],
  isError: true,
  error: { code: 'UNAUTHORIZED', message: 'The API key is not valid.' },
};

test('replaceKeys: a key left out gets the 401 of an unknown key from its next request on, though its token was remembered', async (t) => {
  const app = await appWith([Echo, NoArgs, Nested], { apiKeys: [ADMIN, BOT] });
  t.after(() => app.close());
  // Twice: the second answer comes from the remembered token.
  assert.equal((await app.inject(echo(BOT))).statusCode, 200);
  assert.equal((await app.inject(echo(BOT))).statusCode, 200);
  app.toolport.replaceKeys([ADMIN]);
  for (const request of [echo(BOT), { url: '/tools', headers: bearer(BOT) }]) {
    const res = await app.inject(request);
    assert.equal(res.statusCode, 401);
    assert.equal(res.headers['www-authenticate'], 'Bearer realm="toolport", error="invalid_token"');
    assert.deepEqual(res.json(), INVALID);
  }
  assert.equal((await app.inject(echo(ADMIN))).statusCode, 200);
});

test('replaceKeys: a removed key is refused on every one of 200 concurrent requests over kept-alive connections it used before', async (t) => {
  const app = await appWith([Echo, NoArgs, Nested], { apiKeys: [ADMIN, BOT] });
  t.after(() => app.close());
  await app.listen({ port: 0, host: '127.0.0.1' });
  const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/tools/Echo`;
  const send = () => fetch(url, { method: 'POST', headers: { ...bearer(BOT), 'content-type': 'application/json' }, body: '{"text":"hi"}' });
  const warm = await Promise.all(Array.from({ length: 20 }, send));
  assert.deepEqual(new Set(warm.map((r) => r.status)), new Set([200]));
  await Promise.all(warm.map((r) => r.arrayBuffer()));
  app.toolport.replaceKeys([ADMIN]);
  const after = await Promise.all(Array.from({ length: 200 }, send));
  const bodies = await Promise.all(after.map((r) => r.json()));
  assert.deepEqual(new Set(after.map((r) => r.status)), new Set([401]));
  for (const body of bodies) assert.deepEqual(body, INVALID);
});

test('replaceKeys: a key whose tools changed gets its new scope in calls and lists; a new key with a new scope works and lists its tools', async (t) => {
  const app = await appWith([Echo, NoArgs, Nested], { apiKeys: [ADMIN, BOT] });
  t.after(() => app.close());
  assert.equal((await app.inject(echo(BOT))).statusCode, 200);
  app.toolport.replaceKeys([ADMIN, { ...BOT, tools: ['NoArgs'] }, NEW]);
  const refused = await app.inject(echo(BOT));
  assert.equal(refused.statusCode, 403);
  assert.deepEqual(refused.json(), {
    content: [{ type: 'text', text: 'API key "ci-bot" may not use tool "Echo"; it may use NoArgs.' }],
    isError: true,
    error: { code: 'FORBIDDEN', message: 'API key "ci-bot" may not use tool "Echo"; it may use NoArgs.', details: { tool: 'Echo', available: ['NoArgs'] } },
  });
  assert.equal((await app.inject({ method: 'POST', url: '/tools/NoArgs', headers: bearer(BOT) })).statusCode, 200);
  for (const format of ['anthropic', 'openai', 'mcp'] as const) {
    assert.deepEqual((await app.inject({ url: `/tools?format=${format}`, headers: bearer(BOT) })).json(), formatTools([NoArgs], format), format);
    assert.deepEqual((await app.inject({ url: `/tools?format=${format}`, headers: bearer(NEW) })).json(), formatTools([Nested], format), format);
  }
  const nested = await app.inject({ method: 'POST', url: '/tools/Nested', headers: bearer(NEW), payload: { name: 'n', count: 1, options: { tags: [] } } });
  assert.equal(nested.statusCode, 200);
  assert.equal(nested.json().isError, false);
  const mcp = await app.inject({
    method: 'POST',
    url: '/mcp',
    headers: { ...bearer(NEW), 'content-type': 'application/json', 'mcp-protocol-version': '2025-11-25' },
    payload: { jsonrpc: '2.0', id: 1, method: 'tools/list' },
  });
  assert.deepEqual(
    (mcp.json() as { result: { tools: Array<{ name: string }> } }).result.tools.map((tool) => tool.name),
    ['Nested'],
  );
  assert.equal(app.toolScopes.length, 2);
});

test("replaceKeys makes the new scopes' default list at once; the other formats are made by their first request", async (t) => {
  const app = await appWith([Echo, NoArgs, Nested], { apiKeys: [ADMIN, BOT] });
  t.after(() => app.close());
  const made = t.mock.method(app.toolport.gateway.registry, 'listBytes');
  app.toolport.replaceKeys([ADMIN, NEW]);
  const scope = app.toolScopes.find((s) => s.has('Nested'))!;
  const forScope = made.mock.calls
    .filter((call) => call.arguments[1] === scope)
    .map((call) => `${call.arguments[0]}${call.arguments[2]?.strict ? '+strict' : ''}`);
  assert.deepEqual(forScope, ['anthropic']);
  const before = app.toolport.gateway.registry.listBytes('anthropic', scope);
  assert.equal(app.toolport.gateway.registry.listBytes('anthropic', scope), before, 'made once, then kept');
});

test('replaceKeys: a call that began before its key was removed finishes and answers 200', async (t) => {
  const slow = controllableTool();
  const app = await appWith([Echo, slow.tool], { apiKeys: [ADMIN, BOT] });
  t.after(() => app.close());
  const inFlight = app.inject({ method: 'POST', url: '/tools/Slow', headers: { authorization: `Bearer ${ADMIN.key}` }, payload: {} });
  await slow.started;
  app.toolport.replaceKeys([BOT]);
  assert.equal((await app.inject(echo(ADMIN))).statusCode, 401);
  slow.release('finished');
  const res = await inFlight;
  assert.equal(res.statusCode, 200);
  assert.deepEqual(res.json(), { content: [{ type: 'text', text: 'finished' }], isError: false });
});

test('replaceKeys: the rate limit counted by label goes on for a key kept; a new key gets a budget of its own', async (t) => {
  const app = await appWith([Echo, NoArgs, Nested], { apiKeys: [ADMIN, BOT], rateLimit: 2 });
  t.after(() => app.close());
  assert.equal((await app.inject(echo(BOT))).statusCode, 200);
  assert.equal((await app.inject(echo(BOT))).statusCode, 200);
  app.toolport.replaceKeys([ADMIN, { ...BOT, tools: ['Echo'] }, { ...NEW, tools: ['Echo'] }]);
  const limited = await app.inject(echo(BOT));
  assert.equal(limited.statusCode, 429);
  assert.equal(limited.json().error.message, 'Rate limit exceeded: key "ci-bot" may make 2 requests per minute; retry in 60 s.');
  assert.equal((await app.inject(echo(NEW))).statusCode, 200);
  assert.equal((await app.inject(echo(NEW))).statusCode, 200);
  assert.equal((await app.inject(echo(NEW))).statusCode, 429);
});

test('replaceKeys refuses, changing nothing: on an app without keys, with no keys, with a workspace that has no tools bound', async (t) => {
  const open = await appWith([Echo, NoArgs, Nested], { apiKeys: [] });
  t.after(() => open.close());
  assert.throws(() => open.toolport.replaceKeys([ADMIN]), { message: 'The server was started without API keys: a reload cannot switch authentication on.' });
  assert.equal((await open.inject({ method: 'POST', url: '/tools/Echo', payload: { text: 'hi' } })).statusCode, 200);

  const app = await appWith([Echo, NoArgs, Nested], { apiKeys: [ADMIN, BOT] });
  t.after(() => app.close());
  assert.throws(() => app.toolport.replaceKeys([]), { message: 'A reload must leave at least one API key.' });
  assert.throws(() => app.toolport.replaceKeys([{ ...NEW, workspace: '/srv/nowhere' }]), {
    message: 'No tools are bound to the workspace of key "new" (/srv/nowhere).',
  });
  assert.equal((await app.inject(echo(BOT))).statusCode, 200);
  assert.equal((await app.inject(echo(NEW))).statusCode, 401);
});
