import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import type { ToolDef } from '#src/core/types.js';
import { MAX_CALLS_PER_TURN, MAX_TURN_ANSWER_BYTES, MAX_TURN_CONCURRENCY } from '#src/providers/turn-runner.js';
import { Echo } from '#src/tools/echo.js';
import { capturedLog } from '../../support/log-capture.js';
import { allItems, postForEvents } from '../../support/sse-client.js';
import { controllableTool, Nested, Picture, PIXEL, Throws } from '../../fixtures/tools.js';
import { appWith } from '../../support/app.js';
import { errorBody } from '#src/core/errors.js';

type App = Awaited<ReturnType<typeof appWith>>;

function post(app: App, payload: unknown, query = '', headers: Record<string, string> = {}) {
  return app.inject({ method: 'POST', url: `/calls${query}`, payload: JSON.stringify(payload), headers: { 'content-type': 'application/json', ...headers } });
}

const toolUse = (id: string, name: string, input: unknown) => ({ type: 'tool_use', id, name, input });
const text = (t: string) => [{ type: 'text', text: t }];

test('Anthropic: a content array answers the next user message, a tool_result per tool_use in order; other blocks are ignored', async (t) => {
  const app = await appWith([Echo, Nested, Throws]);
  t.after(() => app.close());
  const res = await post(app, [
    { type: 'thinking', thinking: 'let me see', signature: 'sig' },
    { type: 'text', text: 'I will call three tools.' },
    toolUse('toolu_1', 'Echo', { text: 'one' }),
    toolUse('toolu_2', 'Nested', { name: 'x' }),
    toolUse('toolu_3', 'Throws', {}),
    toolUse('toolu_4', 'Nope', {}),
    toolUse('toolu_5', 'Echo', { text: 'five' }),
  ]);
  assert.equal(res.statusCode, 200);
  assert.match(String(res.headers['content-type']), /^application\/json/);
  assert.deepEqual(res.json(), {
    role: 'user',
    content: [
      { type: 'tool_result', tool_use_id: 'toolu_1', content: text('one'), is_error: false },
      {
        type: 'tool_result',
        tool_use_id: 'toolu_2',
        content: text('Invalid input for tool "Nested":\n- $.count: is required\n- $.options: is required'),
        is_error: true,
      },
      { type: 'tool_result', tool_use_id: 'toolu_3', content: text('Tool "Throws" failed: disk on fire'), is_error: true },
      { type: 'tool_result', tool_use_id: 'toolu_4', content: text('Tool "Nope" not found. Available tools: Echo, Nested, Throws.'), is_error: true },
      { type: 'tool_result', tool_use_id: 'toolu_5', content: text('five'), is_error: false },
    ],
  });
});

test('Anthropic: the whole assistant message, or the whole Messages API response, is taken too', async (t) => {
  const app = await appWith([Echo]);
  t.after(() => app.close());
  const expected = { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: text('hi'), is_error: false }] };
  const message = { role: 'assistant', content: [toolUse('toolu_1', 'Echo', { text: 'hi' })] };
  assert.deepEqual((await post(app, message)).json(), expected);
  const response = { id: 'msg_1', type: 'message', model: 'claude', stop_reason: 'tool_use', usage: {}, ...message };
  assert.deepEqual((await post(app, response)).json(), expected);
  // A turn with no tool call (the model's final answer) has nothing to run.
  assert.deepEqual((await post(app, { role: 'assistant', content: [{ type: 'text', text: 'done' }] })).json(), { role: 'user', content: [] });
});

test('OpenAI Chat Completions: tool messages in order; arguments that are not JSON are an error for that call; images go in one user message', async (t) => {
  const app = await appWith([Echo, Picture]);
  t.after(() => app.close());
  const res = await post(app, {
    role: 'assistant',
    content: null,
    tool_calls: [
      { id: 'call_1', type: 'function', function: { name: 'Echo', arguments: '{"text":"a"}' } },
      { id: 'call_2', type: 'function', function: { name: 'Echo', arguments: '{"text":' } },
      { id: 'call_3', type: 'function', function: { name: 'Picture', arguments: '' } },
      { id: 'call_4', type: 'function', function: { name: 'Echo', arguments: '{"text":"b","__proto__":{"x":1}}' } },
    ],
  });
  assert.equal(res.statusCode, 200);
  const notJson = (id: string) =>
    `Error: The arguments of tool call ${id} are not valid JSON (or hold a __proto__ or constructor.prototype key); send the call again with a JSON object of arguments.`;
  assert.deepEqual(res.json(), [
    { role: 'tool', tool_call_id: 'call_1', content: 'a' },
    { role: 'tool', tool_call_id: 'call_2', content: notJson('call_2') },
    { role: 'tool', tool_call_id: 'call_3', content: 'a pixel\n[an image: in the next user message]' },
    { role: 'tool', tool_call_id: 'call_4', content: notJson('call_4') },
    {
      role: 'user',
      content: [
        { type: 'text', text: 'Images returned by tool call call_3:' },
        { type: 'image_url', image_url: { url: `data:image/png;base64,${PIXEL}` } },
      ],
    },
  ]);
  // Its tool_calls array alone, and an assistant message without tool calls.
  const alone = await post(app, [{ id: 'call_9', type: 'function', function: { name: 'Echo', arguments: '{"text":"x"}' } }]);
  assert.deepEqual(alone.json(), [{ role: 'tool', tool_call_id: 'call_9', content: 'x' }]);
  assert.deepEqual((await post(app, { role: 'assistant', content: 'All done.' })).json(), []);
});

