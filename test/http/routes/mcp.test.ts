import assert from 'node:assert/strict';
import type { KeySpec } from '#src/auth/keyring.js';
import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { textResult } from '#src/core/result.js';
import type { ToolDef } from '#src/core/types.js';
import type { AppOptions } from '#src/http/app.js';
import { createLogger } from '#src/infra/logger.js';
import { Echo } from '#src/tools/echo.js';
import { scrapeMetrics } from '../../support/metrics-text.js';
import { gatedTool } from '../../fixtures/gated-tool.js';
import { controllableTool, NoArgs } from '../../fixtures/tools.js';
import { appWith } from '../../support/app.js';

const FULL_KEY = 'full-access-secret-0123456789';
const SCOPED_KEY = 'ci-bot-secret-0123456789abcdef';
const KEYS: KeySpec[] = [
  { label: 'key-1', key: FULL_KEY },
  { label: 'ci-bot', key: SCOPED_KEY, tools: ['NoArgs'] },
];
const bearer = (key: string) => ({ authorization: `Bearer ${key}` });
const LEGACY = { 'mcp-protocol-version': '2025-11-25' };

/** Reports three steps of progress, then answers. */
const Steps: ToolDef = {
  name: 'Steps',
  description: 'Reports progress three times.',
  inputSchema: { type: 'object', properties: {}, additionalProperties: false },
  execute: async (_input, { progress }) => {
    for (let i = 1; i <= 3; i++) progress?.({ progress: i, total: 3, message: `step ${i}` });
    return textResult('done');
  },
};

