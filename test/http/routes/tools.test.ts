import assert from 'node:assert/strict';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { test } from 'node:test';
import { ToolRegistry } from '#src/core/registry.js';
import { textResult } from '#src/core/result.js';
import type { ToolDef } from '#src/core/types.js';
import { buildApp, type AppOptions } from '#src/http/app.js';
import { Echo } from '#src/tools/echo.js';
import { gatedTool } from '../../fixtures/gated-tool.js';
import { allItems, postForEvents, readStream, type StreamItem } from '../../support/sse-client.js';
import { NoArgs } from '../../fixtures/tools.js';
import { appWith } from '../../support/app.js';

const FULL_KEY = 'tools-route-full-secret-0123456789';
const SCOPED_KEY = 'tools-route-scoped-secret-0123456789';

/** The headers of an answer, without the ones every answer carries (date, connection). */
function headersOf(res: { headers: Record<string, unknown> }): Record<string, unknown> {
  return Object.fromEntries(Object.entries(res.headers).filter(([name]) => !['date', 'connection', 'keep-alive'].includes(name)));
}

test('GET /tools answers the list as bytes with a strong ETag and Cache-Control: no-cache, the same tag every time', async (t) => {
  const app = await appWith([Echo, NoArgs], { docs: false, pressure: false });
  t.after(() => app.close());
  const first = await app.inject({ url: '/tools', headers: { 'x-request-id': 'list-1' } });
  assert.equal(first.statusCode, 200);
  const etag = first.headers.etag as string;
  assert.match(etag, /^"[\w-]{22}"$/);
  assert.deepEqual(headersOf(first), {
    'x-request-id': 'list-1',
    etag,
    'cache-control': 'no-cache',
    vary: 'Accept-Encoding',
    'content-type': 'application/json; charset=utf-8',
    'content-length': String(Buffer.byteLength(first.body)),
  });
  assert.deepEqual(
    first.json().map((tool: { name: string }) => tool.name),
    ['Echo', 'NoArgs'],
  );
  const again = await app.inject({ url: '/tools' });
  assert.equal(again.headers.etag, etag);
  assert.equal(again.body, first.body);
  const openai = await app.inject({ url: '/tools?format=openai' });
  assert.notEqual(openai.headers.etag, etag, 'another format is another list');
});

test('GET /tools with If-None-Match naming its ETag is a 304 with no body; another tag gets the list', async (t) => {
  const app = await appWith([Echo, NoArgs], { docs: false, pressure: false });
  t.after(() => app.close());
  const etag = (await app.inject({ url: '/tools' })).headers.etag as string;
  for (const given of [etag, `W/${etag}`, `"other", ${etag}`, '*']) {
    const res = await app.inject({ url: '/tools', headers: { 'if-none-match': given, 'x-request-id': 'revalidate-1' } });
    assert.equal(res.statusCode, 304, given);
    assert.equal(res.body, '');
    assert.deepEqual(headersOf(res), { 'x-request-id': 'revalidate-1', etag, 'cache-control': 'no-cache', vary: 'Accept-Encoding' }, given);
  }
  const stale = await app.inject({ url: '/tools', headers: { 'if-none-match': '"stale"' } });
  assert.equal(stale.statusCode, 200);
  assert.equal(stale.headers.etag, etag);
  const openai = await app.inject({ url: '/tools?format=openai', headers: { 'if-none-match': etag } });
  assert.equal(openai.statusCode, 200, 'the tag of one format does not match another');
});

test('GET /tools gives each scope its own list and ETag; a key is checked before a 304', async (t) => {
  const app = await appWith([Echo, NoArgs], {
    docs: false,
    pressure: false,
    apiKeys: [
      { label: 'full', key: FULL_KEY },
      { label: 'echo-only', key: SCOPED_KEY, tools: ['Echo'] },
    ],
  });
  t.after(() => app.close());
  const full = await app.inject({ url: '/tools', headers: { authorization: `Bearer ${FULL_KEY}` } });
  const scoped = await app.inject({ url: '/tools', headers: { authorization: `Bearer ${SCOPED_KEY}` } });
  assert.deepEqual(
    scoped.json().map((tool: { name: string }) => tool.name),
    ['Echo'],
  );
  assert.notEqual(scoped.headers.etag, full.headers.etag);
  const revalidated = await app.inject({ url: '/tools', headers: { authorization: `Bearer ${SCOPED_KEY}`, 'if-none-match': String(scoped.headers.etag) } });
  assert.equal(revalidated.statusCode, 304);
  const otherScope = await app.inject({ url: '/tools', headers: { authorization: `Bearer ${SCOPED_KEY}`, 'if-none-match': String(full.headers.etag) } });
  assert.equal(otherScope.statusCode, 200, "another scope's tag gets this scope's list");
  const anonymous = await app.inject({ url: '/tools', headers: { 'if-none-match': String(full.headers.etag) } });
  assert.equal(anonymous.statusCode, 401);
});

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