test('OpenAI Responses: function_call items answer as function_call_output items; images as input parts', async (t) => {
  const app = await appWith([Echo, Picture]);
  t.after(() => app.close());
  const output = [
    { type: 'reasoning', id: 'rs_1', summary: [] },
    { type: 'function_call', id: 'fc_1', call_id: 'call_a', name: 'Echo', arguments: '{"text":"x"}', status: 'completed' },
    { type: 'message', id: 'msg_1', role: 'assistant', content: [{ type: 'output_text', text: 'and a picture' }] },
    { type: 'function_call', id: 'fc_2', call_id: 'call_b', name: 'Picture', arguments: '{}', status: 'completed' },
  ];
  const expected = [
    { type: 'function_call_output', call_id: 'call_a', output: 'x' },
    {
      type: 'function_call_output',
      call_id: 'call_b',
      output: [
        { type: 'input_text', text: 'a pixel' },
        { type: 'input_image', image_url: `data:image/png;base64,${PIXEL}` },
      ],
    },
  ];
  assert.deepEqual((await post(app, output)).json(), expected);
  assert.deepEqual((await post(app, { id: 'resp_1', object: 'response', output })).json(), expected);
});

test("a turn that is no provider's, or mixes two, or is not the one ?format= names, is a 400 that says what was expected", async (t) => {
  const app = await appWith([Echo]);
  t.after(() => app.close());
  const bad = async (payload: unknown, query: string, message: string) => {
    const res = await post(app, payload, query);
    assert.equal(res.statusCode, 400, JSON.stringify(payload));
    assert.deepEqual(res.json(), errorBody('BAD_REQUEST', message));
  };
  await bad(
    [toolUse('toolu_1', 'Echo', {}), { type: 'function_call', call_id: 'c', name: 'Echo', arguments: '{}' }],
    '',
    "The turn is ambiguous: its items mix anthropic and openai-responses tool calls; send one provider's turn, or say which with ?format=.",
  );
  await bad({ content: [], output: [] }, '', 'The turn is ambiguous: it has "content" and "output" arrays; send one of them, or say which with ?format=.');
  await bad(
    { role: 'assistant', content: [toolUse('toolu_1', 'Echo', {})] },
    '?format=openai-responses',
    'Not a turn in the openai-responses format: got an object with keys "role", "content"; expected an OpenAI Responses API response ({"output": [...]}), or its output items with function_call items ({"type": "function_call", "call_id", "name", "arguments"}).',
  );
  await bad([toolUse('', 'Echo', {})], '', 'content[0] has no id: every tool call needs its id, to answer it.');
  await bad(
    [{ id: 'call_1', type: 'function', function: { name: 'Echo', arguments: { text: 'x' } } }],
    '',
    'tool_calls[0] (call_1): function.arguments must be a JSON text, as the API returns it.',
  );
  const expected = [
    '- anthropic: an Anthropic assistant message ({"role": "assistant", "content": [...]}), or its content array of blocks with tool_use blocks ({"type": "tool_use", "id", "name", "input"})',
    '- openai: an OpenAI Chat Completions assistant message ({"role": "assistant", "tool_calls": [...]}), or its tool_calls array ({"id", "type": "function", "function": {"name", "arguments"}})',
    '- openai-responses: an OpenAI Responses API response ({"output": [...]}), or its output items with function_call items ({"type": "function_call", "call_id", "name", "arguments"})',
  ].join('\n');
  await bad({ hello: 'world' }, '', `The body is not an assistant's turn: it has no "content", "tool_calls" or "output" array; expected one of:\n${expected}`);
  await bad('text', '', `The body must be a JSON object or array holding an assistant's turn; expected one of:\n${expected}`);

  const unknownFormat = await post(app, [], '?format=gemini');
  assert.equal(unknownFormat.statusCode, 400);
  assert.equal(unknownFormat.json().error.code, 'INVALID_QUERY');
});

