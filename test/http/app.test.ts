import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Echo } from '#src/tools/echo.js';
import { controllableTool, Fails, Garbage, Nested, NoArgs, Throws } from '../fixtures/tools.js';
import { capturedLog } from '../support/log-capture.js';
import { appWith } from '../support/app.js';
import { errorBody } from '#src/core/errors.js';

const JSON_HEADERS = { 'content-type': 'application/json' };

test('POST /tools/:name returns the tool result with isError false', async (t) => {
  const app = await appWith([Echo]);
  t.after(() => app.close());
  const res = await app.inject({ method: 'POST', url: '/tools/Echo', payload: { text: 'hello' } });
  assert.equal(res.statusCode, 200);
  assert.match(res.headers['content-type'] as string, /^application\/json/);
  assert.deepEqual(res.json(), { content: [{ type: 'text', text: 'hello' }], isError: false });
});

test('POST /tools/:name returns 200 with isError true when the tool reports a failure', async (t) => {
  const app = await appWith([Fails]);
  t.after(() => app.close());
  const res = await app.inject({ method: 'POST', url: '/tools/Fails', payload: {} });
  assert.equal(res.statusCode, 200);
  assert.deepEqual(res.json(), { content: [{ type: 'text', text: 'it did not work' }], isError: true });
});

test('POST /tools/:name returns 200 with isError true when the tool throws, without a stack trace', async (t) => {
  const app = await appWith([Throws]);
  t.after(() => app.close());
  const res = await app.inject({ method: 'POST', url: '/tools/Throws', payload: {} });
  assert.equal(res.statusCode, 200);
  assert.deepEqual(res.json(), { content: [{ type: 'text', text: 'Tool "Throws" failed: disk on fire' }], isError: true });
});

test('POST /tools/:name returns 200 with isError true when the tool returns garbage', async (t) => {
  const app = await appWith([Garbage]);
  t.after(() => app.close());
  const res = await app.inject({ method: 'POST', url: '/tools/Garbage', payload: {} });
  assert.equal(res.statusCode, 200);
  assert.deepEqual(res.json(), {
    content: [{ type: 'text', text: 'Tool "Garbage" returned a malformed result: expected a content array, got a string.' }],
    isError: true,
  });
});

test('POST /tools/:name returns 200 with isError true when the tool misses its deadline, and aborts it', async (t) => {
  const slow = controllableTool('Slow', 20);
  const app = await appWith([slow.tool]);
  t.after(() => app.close());
  const res = await app.inject({ method: 'POST', url: '/tools/Slow', payload: {} });
  assert.equal(res.statusCode, 200);
  assert.deepEqual(res.json(), { content: [{ type: 'text', text: 'Tool "Slow" timed out after 20 ms and was aborted.' }], isError: true });
  const reason = await slow.aborted;
  assert.match(String(reason), /deadline of 20 ms exceeded/);
});

test('POST /tools/:name with no body at all runs the tool as with {}', async (t) => {
  const app = await appWith([NoArgs, Echo]);
  t.after(() => app.close());
  const ok = await app.inject({ method: 'POST', url: '/tools/NoArgs' });
  assert.equal(ok.statusCode, 200);
  assert.deepEqual(ok.json(), { content: [{ type: 'text', text: 'done' }], isError: false });

  const emptyJson = await app.inject({ method: 'POST', url: '/tools/NoArgs', headers: JSON_HEADERS, payload: '' });
  assert.equal(emptyJson.statusCode, 200);

  const noBody = await app.inject({ method: 'POST', url: '/tools/Echo' });
  const asEmpty = await app.inject({ method: 'POST', url: '/tools/Echo', payload: {} });
  assert.equal(noBody.statusCode, 400);
  assert.deepEqual(noBody.json(), asEmpty.json());
});

test('POST /tools/:name rejects a body that is not valid JSON with 400 INVALID_JSON', async (t) => {
  const app = await appWith([Echo]);
  t.after(() => app.close());
  const message = 'Request body is not valid JSON (or it holds a forbidden __proto__ or constructor.prototype key); send the tool input as a JSON object.';
  for (const payload of ['{"text": ', 'hello', '{"text":"a",}']) {
    const res = await app.inject({ method: 'POST', url: '/tools/Echo', headers: JSON_HEADERS, payload });
    assert.equal(res.statusCode, 400, payload);
    assert.deepEqual(res.json(), errorBody('INVALID_JSON', message));
  }
});