/** An app over these tools whose log lines (written as the server writes them, secrets hidden) land in `lines`. */
async function loggedApp(tools: ToolDef[] = [Echo, NoArgs, Steps], options: Partial<AppOptions> = {}) {
  const lines: Record<string, unknown>[] = [];
  const destination = new Writable({
    write(chunk, _enc, done) {
      for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { app: await appWith(tools, { logger: createLogger('info', { destination, pretty: false }), ...options }), lines };
}

function rpc(method: string, params?: Record<string, unknown>, id: number | string = 1) {
  return { jsonrpc: '2.0', id, method, ...(params ? { params } : {}) };
}

const post = (app: FastifyInstance, payload: unknown, headers: Record<string, string> = {}) =>
  app.inject({ method: 'POST', url: '/mcp', headers: { 'content-type': 'application/json', ...LEGACY, ...headers }, payload: JSON.stringify(payload) });

test("POST /mcp answers initialize and tools/list as JSON, with the tools' annotations and titles", async (t) => {
  const { app } = await loggedApp();
  t.after(() => app.close());
  const init = await post(app, rpc('initialize', { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' } }), {});
  assert.equal(init.statusCode, 200);
  assert.match(String(init.headers['content-type']), /^application\/json/);
  assert.equal(init.json().result.protocolVersion, '2025-11-25');
  assert.deepEqual(init.json().result.serverInfo.name, 'toolport');
  const list = await post(app, rpc('tools/list', {}, 2));
  assert.equal(list.statusCode, 200);
  const tools = list.json().result.tools as Array<{ name: string; annotations?: unknown }>;
  assert.deepEqual(
    tools.map((tool) => tool.name),
    ['Echo', 'NoArgs', 'Steps'],
  );
  assert.deepEqual(tools[0]!.annotations, Echo.annotations);
});

test('POST /mcp tools/call runs the tool through the gateway, with an audit line and a metric labelled mcp', async (t) => {
  const { app, lines } = await loggedApp();
  t.after(() => app.close());
  const res = await post(app, rpc('tools/call', { name: 'Echo', arguments: { text: 'hi' } }), { 'x-request-id': 'mcp-1' });
  assert.equal(res.statusCode, 200);
  assert.deepEqual(res.json(), { jsonrpc: '2.0', id: 1, result: { content: [{ type: 'text', text: 'hi' }], isError: false } });
  const audit = lines.find((l) => l.msg === 'tool call');
  assert.equal(audit?.reqId, 'mcp-1');
  assert.equal(audit?.transport, 'mcp');
  assert.equal(audit?.tool, 'Echo');
  const m = await scrapeMetrics(app);
  assert.equal(m.get('toolport_tool_calls_total{outcome="ok",tool="Echo",transport="mcp"}'), 1);
  assert.equal(m.get('toolport_tool_calls_total{outcome="ok",tool="NoArgs",transport="mcp"}'), 0, 'the mcp series start at zero');
});

test('a notification is answered 202 with no body', async (t) => {
  const { app } = await loggedApp();
  t.after(() => app.close());
  const res = await post(app, { jsonrpc: '2.0', method: 'notifications/initialized' });
  assert.equal(res.statusCode, 202);
  assert.equal(res.body, '');
});

test('GET and DELETE /mcp answer 405 with Allow: POST (no stream to open, no session to end)', async (t) => {
  const { app } = await loggedApp();
  t.after(() => app.close());
  for (const method of ['GET', 'DELETE'] as const) {
    const res = await app.inject({ method, url: '/mcp' });
    assert.equal(res.statusCode, 405, method);
    assert.equal(res.headers.allow, 'POST', method);
    assert.equal(res.body, '', method);
  }
});

test('a stateless-revision request whose headers disagree with the body is a 400 HeaderMismatch', async (t) => {
  const { app } = await loggedApp();
  t.after(() => app.close());
  const meta = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} };
  const res = await post(app, rpc('tools/call', { name: 'Echo', arguments: { text: 'x' }, _meta: meta }), {
    'mcp-protocol-version': '2026-07-28',
    'mcp-method': 'tools/call',
    'mcp-name': 'NoArgs',
  });
  assert.equal(res.statusCode, 400);
  assert.equal(res.json().error.code, -32020);
  const ok = await post(app, rpc('tools/call', { name: 'Echo', arguments: { text: 'x' }, _meta: meta }), {
    'mcp-protocol-version': '2026-07-28',
    'mcp-method': 'tools/call',
    'mcp-name': 'Echo',
  });
  assert.equal(ok.statusCode, 200);
  assert.equal(ok.json().result.content[0].text, 'x');
  assert.equal(ok.json().result.resultType, 'complete');
});

test('/mcp is not in the OpenAPI document', async (t) => {
  const { app } = await loggedApp();
  t.after(() => app.close());
  const doc = (await app.inject({ url: '/openapi.json' })).json() as { paths: Record<string, unknown> };
  assert.equal(Object.hasOwn(doc.paths, '/mcp'), false);
});

test('with keys, POST /mcp without a key is a 401 with WWW-Authenticate before any MCP processing, audited and counted as mcp', async (t) => {
  const { app, lines } = await loggedApp(undefined, { apiKeys: KEYS });
  t.after(() => app.close());
  const res = await post(app, rpc('tools/call', { name: 'Echo', arguments: { text: 'hi' } }));
  assert.equal(res.statusCode, 401);
  assert.equal(res.headers['www-authenticate'], 'Bearer realm="toolport"');
  assert.deepEqual(res.json(), {
    jsonrpc: '2.0',
    error: { code: -31001, message: 'Authentication required: send an API key in the header "Authorization: Bearer <key>".', data: { code: 'UNAUTHORIZED' } },
  });
  assert.equal(lines.filter((l) => l.msg === 'tool call').length, 0, 'nothing ran');
  const refused = lines.find((l) => l.msg === 'tool call refused');
  assert.deepEqual([refused?.transport, refused?.status, refused?.code], ['mcp', 401, 'UNAUTHORIZED']);
  const m = await scrapeMetrics(app, bearer(FULL_KEY));
  assert.equal(m.get('toolport_rejected_calls_total{reason="unauthorized",transport="mcp"}'), 1);
  const bad = await post(app, rpc('tools/list'), bearer('wrong-secret-0123456789'));
  assert.equal(bad.statusCode, 401);
  assert.equal(bad.headers['www-authenticate'], 'Bearer realm="toolport", error="invalid_token"');
});

test('a scoped key lists only its tools over MCP, and a call outside its scope is refused with FORBIDDEN', async (t) => {
  const { app, lines } = await loggedApp(undefined, { apiKeys: KEYS });
  t.after(() => app.close());
  const list = await post(app, rpc('tools/list'), bearer(SCOPED_KEY));
  assert.deepEqual(
    (list.json().result.tools as Array<{ name: string }>).map((tool) => tool.name),
    ['NoArgs'],
  );
  const res = await post(app, rpc('tools/call', { name: 'Echo', arguments: { text: 'hi' } }), bearer(SCOPED_KEY));
  assert.equal(res.statusCode, 200);
  assert.deepEqual(res.json().error, {
    code: -31002,
    message: 'API key "ci-bot" may not use tool "Echo"; it may use NoArgs.',
    data: { code: 'FORBIDDEN', details: { tool: 'Echo', available: ['NoArgs'] } },
  });
  const refused = lines.find((l) => l.msg === 'tool call refused');
  assert.deepEqual([refused?.transport, refused?.key, refused?.tool, refused?.code], ['mcp', 'ci-bot', 'Echo', 'FORBIDDEN']);
});

test('refusals before the dispatcher (403 Origin, 413, 415, 429, 503) answer as JSON-RPC errors and are counted as mcp', async (t) => {
  const { app } = await loggedApp(undefined, { localOnly: true, rateLimit: 4, bodyLimit: 256 });
  t.after(() => app.close());
  const origin = await post(app, rpc('tools/list'), { host: 'localhost', origin: 'http://evil.example' });
  assert.equal(origin.statusCode, 403);
  assert.equal(origin.json().error.data.code, 'FORBIDDEN');
  const host = { host: 'localhost' };
  const large = await post(app, rpc('tools/call', { name: 'Echo', arguments: { text: 'x'.repeat(300) } }), host);
  assert.equal(large.statusCode, 413);
  assert.equal(large.json().error.code, -31004);
  const type = await app.inject({ method: 'POST', url: '/mcp', headers: { ...host, 'content-type': 'text/plain' }, payload: '{}' });
  assert.equal(type.statusCode, 415);
  assert.equal(type.json().error.code, -31005);
  const parse = await app.inject({ method: 'POST', url: '/mcp', headers: { ...host, 'content-type': 'application/json' }, payload: '{"jsonrpc":' });
  assert.equal(parse.statusCode, 400);
  assert.equal(parse.json().error.code, -32700);
  assert.equal((await post(app, rpc('tools/list'), host)).statusCode, 200, 'the fourth request of the minute');
  const limited = await post(app, rpc('tools/list'), host);
  assert.equal(limited.statusCode, 429);
  assert.equal(limited.json().error.code, -31006);
  assert.ok(Number(limited.headers['retry-after']) > 0);
  const m = await scrapeMetrics(app, host);
  for (const reason of ['forbidden', 'payload_too_large', 'unsupported_media_type', 'invalid_json', 'rate_limited']) {
    assert.equal(m.get(`toolport_rejected_calls_total{reason="${reason}",transport="mcp"}`), 1, reason);
  }
});

test('while shutting down, POST /mcp is a 503 SHUTTING_DOWN, audited as mcp', async (t) => {
  const { app, lines } = await loggedApp();
  t.after(() => app.close());
  app.toolport.gateway.drain();
  const res = await post(app, rpc('tools/call', { name: 'Echo', arguments: { text: 'x' } }));
  assert.equal(res.statusCode, 503);
  assert.deepEqual(res.json().error, { code: -31008, message: res.json().error.message, data: { code: 'SHUTTING_DOWN' } });
  const refused = lines.find((l) => l.msg === 'tool call refused');
  assert.deepEqual([refused?.transport, refused?.status, refused?.code], ['mcp', 503, 'SHUTTING_DOWN']);
});

test('a tools/call with a progress token from a client that takes SSE is answered as an event stream: progress, then the response', async (t) => {
  const { app } = await loggedApp();
  t.after(() => app.close());
  const res = await post(app, rpc('tools/call', { name: 'Steps', arguments: {}, _meta: { progressToken: 'p1' } }), {
    accept: 'application/json, text/event-stream',
  });
  assert.equal(res.statusCode, 200);
  assert.equal(res.headers['content-type'], 'text/event-stream');
  assert.equal(res.headers['x-accel-buffering'], 'no');
  const events = res.body
    .split('\n\n')
    .filter((block) => block.startsWith('event: message'))
    .map((block) => JSON.parse(block.split('\n')[1]!.slice('data: '.length)) as Record<string, unknown>);
  const progress = events.filter((e) => e.method === 'notifications/progress');
  assert.ok(progress.length >= 1, 'at least one progress notification');
  assert.deepEqual(progress.at(-1), {
    jsonrpc: '2.0',
    method: 'notifications/progress',
    params: { progressToken: 'p1', progress: 3, total: 3, message: 'step 3' },
  });
  assert.deepEqual(events.at(-1), { jsonrpc: '2.0', id: 1, result: { content: [{ type: 'text', text: 'done' }], isError: false } });
});

test('without text/event-stream in Accept, a call with a progress token is answered as plain JSON', async (t) => {
  const { app } = await loggedApp();
  t.after(() => app.close());
  const res = await post(app, rpc('tools/call', { name: 'Steps', arguments: {}, _meta: { progressToken: 'p1' } }), { accept: 'application/json' });
  assert.match(String(res.headers['content-type']), /^application\/json/);
  assert.equal(res.json().result.content[0].text, 'done');
});

test("a client that closes its connection aborts the call's signal", async (t) => {
  const slow = controllableTool('Slow');
  const { app, lines } = await loggedApp([slow.tool]);
  t.after(() => app.close());
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as AddressInfo;
  const req = httpRequest({ port, method: 'POST', path: '/mcp', headers: { 'content-type': 'application/json' } });
  req.on('error', () => {});
  req.end(JSON.stringify(rpc('tools/call', { name: 'Slow', arguments: {} })));
  await slow.started;
  req.destroy();
  const reason = await slow.aborted;
  assert.match(String((reason as Error).message), /disconnected/);
  slow.release('late');
  const deadline = Date.now() + 5000;
  while (!lines.some((l) => l.msg === 'tool call' && l.outcome === 'aborted')) {
    assert.ok(Date.now() < deadline, 'the aborted call is logged');
    await new Promise((resolve) => setImmediate(resolve));
  }
});

test('a client that closes its connection aborts the tool calls of a batch too (2025-03-26)', { timeout: 20_000 }, async (t) => {
  const slow = controllableTool('Slow');
  const { app } = await loggedApp([slow.tool]);
  t.after(() => app.close());
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as AddressInfo;
  const req = httpRequest({ port, method: 'POST', path: '/mcp', headers: { 'content-type': 'application/json', 'mcp-protocol-version': '2025-03-26' } });
  req.on('error', () => {});
  req.end(JSON.stringify([rpc('tools/call', { name: 'Slow', arguments: {} }, 1), rpc('ping', undefined, 2)]));
  await slow.started;
  req.destroy();
  const reason = await slow.aborted;
  assert.match(String((reason as Error).message), /disconnected/);
  slow.release('late');
});

test('a tools/call refused for its headers or its malformed params gets the audit line and metric of any refused call', async (t) => {
  const { app, lines } = await loggedApp();
  t.after(() => app.close());
  const meta = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} };
  const mismatch = await post(app, rpc('tools/call', { name: 'Echo', arguments: { text: 'x' }, _meta: meta }), {
    'mcp-protocol-version': '2026-07-28',
    'mcp-method': 'tools/call',
    'mcp-name': 'NoArgs',
    'x-request-id': 'mismatch-1',
  });
  assert.equal(mismatch.statusCode, 400);
  const badName = await post(app, rpc('tools/call', { name: 7 }), { 'x-request-id': 'bad-name-1' });
  assert.deepEqual(badName.json(), { jsonrpc: '2.0', id: 1, error: { code: -32602, message: 'Invalid params: name must be a string' } });
  const badArgs = await post(app, rpc('tools/call', { name: 'Echo', arguments: [1] }), { 'x-request-id': 'bad-args-1' });
  assert.deepEqual(badArgs.json(), { jsonrpc: '2.0', id: 1, error: { code: -32602, message: 'Invalid params: arguments must be an object' } });

  const refused = lines.filter((l) => l.msg === 'tool call refused').map((l) => [l.reqId, l.tool, l.code, l.transport]);
  assert.deepEqual(refused, [
    ['mismatch-1', 'Echo', 'BAD_REQUEST', 'mcp'],
    ['bad-name-1', undefined, 'INVALID_INPUT', 'mcp'],
    ['bad-args-1', 'Echo', 'INVALID_INPUT', 'mcp'],
  ]);
  const m = await scrapeMetrics(app);
  assert.equal(m.get('toolport_rejected_calls_total{reason="bad_request",transport="mcp"}'), 1);
  assert.equal(m.get('toolport_rejected_calls_total{reason="invalid_input",transport="mcp"}'), 2);
});

test('a refusal before the dispatcher carries "id": null for revisions before 2025-11-25, and no id from 2025-11-25 on', async (t) => {
  const { app } = await loggedApp(undefined, { apiKeys: KEYS });
  t.after(() => app.close());
  for (const [version, withId] of [
    ['2025-03-26', true],
    ['2025-06-18', true],
    ['2025-11-25', false],
    ['2026-07-28', false],
  ] as const) {
    const res = await post(app, rpc('tools/list'), { 'mcp-protocol-version': version });
    assert.equal(res.statusCode, 401, version);
    const body = res.json();
    assert.equal('id' in body, withId, version);
    if (withId) assert.equal(body.id, null);
    assert.equal(body.error.data.code, 'UNAUTHORIZED');
  }
  const noHeader = await app.inject({
    method: 'POST',
    url: '/mcp',
    headers: { 'content-type': 'application/json' },
    payload: JSON.stringify(rpc('tools/list')),
  });
  assert.equal(noHeader.json().id, null, 'no header: 2025-03-26');
});

test('each tools/call of a 2025-03-26 batch counts against the rate limit; those past it are refused alone', async (t) => {
  const { app } = await loggedApp(undefined, { rateLimit: 3 });
  t.after(() => app.close());
  const batch = [1, 2, 3, 4].map((i) => rpc('tools/call', { name: 'Echo', arguments: { text: String(i) } }, i));
  const res = await post(app, batch, { 'mcp-protocol-version': '2025-03-26' });
  assert.equal(res.statusCode, 200);
  const replies = (res.json() as { id: number; result?: { content: { text: string }[] }; error?: { code: number; data: { code: string } } }[]).sort(
    (a, b) => a.id - b.id,
  );
  assert.deepEqual(
    replies.map((r) => r.result?.content[0]!.text ?? r.error!.data.code),
    ['1', '2', '3', 'RATE_LIMITED'],
  );
  assert.equal(replies[3]!.error!.code, -31006);
  assert.equal((await post(app, rpc('tools/list'), { 'mcp-protocol-version': '2025-03-26' })).statusCode, 429);
});

test('a tools/call refused by the MCP layer itself (bad envelope, unsupported revision, params not an object, a batch refused whole) is audited too', async (t) => {
  const { app, lines } = await loggedApp();
  t.after(() => app.close());
  const call = (id: number) => rpc('tools/call', { name: 'Echo', arguments: { text: 'x' } }, id);
  await post(app, { ...call(1), jsonrpc: '1.0' }, { 'x-request-id': 'envelope' });
  await post(app, call(2), { 'mcp-protocol-version': '2024-01-01', 'x-request-id': 'revision' });
  await post(app, { jsonrpc: '2.0', id: 3, method: 'tools/call', params: [1] }, { 'x-request-id': 'params' });
  await post(app, [call(4), call(5), rpc('ping', undefined, 6)], { 'mcp-protocol-version': '2025-06-18', 'x-request-id': 'batch' });
  const refused = lines.filter((l) => l.msg === 'tool call refused').map((l) => [l.reqId, l.tool, l.code]);
  assert.deepEqual(refused, [
    ['envelope', 'Echo', 'BAD_REQUEST'],
    ['revision', 'Echo', 'BAD_REQUEST'],
    ['params', undefined, 'INVALID_INPUT'],
    ['batch', 'Echo', 'BAD_REQUEST'],
    ['batch', 'Echo', 'BAD_REQUEST'],
  ]);
  assert.equal(lines.filter((l) => l.msg === 'tool call').length, 0);
});

test(
  "the tools/calls of a 2025-03-26 batch of 64 run at most 8 at once (as a /calls turn), and are answered in the batch's order",
  { timeout: 30_000 },
  async (t) => {
    const gated = gatedTool('Gated');
    // The tool itself would take 32 at once (16 of one caller): the cap of 8 is the batch's own.
    const { app } = await loggedApp([gated.tool], { maxConcurrency: 32, queueSize: 128 });
    t.after(() => app.close());
    const batch = Array.from({ length: 64 }, (_, n) => rpc('tools/call', { name: 'Gated', arguments: { id: `c${n}` } }, n));
    const answer = post(app, batch, { 'mcp-protocol-version': '2025-03-26' });
    await gated.started(8);
    for (let turn = 0; turn < 20; turn += 1) await new Promise((resolve) => setImmediate(resolve));
    assert.equal(gated.runs.length, 8, 'a ninth call ran while eight were running');
    for (let released = 0; released < 64; released += 1) {
      await gated.started(Math.min(64, released + 8));
      for (let turn = 0; turn < 2; turn += 1) await new Promise((resolve) => setImmediate(resolve));
      assert.ok(gated.runs.length - released <= 8, `${gated.runs.length} calls ran while ${released} had finished`);
      gated.runs[released]!.release(`done ${gated.runs[released]!.id}`);
    }
    const res = await answer;
    assert.equal(res.statusCode, 200);
    const replies = res.json() as Array<{ id: number; result: { content: Array<{ text: string }> } }>;
    assert.deepEqual(
      replies.map((r) => [r.id, r.result.content[0]!.text]),
      batch.map((_, n) => [n, `done c${n}`]),
    );
    assert.deepEqual(
      gated.runs.map((run) => run.id),
      batch.map((_, n) => `c${n}`),
      "the calls ran in the batch's order",
    );
  },
);

for (const [what, token, message] of [
  ['a string of 900,000 bytes', 't'.repeat(900_000), 'Invalid params: _meta.progressToken is a string of 900000 bytes; at most 256 are taken'],
  ['a string of 257 bytes', 'x'.repeat(257), 'Invalid params: _meta.progressToken is a string of 257 bytes; at most 256 are taken'],
  ['a number past 2^53 - 1', 1e300, 'Invalid params: _meta.progressToken must be a string of at most 256 bytes or an integer from -(2^53 - 1) to 2^53 - 1'],
  ['a number with a fraction', 0.5, 'Invalid params: _meta.progressToken must be a string of at most 256 bytes or an integer from -(2^53 - 1) to 2^53 - 1'],
] as const) {
  test(`POST /mcp refuses a progress token that is ${what}: 200, -32602, no stream, the tool never runs, audited`, async (t) => {
    const { app, lines } = await loggedApp();
    t.after(() => app.close());
    const res = await post(app, rpc('tools/call', { name: 'Steps', arguments: {}, _meta: { progressToken: token } }, 5), {
      accept: 'application/json, text/event-stream',
      'x-request-id': 'big-token',
    });
    assert.equal(res.statusCode, 200);
    assert.match(String(res.headers['content-type']), /^application\/json/);
    assert.deepEqual(res.json(), { jsonrpc: '2.0', id: 5, error: { code: -32602, message } });
    assert.equal(lines.filter((l) => l.msg === 'tool call').length, 0, 'the tool never ran');
    const refused = lines.find((l) => l.msg === 'tool call refused');
    assert.deepEqual([refused?.reqId, refused?.tool, refused?.transport, refused?.code], ['big-token', 'Steps', 'mcp', 'INVALID_INPUT']);
  });
}

test('POST /mcp takes a progress token of 256 bytes and an integer token, and names them in the stream', async (t) => {
  const { app } = await loggedApp();
  t.after(() => app.close());
  for (const token of ['é'.repeat(128), 2 ** 53 - 1]) {
    const res = await post(app, rpc('tools/call', { name: 'Steps', arguments: {}, _meta: { progressToken: token } }), {
      accept: 'application/json, text/event-stream',
    });
    assert.equal(res.headers['content-type'], 'text/event-stream');
    const first = JSON.parse(res.body.split('\n\n')[0]!.split('\n')[1]!.slice('data: '.length)) as { params: { progressToken: unknown } };
    assert.equal(first.params.progressToken, token);
  }
});

const cancelled = (requestId: unknown, reason = 'stop') => ({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId, reason } });

test("notifications/cancelled in a POST of its own cancels the caller's call with that id, which gets no response", async (t) => {
  const gated = gatedTool('Gated');
  const { app, lines } = await loggedApp([gated.tool], { apiKeys: KEYS });
  t.after(() => app.close());
  const call = post(app, rpc('tools/call', { name: 'Gated', arguments: { id: 'mine' } }, 7), bearer(FULL_KEY));
  const [run] = await gated.started(1);
  const notice = await post(app, cancelled(7, 'the user pressed stop'), bearer(FULL_KEY));
  assert.deepEqual([notice.statusCode, notice.body], [202, '']);
  assert.equal(run!.signal.aborted, true);
  assert.equal((run!.signal.reason as Error).message, 'Cancelled by the client: the user pressed stop');
  const answer = await call;
  assert.deepEqual([answer.statusCode, answer.body], [202, ''], 'the cancelled request gets no response');
  const audit = lines.find((l) => l.msg === 'tool call');
  assert.deepEqual([audit?.outcome, audit?.key, audit?.transport], ['aborted', 'key-1', 'mcp']);
});

test("another key's cancellations, hundreds at once naming every id, cancel none of a caller's calls", async (t) => {
  const gated = gatedTool('Gated');
  const other = { label: 'other', key: 'other-secret-0123456789abcdef' };
  const { app } = await loggedApp([gated.tool], { apiKeys: [...KEYS, other], maxConcurrency: 32, maxConcurrencyPerCaller: 32 });
  t.after(() => app.close());
  const answers = Array.from({ length: 20 }, (_, id) => post(app, rpc('tools/call', { name: 'Gated', arguments: { id: `c${id}` } }, id), bearer(FULL_KEY)));
  const runs = await gated.started(20);
  // As an attacker would: every id as a number and as a string, all at once.
  const attempts = await Promise.all(Array.from({ length: 400 }, (_, n) => post(app, cancelled(n % 2 === 0 ? n / 2 : String((n - 1) / 2)), bearer(other.key))));
  assert.ok(attempts.every((res) => res.statusCode === 202));
  assert.equal(runs.filter((run) => run.signal.aborted).length, 0, 'no call of key-1 was cancelled by another key');
  // Its own cancellation does reach it.
  await post(app, cancelled(0), bearer(FULL_KEY));
  assert.deepEqual(
    runs.filter((run) => run.signal.aborted).map((run) => run.id),
    ['c0'],
  );
  for (const run of runs) run.release(`done ${run.id}`);
  const results = await Promise.all(answers);
  assert.equal(results[0]!.statusCode, 202);
  assert.deepEqual(
    results.slice(1).map((res) => res.json().result.content[0].text),
    runs.slice(1).map((_, i) => `done c${i + 1}`),
  );
});

test('without keys, a cancellation from another client address cancels nothing; from the same address it cancels', async (t) => {
  const gated = gatedTool('Gated');
  const { app } = await loggedApp([gated.tool]);
  t.after(() => app.close());
  const from = (remoteAddress: string, payload: unknown) =>
    app.inject({ method: 'POST', url: '/mcp', remoteAddress, headers: { 'content-type': 'application/json', ...LEGACY }, payload: JSON.stringify(payload) });
  const call = from('10.0.0.1', rpc('tools/call', { name: 'Gated', arguments: {} }, 1));
  const [run] = await gated.started(1);
  assert.equal((await from('10.0.0.2', cancelled(1))).statusCode, 202);
  assert.equal(run!.signal.aborted, false, 'another address is another caller');
  await from('10.0.0.1', cancelled(1));
  assert.equal(run!.signal.aborted, true);
  assert.equal((await call).statusCode, 202);
});

test('a cancellation that names two calls of its caller cancels neither and says so at debug; once one answered, it cancels the other', async (t) => {
  const gated = gatedTool('Gated');
  const { app, lines } = await loggedApp([gated.tool], { apiKeys: KEYS });
  app.log.level = 'debug';
  t.after(() => app.close());
  // Two clients of one key, each with its own request id 5.
  const first = post(app, rpc('tools/call', { name: 'Gated', arguments: { id: 'first' } }, 5), bearer(FULL_KEY));
  const second = post(app, rpc('tools/call', { name: 'Gated', arguments: { id: 'second' } }, 5), bearer(FULL_KEY));
  const runs = await gated.started(2);
  await post(app, cancelled(5), bearer(FULL_KEY));
  assert.deepEqual(
    runs.map((run) => run.signal.aborted),
    [false, false],
  );
  const debug = lines.find((l) => l.msg === 'a cancellation names several calls in flight; none is cancelled');
  assert.deepEqual([debug?.level, debug?.caller, debug?.requestId, debug?.calls], [20, 'key-1', 5, 2]);
  runs.find((run) => run.id === 'first')!.release('first done');
  assert.equal((await first).json().result.content[0].text, 'first done');
  await post(app, cancelled(5), bearer(FULL_KEY));
  assert.equal(runs.find((run) => run.id === 'second')!.signal.aborted, true);
  assert.equal((await second).statusCode, 202);
});