test(`a turn of more than ${MAX_CALLS_PER_TURN} calls is refused whole, and runs nothing`, async (t) => {
  const { lines, logger } = capturedLog();
  const app = await appWith([Echo], { logger });
  t.after(() => app.close());
  const calls = Array.from({ length: MAX_CALLS_PER_TURN + 1 }, (_, i) => toolUse(`toolu_${i}`, 'Echo', { text: String(i) }));
  const res = await post(app, calls);
  assert.equal(res.statusCode, 400);
  const message = `The turn holds ${MAX_CALLS_PER_TURN + 1} tool calls; at most ${MAX_CALLS_PER_TURN} are taken in one request.`;
  assert.deepEqual(res.json(), errorBody('BAD_REQUEST', message, { calls: MAX_CALLS_PER_TURN + 1, limit: MAX_CALLS_PER_TURN }));
  assert.equal(lines.filter((l) => l.msg === 'tool call').length, 0);
  assert.equal((await post(app, calls.slice(1))).statusCode, 200, 'exactly the limit is taken');
});

test('each call of a turn counts against the rate limit: past it, a call is an error result; the next request is a 429', async (t) => {
  const app = await appWith([Echo], { rateLimit: 3 });
  t.after(() => app.close());
  const res = await post(
    app,
    [1, 2, 3, 4, 5].map((i) => toolUse(`toolu_${i}`, 'Echo', { text: String(i) })),
  );
  assert.equal(res.statusCode, 200);
  const results = res.json().content as { tool_use_id: string; is_error: boolean; content: { text: string }[] }[];
  assert.deepEqual(
    results.map((r) => [r.tool_use_id, r.is_error]),
    [
      ['toolu_1', false],
      ['toolu_2', false],
      ['toolu_3', false],
      ['toolu_4', true],
      ['toolu_5', true],
    ],
  );
  assert.match(results[3]!.content[0]!.text, /^Rate limit exceeded: this client address may make 3 requests per minute; retry in \d+ s\.$/);
  const next = await post(app, [toolUse('toolu_6', 'Echo', { text: '6' })]);
  assert.equal(next.statusCode, 429);
  assert.equal(next.json().error.code, 'RATE_LIMITED');
});

test('a scoped key gets an error result for a tool outside its scope, and the other calls run', async (t) => {
  const key = 'scoped-key-0123456789abcdef';
  const app = await appWith([Echo, Nested], { apiKeys: [{ label: 'bot', key, tools: ['Echo'] }] });
  t.after(() => app.close());
  const res = await post(app, [toolUse('toolu_1', 'Nested', {}), toolUse('toolu_2', 'Echo', { text: 'ok' })], '', { authorization: `Bearer ${key}` });
  assert.deepEqual(res.json().content, [
    { type: 'tool_result', tool_use_id: 'toolu_1', content: text('API key "bot" may not use tool "Nested"; it may use Echo.'), is_error: true },
    { type: 'tool_result', tool_use_id: 'toolu_2', content: text('ok'), is_error: false },
  ]);
  const anonymous = await post(app, [toolUse('toolu_1', 'Echo', { text: 'x' })]);
  assert.equal(anonymous.statusCode, 401);
});

test('every call of a turn gets its audit line: ran or refused, with the tool, the request id and transport calls', async (t) => {
  const { lines, logger } = capturedLog();
  const app = await appWith([Echo], { logger });
  t.after(() => app.close());
  await post(app, [toolUse('toolu_1', 'Echo', { text: 'x' }), toolUse('toolu_2', 'Echo', { wrong: 1 })], '', { 'x-request-id': 'turn-1' });
  const ran = lines.filter((l) => l.msg === 'tool call');
  const refused = lines.filter((l) => l.msg === 'tool call refused');
  assert.deepEqual(
    ran.map((l) => [l.reqId, l.tool, l.outcome, l.transport]),
    [['turn-1', 'Echo', 'ok', 'calls']],
  );
  assert.deepEqual(
    refused.map((l) => [l.reqId, l.tool, l.code, l.transport]),
    [['turn-1', 'Echo', 'INVALID_INPUT', 'calls']],
  );
});