test('POST /tools/:name refuses __proto__ and constructor.prototype keys with 400 and leaves prototypes alone', async (t) => {
  const app = await appWith([Echo]);
  t.after(() => app.close());
  for (const payload of ['{"text":"a","__proto__":{"polluted":true}}', '{"text":"a","constructor":{"prototype":{"polluted":true}}}']) {
    const res = await app.inject({ method: 'POST', url: '/tools/Echo', headers: JSON_HEADERS, payload });
    assert.equal(res.statusCode, 400);
    assert.equal(res.json().error.code, 'INVALID_JSON');
  }
  assert.equal(({} as Record<string, unknown>).polluted, undefined);
});

test('POST /tools/:name rejects a body that is not an object with 400 INVALID_INPUT', async (t) => {
  const app = await appWith([Echo]);
  t.after(() => app.close());
  const cases: Array<[string, string]> = [
    ['[1,2]', 'an array'],
    ['"text"', 'a string'],
    ['42', 'a number'],
    ['null', 'null'],
    ['true', 'a boolean'],
  ];
  for (const [payload, got] of cases) {
    const res = await app.inject({ method: 'POST', url: '/tools/Echo', headers: JSON_HEADERS, payload });
    assert.equal(res.statusCode, 400, payload);
    const message = `Input for tool "Echo" must be a JSON object, got ${got}.`;
    assert.deepEqual(res.json(), errorBody('INVALID_INPUT', message, { violations: [{ path: '$', message: 'must be object' }] }));
  }
});

test('POST /tools/:name rejects input that fails the schema with 400, listing every violation with its JSON path', async (t) => {
  const app = await appWith([Nested]);
  t.after(() => app.close());
  const res = await app.inject({
    method: 'POST',
    url: '/tools/Nested',
    payload: { count: '3', options: { tags: ['a', 2], extra: 1 }, unknown: true },
  });
  assert.equal(res.statusCode, 400);
  const violations = [
    { path: '$.unknown', message: 'is not an allowed property' },
    { path: '$.name', message: 'is required' },
    { path: '$.count', message: 'must be integer' },
    { path: '$.options.extra', message: 'is not an allowed property' },
    { path: '$.options.tags[1]', message: 'must be string' },
  ];
  const body = res.json();
  assert.equal(body.error.code, 'INVALID_INPUT');
  assert.deepEqual(
    [...body.error.details.violations].sort((a, b) => a.path.localeCompare(b.path)),
    [...violations].sort((a, b) => a.path.localeCompare(b.path)),
  );
  for (const v of violations) assert.ok(body.content[0].text.includes(`- ${v.path}: ${v.message}`), v.path);
  assert.ok(body.content[0].text.startsWith('Invalid input for tool "Nested":\n'));
  assert.equal(body.content[0].text, body.error.message);
});

test('POST /tools/:name for an unknown tool is a 404 that names it and lists the available tools', async (t) => {
  const app = await appWith([Echo, NoArgs]);
  t.after(() => app.close());
  const res = await app.inject({ method: 'POST', url: '/tools/Nope', payload: {} });
  assert.equal(res.statusCode, 404);
  assert.deepEqual(
    res.json(),
    errorBody('TOOL_NOT_FOUND', 'Tool "Nope" not found. Available tools: Echo, NoArgs.', { tool: 'Nope', available: ['Echo', 'NoArgs'] }),
  );
});

test('POST /tools/:name with a Content-Type other than JSON is a 415', async (t) => {
  const app = await appWith([Echo]);
  t.after(() => app.close());
  for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/xml']) {
    const res = await app.inject({ method: 'POST', url: '/tools/Echo', headers: { 'content-type': type }, payload: 'text=hi' });
    assert.equal(res.statusCode, 415, type);
    assert.deepEqual(
      res.json(),
      errorBody('UNSUPPORTED_MEDIA_TYPE', `Unsupported Content-Type ${JSON.stringify(type)}: send the tool input as application/json.`),
    );
  }
});

