import assert from 'node:assert/strict';
import type { KeySpec } from '#src/auth/keyring.js';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import { formatTools } from '#src/core/formats.js';
import { ToolRegistry } from '#src/core/registry.js';
import { buildApp } from '#src/http/app.js';
import { createLogger } from '#src/infra/logger.js';
import { Echo } from '#src/tools/echo.js';
import { Nested, NoArgs } from '../../fixtures/tools.js';
import { appWith } from '../../support/app.js';
import { errorBody } from '#src/core/errors.js';

const FULL_KEY = 'full-access-secret-0123456789';
const OTHER_KEY = 'second-full-secret-0123456789';
const SCOPED_KEY = 'ci-bot-secret-0123456789abcdef';
const KEYS: KeySpec[] = [
  { label: 'key-1', key: FULL_KEY },
  { label: 'key-2', key: OTHER_KEY },
  { label: 'ci-bot', key: SCOPED_KEY, tools: ['NoArgs', 'Echo'] },
];
const TOOLS = [Echo, NoArgs, Nested];

const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

const MISSING = errorBody('UNAUTHORIZED', 'Authentication required: send an API key in the header "Authorization: Bearer <key>".');
const MALFORMED = errorBody('UNAUTHORIZED', 'The Authorization header must have the form "Bearer <key>".');
const INVALID = errorBody('UNAUTHORIZED', 'The API key is not valid.');
const CHALLENGE = 'Bearer realm="toolport"';
const INVALID_CHALLENGE = 'Bearer realm="toolport", error="invalid_token"';

function forbidden(tool: string) {
  return errorBody('FORBIDDEN', `API key "ci-bot" may not use tool "${tool}"; it may use NoArgs, Echo.`, { tool, available: ['NoArgs', 'Echo'] });
}

test('with keys configured, a call without an Authorization header is a 401 with a Bearer challenge', async (t) => {
  const app = await appWith(TOOLS, { apiKeys: KEYS });
  t.after(() => app.close());
  const res = await app.inject({ method: 'POST', url: '/tools/Echo', payload: { text: 'hi' } });
  assert.equal(res.statusCode, 401);
  assert.equal(res.headers['www-authenticate'], CHALLENGE);
  assert.match(res.headers['content-type'] as string, /^application\/json/);
  assert.deepEqual(res.json(), MISSING);
});

test('a malformed Authorization header or another scheme is a 401 with a Bearer challenge', async (t) => {
  const app = await appWith(TOOLS, { apiKeys: KEYS });
  t.after(() => app.close());
  for (const authorization of ['Basic dXNlcjpwYXNz', `Token ${FULL_KEY}`, 'Bearer', 'Bearer ', `Bearer ${FULL_KEY} extra`, FULL_KEY]) {
    const res = await app.inject({ url: '/tools', headers: { authorization } });
    assert.equal(res.statusCode, 401, authorization);
    assert.equal(res.headers['www-authenticate'], CHALLENGE, authorization);
    assert.deepEqual(res.json(), MALFORMED, authorization);
  }
});

test('a key that is not configured is a 401 with error="invalid_token" that says nothing about the real keys', async (t) => {
  const app = await appWith(TOOLS, { apiKeys: KEYS });
  t.after(() => app.close());
  for (const key of ['wrong-secret-0123456789', FULL_KEY.slice(0, -1), `${FULL_KEY}x`, FULL_KEY.toUpperCase(), 'x']) {
    const res = await app.inject({ method: 'POST', url: '/tools/Echo', headers: bearer(key), payload: { text: 'hi' } });
    assert.equal(res.statusCode, 401, key);
    assert.equal(res.headers['www-authenticate'], INVALID_CHALLENGE, key);
    assert.deepEqual(res.json(), INVALID, key);
  }
});

test('a configured key is let through, with the scheme in any case', async (t) => {
  const app = await appWith(TOOLS, { apiKeys: KEYS });
  t.after(() => app.close());
  for (const authorization of [`Bearer ${FULL_KEY}`, `bearer ${OTHER_KEY}`, `BEARER  ${FULL_KEY}`]) {
    const res = await app.inject({ method: 'POST', url: '/tools/Echo', headers: { authorization }, payload: { text: 'hi' } });
    assert.equal(res.statusCode, 200, authorization);
    assert.deepEqual(res.json(), { content: [{ type: 'text', text: 'hi' }], isError: false });
    assert.equal(res.headers['www-authenticate'], undefined);
  }
});

