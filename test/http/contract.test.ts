// The published contract, replayed: every status every operation of the OpenAPI document names
// is produced by a real request injected into the app, and every answer (these and more: each
// format, each dialect, images, error results) is checked against the document's schema for that
// operation and status. A response the document does not describe, or a documented status no
// request here produces, fails the test.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Ajv2020 } from 'ajv/dist/2020.js';
import type { ValidateFunction } from 'ajv';
import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import type { ToolDef } from '#src/core/types.js';
import type { buildApp } from '#src/http/app.js';
import { Echo } from '#src/tools/echo.js';
import { appWith } from '../support/app.js';

const PIXEL = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';
const Picture: ToolDef = {
  name: 'Picture',
  description: 'Returns a caption and a 1x1 PNG.',
  inputSchema: { type: 'object', properties: {}, additionalProperties: false },
  annotations: { title: 'A picture', readOnlyHint: true },
  execute: () => ({
    content: [
      { type: 'text', text: 'a pixel' },
      { type: 'image', source: { type: 'base64', media_type: 'image/png', data: PIXEL } },
    ],
  }),
};
const KEY = 'contract-test-secret-0123456789';
const SCOPED_KEY = 'contract-scoped-secret-0123456789';
const JSON_BODY = { 'content-type': 'application/json' };

type App = Awaited<ReturnType<typeof buildApp>>;

interface Operation {
  operationId: string;
  responses: Record<string, unknown>;
}
interface Document {
  paths: Record<string, Record<string, Operation>>;
}

/** Validators of the document's responses, by operation and status, with every $ref resolved in the document. */
class Contract {
  readonly #ajv = new Ajv2020({ strict: false, validateSchema: false, allErrors: true });
  readonly #validators = new Map<string, ValidateFunction>();
  /** "operationId status" of every answer seen. */
  readonly seen = new Set<string>();

  constructor(readonly doc: Document) {
    this.#ajv.addSchema(doc as object, 'openapi.json');
  }

  /** Every "operationId status" the document names. */
  documented(): string[] {
    return Object.values(this.doc.paths).flatMap((item) =>
      Object.values(item).flatMap((op) => Object.keys(op.responses).map((status) => `${op.operationId} ${status}`)),
    );
  }

  /** Checks an answer against the document: the status is documented for the operation, and the body holds its schema. */
  check(method: string, url: string, res: LightMyRequestResponse): void {
    const path = url.split('?')[0]!;
    const template = this.doc.paths[path]?.[method.toLowerCase()]
      ? path
      : path.replace(/^\/tools\/[^/]+$/, '/tools/{name}').replace(/^\/tasks\/[^/]+$/, '/tasks/{id}');
    const op = this.doc.paths[template]?.[method.toLowerCase()];
    assert.ok(op, `${method} ${path} is not in the document`);
    const status = String(res.statusCode);
    assert.ok(op.responses[status], `${op.operationId} answered ${status}, which the document does not name: ${res.body}`);
    if (status === '304') {
      // Not Modified: no body, and the document promises none.
      assert.equal(res.body, '');
      assert.equal((op.responses[status] as { content?: unknown }).content, undefined, `${op.operationId} 304 documents a body`);
      this.seen.add(`${op.operationId} ${status}`);
      return;
    }
    assert.match(String(res.headers['content-type']), /^application\/json/, `${op.operationId} ${status} is not JSON`);
    const pointer = `openapi.json#/paths/${template.replaceAll('~', '~0').replaceAll('/', '~1')}/${method.toLowerCase()}/responses/${status}/content/application~1json/schema`;
    let validate = this.#validators.get(pointer);
    if (validate === undefined) {
      validate = this.#ajv.getSchema(pointer);
      assert.ok(validate, `no schema at ${pointer}`);
      this.#validators.set(pointer, validate);
    }
    assert.ok(validate(res.json()), `${op.operationId} ${status} does not hold its schema: ${JSON.stringify(validate.errors)}\n${res.body}`);
    this.seen.add(`${op.operationId} ${status}`);
  }