test('the read-only calls of a turn run at once, and a client that goes away aborts every one of them', async (t) => {
  const first = controllableTool('SlowA');
  const second = controllableTool('SlowB');
  const readOnly = { annotations: { readOnlyHint: true } };
  const app = await appWith([
    { ...first.tool, ...readOnly },
    { ...second.tool, ...readOnly },
  ]);
  t.after(() => app.close());
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as AddressInfo;
  const body = JSON.stringify([toolUse('toolu_1', 'SlowA', {}), toolUse('toolu_2', 'SlowB', {})]);
  const req = httpRequest({ port, method: 'POST', path: '/calls', headers: { 'content-type': 'application/json' } });
  req.on('error', () => {});
  req.end(body);
  // Both started before either answered: they run at once.
  await Promise.all([first.started, second.started]);
  req.destroy();
  const reasons = await Promise.all([first.aborted, second.aborted]);
  for (const reason of reasons) assert.equal((reason as Error).message, 'the client disconnected');
});

test('the results of one turn are bounded: a result that would take the answer past the limit is replaced by an error saying so', async (t) => {
  const size = Math.floor(MAX_TURN_ANSWER_BYTES / 2.5);
  const Big: ToolDef = {
    name: 'Big',
    description: 'Returns a large text.',
    inputSchema: { type: 'object' },
    execute: () => ({ content: [{ type: 'text', text: 'x'.repeat(size) }] }),
  };
  const app = await appWith([Big]);
  t.after(() => app.close());
  const res = await post(
    app,
    [1, 2, 3].map((i) => toolUse(`toolu_${i}`, 'Big', {})),
  );
  assert.equal(res.statusCode, 200);
  const results = res.json().content as { is_error: boolean; content: { text: string }[] }[];
  assert.deepEqual(results.map((r) => r.is_error).sort(), [false, false, true]);
  const dropped = results.find((r) => r.is_error)!;
  assert.equal(
    dropped.content[0]!.text,
    `Tool "Big" ran, but its result (${size + 64} bytes) is left out: the results of one turn may take at most ${MAX_TURN_ANSWER_BYTES} bytes. Make fewer or smaller calls per turn (a Read with offset and limit, say).`,
  );
  assert.ok(res.body.length < MAX_TURN_ANSWER_BYTES + 4096);
});

test('an id longer than 256 characters refuses the turn; a tool name longer than 64 is an error for that call, not echoed whole', async (t) => {
  const { lines, logger } = capturedLog();
  const app = await appWith([Echo], { logger });
  t.after(() => app.close());
  const longId = await post(app, [toolUse('i'.repeat(257), 'Echo', {})]);
  assert.equal(longId.statusCode, 400);
  assert.deepEqual(longId.json(), errorBody('BAD_REQUEST', 'content[0] has an id of 257 characters; at most 256 are taken.'));
  const longName = await post(app, [toolUse('toolu_1', 'N'.repeat(100_000), {}), toolUse('toolu_2', 'Echo', { text: 'ok' })]);
  assert.deepEqual(longName.json().content, [
    {
      type: 'tool_result',
      tool_use_id: 'toolu_1',
      content: text('Tool call toolu_1 names a tool of 100000 characters; tool names have at most 64.'),
      is_error: true,
    },
    { type: 'tool_result', tool_use_id: 'toolu_2', content: text('ok'), is_error: false },
  ]);
  const refused = lines.filter((l) => l.msg === 'tool call refused');
  assert.deepEqual(
    refused.map((l) => l.code),
    ['BAD_REQUEST', 'INVALID_INPUT'],
  );
  assert.equal(String(refused[1]!.tool).length, 67);
});

test(`at most ${MAX_TURN_CONCURRENCY} (read-only) calls of one turn run at once, so one turn cannot take a tool's whole queue`, async (t) => {
  let running = 0;
  let most = 0;
  const releases: (() => void)[] = [];
  const Gate: ToolDef = {
    name: 'Gate',
    description: 'Waits to be let through.',
    inputSchema: { type: 'object' },
    annotations: { readOnlyHint: true },
    execute: async () => {
      most = Math.max(most, ++running);
      await new Promise<void>((resolve) => releases.push(resolve));
      running--;
      return { content: [{ type: 'text', text: 'through' }] };
    },
  };
  const app = await appWith([Gate], { maxConcurrency: 64, queueSize: 64 });
  t.after(() => app.close());
  const answer = post(
    app,
    Array.from({ length: 20 }, (_, i) => toolUse(`toolu_${i}`, 'Gate', {})),
  );
  // The pool fills to its size and no further; each time, let that many through.
  for (const expected of [8, 8, 4]) {
    const deadline = Date.now() + 10_000;
    while (releases.length < expected) {
      assert.ok(Date.now() < deadline, `timed out waiting for ${expected} calls to run`);
      await new Promise((resolve) => setImmediate(resolve));
    }
    for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
    assert.equal(releases.length, expected, "no call past the pool's size starts");
    for (const release of releases.splice(0)) release();
  }
  const res = await answer;
  assert.equal(res.json().content.length, 20);
  assert.equal(most, MAX_TURN_CONCURRENCY);
});