test('a TOOLPORT_API_KEYS key may call and list every served tool', async (t) => {
  const app = await appWith(TOOLS, { apiKeys: KEYS });
  t.after(() => app.close());
  const call = await app.inject({ method: 'POST', url: '/tools/Nested', headers: bearer(FULL_KEY), payload: { name: 'n', count: 1, options: { tags: [] } } });
  assert.equal(call.statusCode, 200);
  assert.equal(call.json().isError, false);
  const list = await app.inject({ url: '/tools', headers: bearer(FULL_KEY) });
  assert.equal(list.statusCode, 200);
  assert.deepEqual(list.json(), formatTools(TOOLS, 'anthropic'));
  const unknown = await app.inject({ method: 'POST', url: '/tools/Nope', headers: bearer(FULL_KEY) });
  assert.equal(unknown.statusCode, 404);
  assert.deepEqual(
    unknown.json(),
    errorBody('TOOL_NOT_FOUND', 'Tool "Nope" not found. Available tools: Echo, NoArgs, Nested.', { tool: 'Nope', available: ['Echo', 'NoArgs', 'Nested'] }),
  );
});

test('a scoped key may call the tools in its scope', async (t) => {
  const app = await appWith(TOOLS, { apiKeys: KEYS });
  t.after(() => app.close());
  const res = await app.inject({ method: 'POST', url: '/tools/Echo', headers: bearer(SCOPED_KEY), payload: { text: 'in scope' } });
  assert.equal(res.statusCode, 200);
  assert.deepEqual(res.json(), { content: [{ type: 'text', text: 'in scope' }], isError: false });
  const generic = await app.inject({ method: 'POST', url: '/tools/No%41rgs', headers: bearer(SCOPED_KEY) });
  assert.equal(generic.statusCode, 200);
});

test('a scoped key calling a tool outside its scope is a 403 naming the tool, the key and what it may use', async (t) => {
  const app = await appWith(TOOLS, { apiKeys: KEYS });
  t.after(() => app.close());
  const res = await app.inject({ method: 'POST', url: '/tools/Nested', headers: bearer(SCOPED_KEY), payload: { name: 'n', count: 1, options: { tags: [] } } });
  assert.equal(res.statusCode, 403);
  assert.equal(res.headers['www-authenticate'], undefined);
  assert.deepEqual(res.json(), forbidden('Nested'));
});

test('a scoped key gets the same 403 for a tool that does not exist, so it cannot probe beyond its scope', async (t) => {
  const app = await appWith(TOOLS, { apiKeys: KEYS });
  t.after(() => app.close());
  const exists = await app.inject({ method: 'POST', url: '/tools/Nested', headers: bearer(SCOPED_KEY) });
  // A name of the same length, so that even Content-Length cannot tell them apart.
  const missing = await app.inject({ method: 'POST', url: '/tools/Absent', headers: bearer(SCOPED_KEY) });
  assert.equal(missing.statusCode, 403);
  assert.deepEqual(missing.json(), forbidden('Absent'));
  const strip = (headers: Record<string, unknown>) => ({ ...headers, 'x-request-id': undefined, date: undefined });
  assert.deepEqual(strip(missing.headers), strip(exists.headers));
  assert.equal(missing.body, exists.body.replaceAll('Nested', 'Absent'));
});

test('a call outside the scope is refused before its body is read', async (t) => {
  const app = await appWith(TOOLS, { apiKeys: KEYS });
  t.after(() => app.close());
  const badJson = await app.inject({
    method: 'POST',
    url: '/tools/Nested',
    headers: { ...bearer(SCOPED_KEY), 'content-type': 'application/json' },
    payload: '{"name": ',
  });
  assert.equal(badJson.statusCode, 403);
  assert.deepEqual(badJson.json(), forbidden('Nested'));
  const wrongType = await app.inject({ method: 'POST', url: '/tools/Nested', headers: { ...bearer(SCOPED_KEY), 'content-type': 'text/plain' }, payload: 'x' });
  assert.equal(wrongType.statusCode, 403);
});