  /** Injects `request` into `app`, checks the status and, for an error, its code; then checks the answer against the document. */
  async replay(app: App, request: InjectOptions & { url: string }, status: number, code?: string): Promise<LightMyRequestResponse> {
    const method = request.method ?? 'GET';
    const res = await app.inject(request);
    assert.equal(res.statusCode, status, `${method} ${request.url}: ${res.body}`);
    if (code !== undefined) assert.equal(res.json().error.code, code, `${method} ${request.url}`);
    this.check(method, request.url, res);
    return res;
  }
}

const post = (url: string, payload: unknown, headers: Record<string, string> = {}): InjectOptions & { url: string } => ({
  method: 'POST',
  url,
  payload: JSON.stringify(payload),
  headers: { ...JSON_BODY, ...headers },
});

const anthropicTurn = {
  role: 'assistant',
  content: [
    { type: 'tool_use', id: 'toolu_1', name: 'Echo', input: { text: 'hi' } },
    { type: 'tool_use', id: 'toolu_2', name: 'Picture', input: {} },
  ],
};
const openaiTurn = {
  role: 'assistant',
  tool_calls: [
    { id: 'call_1', type: 'function', function: { name: 'Echo', arguments: '{"text":"hi"}' } },
    { id: 'call_2', type: 'function', function: { name: 'Picture', arguments: '{}' } },
    { id: 'call_3', type: 'function', function: { name: 'Nope', arguments: '{}' } },
  ],
};
const responsesTurn = [
  { type: 'function_call', call_id: 'call_a', name: 'Echo', arguments: '{"text":"hi"}' },
  { type: 'function_call', call_id: 'call_b', name: 'Picture', arguments: '{}' },
];

const UNKNOWN_TASK = 'task_AAAAAAAAAAAAAAAAAAAAAA';

/** A request each operation answers with 200 (the task operations, given a task of the caller), to be refused in the ways every operation can be. */
function validRequest(operationId: string, taskId = UNKNOWN_TASK): InjectOptions & { url: string } {
  switch (operationId) {
    case 'listTasks':
      return { url: '/tasks' };
    case 'getTask':
      return { url: `/tasks/${taskId}` };
    case 'cancelTask':
      return { method: 'DELETE', url: `/tasks/${taskId}` };
    case 'healthz':
      return { url: '/healthz' };
    case 'readyz':
      return { url: '/readyz' };
    case 'listTools':
      return { url: '/tools' };
    case 'getTool':
      return { url: '/tools/Echo' };
    case 'callTools':
      return post('/calls', anthropicTurn);
    default:
      return post(`/tools/${operationId}`, operationId === 'Echo' ? { text: 'hi' } : {});
  }
}