test('POST /tools/:name with a JSON body in a charset other than UTF-8 is a 415', async (t) => {
  const app = await appWith([Echo]);
  t.after(() => app.close());
  const res = await app.inject({
    method: 'POST',
    url: '/tools/Echo',
    headers: { 'content-type': 'application/json; charset=latin1' },
    payload: '{"text":"hi"}',
  });
  assert.equal(res.statusCode, 415);
  assert.deepEqual(res.json(), errorBody('UNSUPPORTED_MEDIA_TYPE', 'Unsupported charset "latin1": send the tool input as UTF-8 JSON.'));
  const utf8 = await app.inject({
    method: 'POST',
    url: '/tools/Echo',
    headers: { 'content-type': 'application/json; charset=UTF-8' },
    payload: '{"text":"hi"}',
  });
  assert.equal(utf8.statusCode, 200);
});

test('a URL with a malformed percent-escape is a 400 in the error-body shape, with the request id', async (t) => {
  const app = await appWith([Echo]);
  t.after(() => app.close());
  const res = await app.inject({ method: 'POST', url: '/tools/%zz', headers: { 'x-request-id': 'bad-url' }, payload: {} });
  assert.equal(res.statusCode, 400);
  assert.equal(res.headers['x-request-id'], 'bad-url');
  assert.deepEqual(res.json(), errorBody('BAD_REQUEST', 'The URL holds a malformed percent-encoding.'));
});

test('POST /tools/:name with a body over the limit is a 413', async (t) => {
  const app = await appWith([Echo], { bodyLimit: 64 });
  t.after(() => app.close());
  const res = await app.inject({ method: 'POST', url: '/tools/Echo', payload: { text: 'x'.repeat(100) } });
  assert.equal(res.statusCode, 413);
  assert.deepEqual(res.json(), errorBody('PAYLOAD_TOO_LARGE', 'Request body is larger than the limit of 64 bytes.'));
  const fits = await app.inject({ method: 'POST', url: '/tools/Echo', payload: { text: 'x'.repeat(10) } });
  assert.equal(fits.statusCode, 200);
});

test('an unexpected failure in the service is a 500 that leaks no internals', async (t) => {
  const app = await appWith([Echo]);
  t.after(() => app.close());
  app.get('/boom', async () => {
    throw new Error('secret at /etc/internal/path');
  });
  const res = await app.inject({ method: 'GET', url: '/boom', headers: { 'x-request-id': 'req-42' } });
  assert.equal(res.statusCode, 500);
  assert.deepEqual(res.json(), errorBody('INTERNAL_ERROR', 'Internal server error (request id req-42).'));
  assert.doesNotMatch(res.body, /secret|\/etc|at /);
});

test('an unknown route is a 404 in the error-body shape', async (t) => {
  const app = await appWith([Echo]);
  t.after(() => app.close());
  const res = await app.inject({ method: 'DELETE', url: '/tools/Echo?x=1' });
  assert.equal(res.statusCode, 404);
  assert.deepEqual(res.json(), errorBody('ROUTE_NOT_FOUND', 'Route DELETE /tools/Echo not found.'));
});

test('GET /tools lists the tools in registration order, in the anthropic format by default', async (t) => {
  const app = await appWith([Echo, NoArgs]);
  t.after(() => app.close());
  const res = await app.inject({ url: '/tools' });
  assert.equal(res.statusCode, 200);
  assert.deepEqual(res.json(), [
    { name: 'Echo', description: Echo.description, input_schema: Echo.inputSchema },
    { name: 'NoArgs', description: NoArgs.description, input_schema: { type: 'object', properties: {}, additionalProperties: false } },
  ]);
});

test('GET /tools?format= picks the openai or mcp format', async (t) => {
  const app = await appWith([Echo]);
  t.after(() => app.close());
  const openai = await app.inject({ url: '/tools?format=openai' });
  assert.deepEqual(openai.json(), [{ type: 'function', function: { name: 'Echo', description: Echo.description, parameters: Echo.inputSchema } }]);
  const mcp = await app.inject({ url: '/tools?format=mcp' });
  assert.deepEqual(mcp.json(), {
    tools: [{ name: 'Echo', title: Echo.annotations!.title, description: Echo.description, inputSchema: Echo.inputSchema, annotations: Echo.annotations }],
  });
  const anthropic = await app.inject({ url: '/tools?format=anthropic' });
  assert.equal(anthropic.json()[0].name, 'Echo');
});