test('GET /tools with a scoped key lists only its tools, in registration order, in every format', async (t) => {
  const app = await appWith(TOOLS, { apiKeys: KEYS });
  t.after(() => app.close());
  const inScope = [Echo, NoArgs];
  for (const format of ['anthropic', 'openai', 'mcp'] as const) {
    const res = await app.inject({ url: `/tools?format=${format}`, headers: bearer(SCOPED_KEY) });
    assert.equal(res.statusCode, 200, format);
    assert.match(res.headers['content-type'] as string, /^application\/json/);
    assert.deepEqual(res.json(), formatTools(inScope, format), format);
  }
  const byDefault = await app.inject({ url: '/tools', headers: bearer(SCOPED_KEY) });
  assert.deepEqual(byDefault.json(), formatTools(inScope, 'anthropic'));
});

test('GET /tools/:name with a scoped key answers for its tools and is a 403 for any other name', async (t) => {
  const app = await appWith(TOOLS, { apiKeys: KEYS });
  t.after(() => app.close());
  const own = await app.inject({ url: '/tools/Echo?format=openai', headers: bearer(SCOPED_KEY) });
  assert.equal(own.statusCode, 200);
  assert.deepEqual(own.json(), formatTools([Echo], 'openai')[0]);
  for (const name of ['Nested', 'Nope']) {
    const res = await app.inject({ url: `/tools/${name}`, headers: bearer(SCOPED_KEY) });
    assert.equal(res.statusCode, 403, name);
    assert.deepEqual(res.json(), forbidden(name), name);
  }
});

test('keys with the same tools share their precomputed lists, and different scopes get their own', async (t) => {
  const registry = new ToolRegistry();
  for (const tool of TOOLS) registry.register(tool);
  const app = await buildApp({
    registry,
    apiKeys: [
      { label: 'a', key: 'a-secret-0123456789abcdef', tools: ['Echo', 'Nested'] },
      { label: 'b', key: 'b-secret-0123456789abcdef', tools: ['Nested', 'Echo'] },
      { label: 'c', key: 'c-secret-0123456789abcdef', tools: ['NoArgs'] },
    ],
  });
  t.after(() => app.close());
  assert.equal(app.toolScopes.length, 2);
  const names = async (key: string) => ((await app.inject({ url: '/tools', headers: bearer(key) })).json() as Array<{ name: string }>).map((x) => x.name);
  assert.deepEqual(await names('a-secret-0123456789abcdef'), ['Echo', 'Nested']);
  assert.deepEqual(await names('b-secret-0123456789abcdef'), ['Echo', 'Nested']);
  assert.deepEqual(await names('c-secret-0123456789abcdef'), ['NoArgs']);
});

test('health endpoints stay open with keys configured', async (t) => {
  const app = await appWith(TOOLS, { apiKeys: KEYS });
  t.after(() => app.close());
  for (const [url, body] of [
    ['/healthz', { status: 'ok' }],
    ['/readyz', { status: 'ready', callTasks: { working: 0 } }],
    ['/healthz?probe=1', { status: 'ok' }],
  ] as const) {
    const res = await app.inject({ url });
    assert.equal(res.statusCode, 200, url);
    assert.deepEqual(res.json(), body, url);
  }
  assert.equal((await app.inject({ method: 'HEAD', url: '/healthz' })).statusCode, 200);
});