test("a /calls body that is not JSON, or not sent as JSON, is refused with errors that speak of the assistant's turn", async (t) => {
  const app = await appWith([Echo]);
  t.after(() => app.close());
  const notJson = await app.inject({ method: 'POST', url: '/calls', payload: '[{"type":', headers: { 'content-type': 'application/json' } });
  assert.equal(notJson.statusCode, 400);
  assert.deepEqual(
    notJson.json(),
    errorBody(
      'INVALID_JSON',
      "Request body is not valid JSON (or it holds a forbidden __proto__ or constructor.prototype key); send the assistant's turn as a JSON object.",
    ),
  );
  const asText = await app.inject({ method: 'POST', url: '/calls', payload: '[]', headers: { 'content-type': 'text/plain' } });
  assert.equal(asText.statusCode, 415);
  assert.deepEqual(asText.json(), errorBody('UNSUPPORTED_MEDIA_TYPE', `Unsupported Content-Type "text/plain": send the assistant's turn as application/json.`));
  const latin1 = await app.inject({ method: 'POST', url: '/calls', payload: '[]', headers: { 'content-type': 'application/json; charset=latin1' } });
  assert.equal(latin1.statusCode, 415);
  assert.deepEqual(latin1.json(), errorBody('UNSUPPORTED_MEDIA_TYPE', `Unsupported charset "latin1": send the assistant's turn as UTF-8 JSON.`));
});

/** Reports three steps (read-only, so the calls of a turn run together), then answers its name. */
const Steps: ToolDef = {
  name: 'Steps',
  description: 'Reports progress three times.',
  inputSchema: { type: 'object', properties: { name: { type: 'string' } }, additionalProperties: false },
  annotations: { readOnlyHint: true },
  execute: async (input, { progress }) => {
    for (let i = 1; i <= 3; i++) progress?.({ progress: i, total: 3, message: `${String(input.name)} step ${i}` });
    return { content: [{ type: 'text', text: `${String(input.name)} done` }] };
  },
};

test("POST /calls with Accept: text/event-stream streams each call's progress naming its call, then the answer as the result event; a refused turn stays JSON", async (t) => {
  const app = await appWith([Steps, Echo]);
  t.after(() => app.close());
  await app.listen({ port: 0, host: '127.0.0.1' });
  const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/calls`;
  const turn = [toolUse('toolu_a', 'Steps', { name: 'a' }), toolUse('toolu_e', 'Echo', { text: 'quiet' }), toolUse('toolu_b', 'Steps', { name: 'b' })];
  const { response, items } = await postForEvents(url, turn);
  assert.equal(response.status, 200);
  assert.equal(response.headers.get('content-type'), 'text/event-stream');
  const all = await allItems(items);
  const events = all.filter((i): i is { event: string; data: string } => 'event' in i);
  assert.equal(events.at(-1)!.event, 'result');
  const progress = events.filter((e) => e.event === 'progress').map((e) => JSON.parse(e.data) as Record<string, unknown>);
  for (const [index, id, name] of [
    [0, 'toolu_a', 'a'],
    [2, 'toolu_b', 'b'],
  ] as const) {
    const own = progress.filter((p) => p.id === id);
    assert.ok(own.length >= 1 && own.every((p) => p.index === index), `the events of ${id} name it and its index`);
    assert.deepEqual(own.at(-1), { id, index, progress: 3, total: 3, message: `${name} step 3` });
  }
  assert.equal(progress.filter((p) => p.id === 'toolu_e').length, 0, 'a call without progress has no events');
  const plain = await post(app, turn);
  assert.deepEqual(JSON.parse(events.at(-1)!.data), plain.json(), 'the result event carries the answer JSON would have');
  assert.deepEqual(
    plain.json().content.map((c: { content: Array<{ text: string }> }) => c.content[0]!.text),
    ['a done', 'quiet', 'b done'],
  );

  // A turn refused whole is refused before any stream: its status and error body, as without it.
  const refused = await post(app, { hello: 'world' }, '', { accept: 'text/event-stream' });
  assert.equal(refused.statusCode, 400);
  assert.match(String(refused.headers['content-type']), /^application\/json/);
  assert.equal(refused.json().error.code, 'BAD_REQUEST');
});