test('GET /tools with an unknown format is a 400 that lists the valid ones', async (t) => {
  const app = await appWith([Echo]);
  t.after(() => app.close());
  const res = await app.inject({ url: '/tools?format=gemini' });
  assert.equal(res.statusCode, 400);
  const message = 'Invalid querystring:\n- $.format: must be one of "anthropic", "openai", "openai-responses", "mcp"';
  assert.deepEqual(
    res.json(),
    errorBody('INVALID_QUERY', message, { violations: [{ path: '$.format', message: 'must be one of "anthropic", "openai", "openai-responses", "mcp"' }] }),
  );
});

test('GET /tools with an unknown query parameter is a 400 that names it', async (t) => {
  const app = await appWith([Echo]);
  t.after(() => app.close());
  const res = await app.inject({ url: '/tools?fromat=openai' });
  assert.equal(res.statusCode, 400);
  const message = 'Invalid querystring:\n- $.fromat: is not an allowed property';
  assert.deepEqual(res.json(), errorBody('INVALID_QUERY', message, { violations: [{ path: '$.fromat', message: 'is not an allowed property' }] }));
});

test('a tool call refused before it ran gets an audit line with the tool, status and code', async (t) => {
  const { lines, logger } = capturedLog();
  const app = await appWith([Echo], { logger });
  t.after(() => app.close());
  await app.inject({ method: 'POST', url: '/tools/Echo', headers: { 'x-request-id': 'refused-1' }, payload: { wrong: 1 } });
  const refused = lines.filter((l) => l.msg === 'tool call refused');
  assert.equal(refused.length, 1);
  assert.deepEqual(
    { reqId: refused[0]!.reqId, tool: refused[0]!.tool, status: refused[0]!.status, code: refused[0]!.code },
    { reqId: 'refused-1', tool: 'Echo', status: 400, code: 'INVALID_INPUT' },
  );
  assert.doesNotMatch(JSON.stringify(lines), /wrong/);
});

test('every REST call gets exactly one audit line with transport rest, whichever stage refused it, and requests that are not calls get none', async (t) => {
  const { lines, logger } = capturedLog();
  const app = await appWith([Echo], { logger, apiKeys: [{ label: 'ci', key: 'ci-secret-0123456789abcdef', tools: ['Echo'] }], bodyLimit: 64 });
  t.after(() => app.close());
  const key = { authorization: 'Bearer ci-secret-0123456789abcdef' };
  const send = (id: string, url: string, headers: Record<string, string>, payload: string) =>
    app.inject({ method: 'POST', url, headers: { ...JSON_HEADERS, ...headers, 'x-request-id': id }, payload });
  await send('ran', '/tools/Echo', key, '{"text":"hi"}');
  await send('no-key', '/tools/Echo', {}, '{"text":"hi"}');
  await send('scope', '/tools/Nope', key, '{}');
  await send('json', '/tools/Echo', key, '{"text":');
  await send('large', '/tools/Echo', key, JSON.stringify({ text: 'x'.repeat(100) }));
  await send('input', '/tools/Echo', key, '{"text":1}');
  await app.inject({ url: '/tools', headers: { ...key, 'x-request-id': 'list' } });
  await app.inject({ url: '/nowhere', headers: { ...key, 'x-request-id': 'unrouted' } });
  assert.deepEqual(
    lines.map((l) => [l.reqId, l.msg, l.transport, l.key, l.code ?? l.outcome]),
    [
      ['ran', 'tool call', 'rest', 'ci', 'ok'],
      ['no-key', 'tool call refused', 'rest', undefined, 'UNAUTHORIZED'],
      ['scope', 'tool call refused', 'rest', 'ci', 'FORBIDDEN'],
      ['json', 'tool call refused', 'rest', 'ci', 'INVALID_JSON'],
      ['large', 'tool call refused', 'rest', 'ci', 'PAYLOAD_TOO_LARGE'],
      ['input', 'tool call refused', 'rest', 'ci', 'INVALID_INPUT'],
    ],
  );
});