test('/docs and /openapi.json need a key unless publicDocs', async (t) => {
  const closed = await appWith(TOOLS, { apiKeys: KEYS });
  t.after(() => closed.close());
  for (const url of ['/openapi.json', '/docs', '/docs/', '/docs/json', '/docs/static/index.html']) {
    const res = await closed.inject({ url });
    assert.equal(res.statusCode, 401, url);
    assert.equal(res.headers['www-authenticate'], CHALLENGE, url);
    assert.deepEqual(res.json(), MISSING, url);
  }
  const withKey = await closed.inject({ url: '/openapi.json', headers: bearer(FULL_KEY) });
  assert.equal(withKey.statusCode, 200);
  assert.equal(withKey.json().openapi, '3.1.0');

  const open = await appWith(TOOLS, { apiKeys: KEYS, publicDocs: true });
  t.after(() => open.close());
  assert.equal((await open.inject({ url: '/openapi.json' })).statusCode, 200);
  assert.equal((await open.inject({ url: '/docs/json' })).statusCode, 200);
  assert.equal((await open.inject({ url: '/docs' })).statusCode, 200);
  // Only the documentation is public.
  const tools = await open.inject({ url: '/tools' });
  assert.equal(tools.statusCode, 401);
  assert.deepEqual(tools.json(), MISSING);
});

test('an unknown route needs a key too, so an anonymous caller cannot map the API', async (t) => {
  const app = await appWith(TOOLS, { apiKeys: KEYS });
  t.after(() => app.close());
  const anonymous = await app.inject({ url: '/admin' });
  assert.equal(anonymous.statusCode, 401);
  assert.deepEqual(anonymous.json(), MISSING);
  const known = await app.inject({ url: '/admin', headers: bearer(FULL_KEY) });
  assert.equal(known.statusCode, 404);
  assert.deepEqual(known.json(), errorBody('ROUTE_NOT_FOUND', 'Route GET /admin not found.'));
});

test('without keys nothing asks for authentication', async (t) => {
  const app = await appWith(TOOLS, { apiKeys: [] });
  t.after(() => app.close());
  const res = await app.inject({ method: 'POST', url: '/tools/Nested', payload: { name: 'n', count: 1, options: { tags: [] } } });
  assert.equal(res.statusCode, 200);
  assert.equal((await app.inject({ url: '/openapi.json' })).statusCode, 200);
  assert.deepEqual((await app.inject({ url: '/tools' })).json(), formatTools(TOOLS, 'anthropic'));
});

test('request.principal names the key by label and scope, never by its secret', async (t) => {
  const app = await appWith(TOOLS, { apiKeys: KEYS });
  t.after(() => app.close());
  app.get('/whoami', async (request) => ({
    principal: request.principal,
    label: request.principal?.label,
    tools: request.principal?.tools && [...request.principal.tools],
    // The name it had before OAuth callers shared it, kept for plug-ins and embedders that read it.
    aliased: request.apiKey === request.principal,
  }));
  const scoped = await app.inject({ url: '/whoami', headers: bearer(SCOPED_KEY) });
  assert.deepEqual(scoped.json(), { principal: { label: 'ci-bot', tools: {} }, label: 'ci-bot', tools: ['NoArgs', 'Echo'], aliased: true });
  const full = await app.inject({ url: '/whoami', headers: bearer(FULL_KEY) });
  assert.deepEqual(full.json(), { principal: { label: 'key-1' }, label: 'key-1', aliased: true });
  assert.doesNotMatch(scoped.body + full.body, /secret/);
});

test('no log line holds a key, and the Authorization header is redacted when a request is logged', async (t) => {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk, _enc, done) {
      lines.push(...String(chunk).split('\n').filter(Boolean));
      done();
    },
  });
  const app = await appWith(TOOLS, { apiKeys: KEYS, logger: createLogger('trace', { destination, pretty: false }) });
  t.after(() => app.close());
  app.get('/log-headers', async (request) => {
    request.log.info({ headers: request.headers }, 'headers');
    return {};
  });
  await app.inject({ method: 'POST', url: '/tools/Echo', headers: bearer(FULL_KEY), payload: { text: 'hi' } });
  await app.inject({ method: 'POST', url: '/tools/Nested', headers: bearer(SCOPED_KEY), payload: {} });
  await app.inject({ method: 'POST', url: '/tools/Echo', headers: bearer('wrong-secret-0123456789'), payload: { text: 'hi' } });
  await app.inject({ url: '/log-headers', headers: bearer(FULL_KEY) });
  assert.ok(lines.length > 0);
  assert.doesNotMatch(lines.join('\n'), /secret-0123456789/);
  const logged = JSON.parse(lines.find((l) => l.includes('"msg":"headers"'))!);
  assert.equal(logged.headers.authorization, '[redacted]');
});