/** Reports progress every millisecond for `ms`, or until aborted. */
const Flood: ToolDef = {
  name: 'Flood',
  description: 'Reports progress without pause.',
  inputSchema: { type: 'object', properties: { ms: { type: 'integer' } }, required: ['ms'], additionalProperties: false },
  execute: (input, { progress, signal }) =>
    new Promise((resolve) => {
      let reports = 0;
      const until = Date.now() + Number(input.ms);
      const step = (): void => {
        if (signal.aborted || Date.now() >= until) return resolve(textResult(`made ${reports} reports`));
        progress?.({ progress: ++reports, message: `report ${reports}` });
        setTimeout(step, 1);
      };
      step();
    }),
};

/** An app with the tools, listening on a loopback port: the SSE tests read the stream as a client does. */
async function listening(tools: ToolDef[], options: Partial<AppOptions> = {}) {
  const registry = new ToolRegistry();
  for (const tool of tools) registry.register(tool);
  const app = await buildApp({ registry, docs: false, pressure: false, ...options });
  await app.listen({ port: 0, host: '127.0.0.1' });
  return { app, url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}` };
}

const events = (items: StreamItem[], name: string) =>
  items.filter((i): i is { event: string; data: string } => 'event' in i && i.event === name).map((i) => JSON.parse(i.data) as Record<string, unknown>);

test('POST /tools/:name with Accept: text/event-stream streams progress events, then the result event, read by an SSE client', async (t) => {
  const { app, url } = await listening([Steps, Echo]);
  t.after(() => app.close());
  const { response, items } = await postForEvents(`${url}/tools/Steps`, {}, { 'x-request-id': 'sse-1' });
  assert.equal(response.status, 200);
  assert.equal(response.headers.get('content-type'), 'text/event-stream');
  assert.equal(response.headers.get('cache-control'), 'no-cache');
  assert.equal(response.headers.get('x-request-id'), 'sse-1');
  const all = await allItems(items);
  const named = all.filter((i) => 'event' in i).map((i) => (i as { event: string }).event);
  assert.deepEqual(named.at(-1), 'result', 'the result comes last');
  assert.ok(named.slice(0, -1).every((e) => e === 'progress'));
  // Three reports at once: the first goes out, the third waits in place of the second.
  assert.deepEqual(events(all, 'progress'), [
    { progress: 1, total: 3, message: 'step 1' },
    { progress: 3, total: 3, message: 'step 3' },
  ]);
  assert.deepEqual(events(all, 'result'), [{ content: [{ type: 'text', text: 'done' }], isError: false }]);

  const silent = await allItems((await postForEvents(`${url}/tools/Echo`, { text: 'hi' })).items);
  assert.deepEqual(
    silent,
    [{ event: 'result', data: '{"content":[{"type":"text","text":"hi"}],"isError":false}' }],
    'a call without progress is one result event',
  );
  const plain = await fetch(`${url}/tools/Steps`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  assert.match(String(plain.headers.get('content-type')), /^application\/json/, 'without the Accept header, nothing changes');
  assert.deepEqual(await plain.json(), { content: [{ type: 'text', text: 'done' }], isError: false });
});

test('POST /tools/:name with Accept: text/event-stream: a refusal before the stream is its status and error body, as without it', async (t) => {
  const { app, url } = await listening([Steps, Echo]);
  t.after(() => app.close());
  const invalid = await postForEvents(`${url}/tools/Echo`, { text: 7 });
  assert.equal(invalid.response.status, 400);
  assert.match(String(invalid.response.headers.get('content-type')), /^application\/json/);
  assert.deepEqual(await invalid.response.json(), {
    content: [{ type: 'text', text: 'Invalid input for tool "Echo":\n- $.text: must be string' }],
    isError: true,
    error: {
      code: 'INVALID_INPUT',
      message: 'Invalid input for tool "Echo":\n- $.text: must be string',
      details: { violations: [{ path: '$.text', message: 'must be string' }] },
    },
  });
  const missing = await postForEvents(`${url}/tools/Nope`, {});
  assert.equal(missing.response.status, 404);
  assert.equal(((await missing.response.json()) as { error: { code: string } }).error.code, 'TOOL_NOT_FOUND');
  // In a provider's shape a refusal is an error result, so it comes as the result event.
  const shaped = await allItems((await postForEvents(`${url}/tools/Echo?format=anthropic&id=toolu_1`, { text: 7 })).items);
  assert.deepEqual(events(shaped, 'result'), [
    {
      type: 'tool_result',
      tool_use_id: 'toolu_1',
      content: [{ type: 'text', text: 'Invalid input for tool "Echo":\n- $.text: must be string' }],
      is_error: true,
    },
  ]);
});

test('POST /tools/:name as an event stream sends at most 50 progress events a second, the latest report last', async (t) => {
  const { app, url } = await listening([Flood]);
  t.after(() => app.close());
  const started = performance.now();
  const all = await allItems((await postForEvents(`${url}/tools/Flood`, { ms: 500 })).items);
  const elapsedMs = performance.now() - started;
  const progress = events(all, 'progress');
  const result = events(all, 'result')[0] as { content: Array<{ text: string }> };
  const made = Number(/made (\d+) reports/.exec(result.content[0]!.text)![1]);
  // One event per 20 ms, plus the first at once and the last one that waited.
  assert.ok(progress.length <= elapsedMs / 20 + 2, `${progress.length} events in ${Math.round(elapsedMs)} ms`);
  assert.ok(made > progress.length, `the tool made ${made} reports, the stream carried ${progress.length}`);
  assert.deepEqual(progress.at(-1), { progress: made, message: `report ${made}` }, 'the latest report is never lost');
  const numbers = progress.map((p) => p.progress as number);
  assert.deepEqual(
    numbers,
    [...numbers].sort((a, b) => a - b),
    'progress only grows',
  );
});

test('a silent call streamed as events gets a keep-alive comment every half idle timeout, and outlives the idle timeout', { timeout: 20_000 }, async (t) => {
  const gated = gatedTool('Gated');
  const { app, url } = await listening([gated.tool], { connections: { idleTimeoutMs: 2_000 } });
  t.after(() => app.close());
  const { response, items } = await postForEvents(`${url}/tools/Gated`, {});
  assert.equal(response.status, 200, 'the stream began with the first keep-alive');
  assert.equal(response.headers.get('content-type'), 'text/event-stream');
  let comments = 0;
  // Three comments, a second apart: the connection stays open past its idle timeout of 2 s.
  while (comments < 3) {
    const { value } = await items.next();
    assert.ok(value !== undefined && 'comment' in value, `expected a comment, got ${JSON.stringify(value)}`);
    comments += 1;
  }
  gated.runs[0]!.release('finally');
  const rest = await allItems(items);
  assert.deepEqual(events(rest, 'result'), [{ content: [{ type: 'text', text: 'finally' }], isError: false }]);
});

test('a client that goes away from an event stream aborts its call', async (t) => {
  let aborted!: (reason: unknown) => void;
  const abortedWith = new Promise<unknown>((resolve) => (aborted = resolve));
  // Reports once, then runs until it is aborted.
  const Waits: ToolDef = {
    name: 'Waits',
    description: 'Reports once, then waits for its signal.',
    inputSchema: { type: 'object', properties: {} },
    execute: (_input, { progress, signal }) =>
      new Promise((resolve) => {
        progress?.('started');
        signal.addEventListener('abort', () => {
          aborted(signal.reason);
          resolve(textResult('aborted'));
        });
      }),
  };
  const { app, url } = await listening([Waits]);
  t.after(() => app.close());
  // A connection of its own, closed once the first event came (fetch's pool would open another).
  const request = httpRequest(`${url}/tools/Waits`, {
    method: 'POST',
    agent: false,
    headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
  });
  request.end('{}');
  const response = await new Promise<IncomingMessage>((resolve) => request.once('response', resolve));
  const { value } = await readStream(Readable.toWeb(response) as ReadableStream<Uint8Array>).next();
  assert.deepEqual(value, { event: 'progress', data: '{"progress":1,"message":"started"}' });
  request.destroy();
  assert.match(String(((await abortedWith) as Error).message), /disconnected/);
});

test('the OpenAPI document describes the event stream of POST /tools/<name> and POST /calls beside their JSON answers', async (t) => {
  const app = await appWith([Echo, NoArgs], { docs: false, pressure: false });
  t.after(() => app.close());
  const doc = (await app.inject({ url: '/openapi.json' })).json() as {
    paths: Record<string, { post: { responses: Record<string, { content: Record<string, { schema: { type?: string; description?: string } }> }> } }>;
  };
  for (const path of ['/tools/Echo', '/calls']) {
    const content = doc.paths[path]!.post.responses['200']!.content;
    assert.deepEqual(Object.keys(content), ['application/json', 'text/event-stream'], path);
    const events = content['text/event-stream']!.schema;
    assert.equal(events.type, 'string', path);
    for (const part of ['`event: progress`', '"progress": number', '`event: result`', 'Comment lines'])
      assert.ok(events.description!.includes(part), `${path}: ${part}`);
  }
  assert.ok(doc.paths['/calls']!.post.responses['200']!.content['text/event-stream']!.schema.description!.includes('{"id": string, "index": number'));
});