test('GET /tools/:name returns one definition, in the requested format', async (t) => {
  const app = await appWith([Echo, NoArgs]);
  t.after(() => app.close());
  const res = await app.inject({ url: '/tools/NoArgs' });
  assert.equal(res.statusCode, 200);
  assert.deepEqual(res.json(), {
    name: 'NoArgs',
    description: NoArgs.description,
    input_schema: { type: 'object', properties: {}, additionalProperties: false },
  });
  const mcp = await app.inject({ url: '/tools/Echo?format=mcp' });
  assert.deepEqual(mcp.json(), {
    name: 'Echo',
    title: Echo.annotations!.title,
    description: Echo.description,
    inputSchema: Echo.inputSchema,
    annotations: Echo.annotations,
  });
});

test('GET /tools/:name for an unknown tool is a 404 that lists the available tools', async (t) => {
  const app = await appWith([Echo]);
  t.after(() => app.close());
  const res = await app.inject({ url: '/tools/Nope' });
  assert.equal(res.statusCode, 404);
  assert.deepEqual(res.json(), errorBody('TOOL_NOT_FOUND', 'Tool "Nope" not found. Available tools: Echo.', { tool: 'Nope', available: ['Echo'] }));
});

test('GET /healthz and GET /readyz answer while the service runs', async (t) => {
  const app = await appWith([Echo]);
  t.after(() => app.close());
  assert.deepEqual((await app.inject({ url: '/healthz' })).json(), { status: 'ok' });
  const ready = await app.inject({ url: '/readyz' });
  assert.equal(ready.statusCode, 200);
  assert.deepEqual(ready.json(), { status: 'ready', callTasks: { working: 0 } });
});

test('a client request id that is long or holds other characters is replaced by a generated one', async (t) => {
  const app = await appWith([Echo]);
  t.after(() => app.close());
  for (const sent of ['x'.repeat(129), 'a b', 'id\u00e9', '{"json":1}']) {
    const res = await app.inject({ url: '/healthz', headers: { 'x-request-id': sent } });
    assert.match(String(res.headers['x-request-id']), /^req-[0-9a-z]+$/, sent);
  }
});

test('a body that is not valid UTF-8 is refused with 400 INVALID_JSON, not rewritten', async (t) => {
  const app = await appWith([Echo]);
  t.after(() => app.close());
  const payload = Buffer.concat([Buffer.from('{"text":"a'), Buffer.from([0xff, 0xfe]), Buffer.from('b"}')]);
  const res = await app.inject({ method: 'POST', url: '/tools/Echo', headers: JSON_HEADERS, payload });
  assert.equal(res.statusCode, 400);
  assert.deepEqual(res.json(), errorBody('INVALID_JSON', 'Request body is not valid UTF-8; send the tool input as UTF-8 JSON.'));
});

test('every response carries the request id, taken from x-request-id when the client sends one', async (t) => {
  const app = await appWith([Echo]);
  t.after(() => app.close());
  const res = await app.inject({ url: '/healthz', headers: { 'x-request-id': 'abc-123' } });
  assert.equal(res.headers['x-request-id'], 'abc-123');
  const generated = await app.inject({ url: '/healthz' });
  assert.ok(generated.headers['x-request-id']);
});

test('each tool call is logged once with request id, tool, duration, outcome and input size, never the input', async (t) => {
  const { lines, logger } = capturedLog();
  const app = await appWith([Echo], { logger });
  t.after(() => app.close());
  const payload = JSON.stringify({ text: 'my-secret-value' });
  await app.inject({ method: 'POST', url: '/tools/Echo', headers: { ...JSON_HEADERS, 'x-request-id': 'r-1' }, payload });
  await app.inject({ url: '/tools' });
  assert.equal(lines.length, 1, JSON.stringify(lines));
  const [line] = lines as [Record<string, unknown>];
  assert.equal(line.msg, 'tool call');
  assert.equal(line.reqId, 'r-1');
  assert.equal(line.tool, 'Echo');
  assert.equal(line.outcome, 'ok');
  assert.equal(line.inputBytes, Buffer.byteLength(payload));
  assert.equal(typeof line.ms, 'number');
  assert.doesNotMatch(JSON.stringify(lines), /my-secret-value/);
});