test('every status of every operation in the OpenAPI document is produced by a real request, and every answer holds its documented schema', async (t) => {
  const plain = await appWith([Echo, Picture], { pressure: false });
  t.after(() => plain.close());
  const contract = new Contract((await plain.inject({ url: '/openapi.json' })).json<Document>());
  const operations = Object.values(contract.doc.paths).flatMap((item) => Object.values(item).map((op) => op.operationId));
  const posts = operations.filter((id) => validRequest(id).method === 'POST');

  // 202: a call run as a task; then 200, in every shape the query can ask for.
  const task = await contract.replay(plain, post('/tools/Echo', { text: 'hi' }, { prefer: 'respond-async' }), 202);
  await contract.replay(plain, post('/tools/Picture', {}, { prefer: 'respond-async' }), 202);
  for (const op of operations) await contract.replay(plain, validRequest(op, task.json<{ id: string }>().id), 200);
  for (const format of ['anthropic', 'openai', 'openai-responses', 'mcp']) {
    await contract.replay(plain, { url: `/tools?format=${format}` }, 200);
    await contract.replay(plain, { url: `/tools/Picture?format=${format}` }, 200);
  }
  const listed = await contract.replay(plain, { url: '/tools' }, 200);
  await contract.replay(plain, { url: '/tools', headers: { 'if-none-match': String(listed.headers.etag) } }, 304);
  for (const format of ['openai', 'openai-responses']) {
    await contract.replay(plain, { url: `/tools?format=${format}&strict=true` }, 200);
    await contract.replay(plain, { url: `/tools/Echo?format=${format}&strict=true` }, 200);
  }
  for (const tool of ['Echo', 'Picture']) {
    const input = tool === 'Echo' ? { text: 'hi' } : {};
    for (const query of ['', '?format=anthropic&id=toolu_1', '?format=openai&id=call_1', '?format=openai-responses&id=call_1', '?format=mcp']) {
      await contract.replay(plain, post(`/tools/${tool}${query}`, input), 200);
    }
  }
  // A refusal in a provider's shape is an error result, answered 200.
  await contract.replay(plain, post('/tools/Echo?format=anthropic&id=toolu_1', { wrong: 1 }), 200);
  await contract.replay(plain, post('/calls', openaiTurn), 200);
  await contract.replay(plain, post('/calls', responsesTurn), 200);
  await contract.replay(plain, post('/calls?format=openai-responses', { output: responsesTurn }), 200);
  await contract.replay(plain, post('/calls', []), 200);

  // 400: bad JSON, bad input, bad query, a body that is no turn.
  await contract.replay(plain, { url: '/tools?format=gemini' }, 400, 'INVALID_QUERY');
  await contract.replay(plain, { url: '/tools?format=anthropic&strict=true' }, 400, 'INVALID_QUERY');
  await contract.replay(plain, { url: '/tools/Echo?verbose=1' }, 400, 'INVALID_QUERY');
  for (const op of posts) {
    await contract.replay(plain, { method: 'POST', url: validRequest(op).url, payload: '{"text":', headers: JSON_BODY }, 400, 'INVALID_JSON');
    await contract.replay(plain, post(`${validRequest(op).url}?format=gemini`, {}), 400, 'INVALID_QUERY');
  }
  for (const tool of ['Echo', 'Picture']) await contract.replay(plain, post(`/tools/${tool}`, { unknown: true }), 400, 'INVALID_INPUT');
  await contract.replay(plain, post('/tools/Echo?id=call_1', { text: 'hi' }), 400, 'INVALID_QUERY');
  await contract.replay(plain, post('/calls', { hello: 'world' }), 400, 'BAD_REQUEST');
  // 404: the generic route, for a tool that does not exist.
  await contract.replay(plain, { url: '/tools/Nope' }, 404, 'TOOL_NOT_FOUND');
  // 404: a task that is not the caller's (or no task at all).
  await contract.replay(plain, validRequest('getTask'), 404, 'TASK_NOT_FOUND');
  await contract.replay(plain, validRequest('cancelTask'), 404, 'TASK_NOT_FOUND');
  // 429 and 503 of a task: the caller's cap, the server's.
  const capped = await appWith([Echo, Picture], { pressure: false, callTasks: { maxPerCaller: 0 } });
  t.after(() => capped.close());
  await contract.replay(capped, post('/tools/Echo', { text: 'hi' }, { prefer: 'respond-async' }), 429, 'TOO_MANY_TASKS');
  const full = await appWith([Echo, Picture], { pressure: false, callTasks: { maxTotal: 0 } });
  t.after(() => full.close());
  await contract.replay(full, post('/tools/Echo', { text: 'hi' }, { prefer: 'respond-async' }), 503, 'TASKS_FULL');
  // 413 and 415: the body.
  for (const op of posts) {
    await contract.replay(plain, post(validRequest(op).url, { text: 'x'.repeat(2 * 1024 * 1024) }), 413, 'PAYLOAD_TOO_LARGE');
    await contract.replay(
      plain,
      { method: 'POST', url: validRequest(op).url, payload: 'text=hi', headers: { 'content-type': 'text/plain' } },
      415,
      'UNSUPPORTED_MEDIA_TYPE',
    );
  }

  // 401 without a key, 403 for a tool outside the key's scope.
  const keyed = await appWith([Echo, Picture], {
    pressure: false,
    apiKeys: [
      { label: 'full', key: KEY },
      { label: 'echo-only', key: SCOPED_KEY, tools: ['Echo'] },
    ],
  });
  t.after(() => keyed.close());
  for (const op of operations) {
    const open = op === 'healthz' || op === 'readyz';
    await contract.replay(keyed, validRequest(op), open ? 200 : 401, open ? undefined : 'UNAUTHORIZED');
  }
  const scoped = { authorization: `Bearer ${SCOPED_KEY}` };
  await contract.replay(keyed, { url: '/tools/Picture', headers: scoped }, 403, 'FORBIDDEN');
  await contract.replay(keyed, post('/tools/Picture', {}, scoped), 403, 'FORBIDDEN');
  await contract.replay(keyed, { url: '/tools', headers: scoped }, 200);

  // 403: a foreign Host on a loopback server, for every operation.
  const loopback = await appWith([Echo, Picture], { pressure: false, localOnly: true });
  t.after(() => loopback.close());
  for (const op of operations) {
    const request = validRequest(op);
    await contract.replay(loopback, { ...request, headers: { ...request.headers, host: 'rebound.example' } }, 403, 'FORBIDDEN');
  }

  // 429: over the rate limit (the probes are never limited).
  const limited = await appWith([Echo, Picture], { pressure: false, rateLimit: 1 });
  t.after(() => limited.close());
  await limited.inject({ url: '/tools' });
  for (const op of operations.filter((id) => id !== 'healthz' && id !== 'readyz')) await contract.replay(limited, validRequest(op), 429, 'RATE_LIMITED');

  // 500: a failure of the service itself, wherever it happens.
  const faulty = await appWith([Echo, Picture], { pressure: false });
  t.after(() => faulty.close());
  faulty.addHook('onRequest', async () => {
    throw new Error('the service broke');
  });
  for (const op of operations) await contract.replay(faulty, validRequest(op), 500, 'INTERNAL_ERROR');

  // 503: shutting down (liveness still answers).
  const draining = await appWith([Echo, Picture], { pressure: false });
  t.after(() => draining.close());
  draining.toolport.gateway.drain();
  for (const op of operations.filter((id) => id !== 'healthz')) await contract.replay(draining, validRequest(op), 503, 'SHUTTING_DOWN');

  const missing = contract.documented().filter((pair) => !contract.seen.has(pair));
  assert.deepEqual(missing, [], 'documented answers no request produced');
});

test('the contract check fails an answer the document does not describe', async (t) => {
  const app = await appWith([Echo, Picture], { pressure: false });
  t.after(() => app.close());
  const doc = (await app.inject({ url: '/openapi.json' })).json<Document>();
  // A document that claims GET /tools answers an object, as it once did.
  doc.paths['/tools']!.get!.responses['200'] = { description: 'The tool definitions.', content: { 'application/json': { schema: { type: 'object' } } } };
  const contract = new Contract(doc);
  await assert.rejects(contract.replay(app, { url: '/tools' }, 200), /listTools 200 does not hold its schema/);
  // A status the operation does not name, and a route the document does not have.
  delete doc.paths['/tools']!.get!.responses['400'];
  await assert.rejects(contract.replay(app, { url: '/tools?format=gemini' }, 400), /listTools answered 400, which the document does not name/);
  await assert.rejects(contract.replay(app, { url: '/nope' }, 404), /GET \/nope is not in the document/);
});
