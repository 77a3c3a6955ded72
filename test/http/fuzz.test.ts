import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdir, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { test, type TestContext } from 'node:test';
import fc from 'fast-check';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { ErrorCodes } from '#src/core/errors.js';
import { buildApp } from '#src/http/app.js';
import { createToolset } from '#src/assembly/toolset.js';
import { Nested, NoArgs } from '../fixtures/tools.js';
import { deepBodies, hostileRequests, nearLimitBodies, pollutingBodies, toolUrl, type HostileRequest, type ToolShape } from '../support/hostile-requests.js';
import { temporaryDirectory } from '../support/workspace.js';

// Small, so bodies near and over the limit are cheap to build and parse.
const BODY_LIMIT = 64 * 1024;
// Bash, Write and Edit stay out: no generated input may run a command or change a file.
const SERVED = ['Echo', 'Read', 'Glob', 'LS', 'Grep'];
// Enough to cover each generator many times over, and the file still runs in seconds.
const RUNS = { mixed: 1000, targeted: 150 };
// Tools that no generated string is kept away from (none: Glob's and LS's patterns are length-capped).
const SPARED: string[] = [];

interface Fixture {
  app: FastifyInstance;
  tools: ToolShape[];
  pathHints: string[];
  /** Text of a file outside the workspace, reachable through a symlink inside it. */
  secret: string;
}

/** The real file tools in a temp workspace (with a symlink out of it) plus two fixture tools. */
async function fixture(t: TestContext): Promise<Fixture> {
  const base = await temporaryDirectory(t, 'toolport-fuzz-');
  const workspace = path.join(base, 'workspace');
  const outside = path.join(base, 'outside');
  const secret = `OUTSIDE-SECRET-${randomBytes(8).toString('hex')}`;
  await mkdir(path.join(workspace, 'sub'), { recursive: true });
  await mkdir(outside);
  await writeFile(path.join(workspace, 'a.txt'), 'alpha\nbeta\n');
  await writeFile(path.join(workspace, 'sub', 'b.md'), '# b\n');
  await writeFile(path.join(outside, 'secret.txt'), `${secret}\n`);
  await symlink(path.join(outside, 'secret.txt'), path.join(workspace, 'link-out'));
  await symlink(outside, path.join(workspace, 'dir-out'));

  const registry = await createToolset({ workspace, bashSandbox: false, plugins: [], tools: SERVED });
  registry.register(NoArgs).register(Nested);
  // No load shedding: a slow test machine must not turn into a 503 that the request did not cause.
  const app = await buildApp({ registry, bodyLimit: BODY_LIMIT, pressure: false });
  t.after(() => app.close());
  const tools = registry.list().map((tool) => ({ name: tool.name, properties: Object.keys(tool.inputSchema.properties ?? {}), schema: tool.inputSchema }));
  const pathHints = [
    'a.txt',
    'sub',
    'sub/b.md',
    '.',
    '..',
    '../outside/secret.txt',
    path.join(outside, 'secret.txt'),
    'link-out',
    'dir-out',
    'dir-out/secret.txt',
    '/',
    '/etc/passwd',
    '/proc/self/environ',
    '~',
    'sub/../../outside',
    '**',
    '**/*',
    '../**',
    '/**/*',
    '*.txt',
    'secret',
    'OUTSIDE',
    '.*',
    '\0',
    'a.txt\0.md',
  ];
  return { app, tools, pathHints, secret };
}

/** The own keys and property descriptors of the built-in prototypes, to compare against later. */
function snapshotPrototypes(): () => void {
  const prototypes = { Object: Object.prototype, Array: Array.prototype, Function: Function.prototype, String: String.prototype };
  const before = Object.entries(prototypes).map(([name, proto]) => ({ name, proto, descriptors: Object.getOwnPropertyDescriptors(proto) }));
  return () => {
    for (const { name, proto, descriptors } of before) {
      assert.deepEqual(Reflect.ownKeys(proto), Reflect.ownKeys(descriptors), `${name}.prototype gained or lost keys`);
      for (const [key, was] of Object.entries(Object.getOwnPropertyDescriptors(proto))) {
        const now = descriptors[key]!;
        assert.ok(was.value === now.value && was.get === now.get && was.set === now.set, `${name}.prototype.${key} was replaced`);
      }
    }
    for (const key of ['polluted', 'isAdmin', 'deep']) {
      assert.equal(({} as Record<string, unknown>)[key], undefined, `({}).${key}`);
      assert.equal(([] as unknown as Record<string, unknown>)[key], undefined, `[].${key}`);
    }
  };
}

function send(app: FastifyInstance, req: HostileRequest): Promise<LightMyRequestResponse> {
  return app.inject({ method: 'POST', url: req.url, headers: req.headers, ...(req.payload !== undefined && { payload: req.payload }) });
}

function describe(req: HostileRequest): string {
  const payload = req.payload === undefined ? '(no body)' : String(req.payload);
  return `POST ${req.url} ${JSON.stringify(req.headers)} ${payload.length > 300 ? `${payload.slice(0, 300)}... (${payload.length} chars)` : payload}`;
}

/** `{content: blocks, isError: boolean}`, and `structuredContent` (an object) only from a tool with an output schema (LS), nothing else; every block well-formed. */
function assertToolResult(body: Record<string, unknown>, what: string): void {
  const structured = 'structuredContent' in body;
  assert.deepEqual(Object.keys(body).sort(), structured ? ['content', 'isError', 'structuredContent'] : ['content', 'isError'], what);
  if (structured) {
    assert.ok(what.startsWith('POST /tools/LS'), `only LS declares an output schema: ${what}`);
    assert.ok(typeof body.structuredContent === 'object' && body.structuredContent !== null && !Array.isArray(body.structuredContent), what);
  }
  assert.equal(typeof body.isError, 'boolean', what);
  assert.ok(Array.isArray(body.content), what);
  for (const block of body.content as Array<Record<string, unknown>>) {
    if (block.type === 'text') assert.deepEqual(Object.keys(block).sort(), ['text', 'type'], what);
    else assert.equal(block.type, 'image', what);
    if (block.type === 'text') assert.equal(typeof block.text, 'string', what);
  }
}

/** The error body: a ToolResult holding the message, plus a catalog code whose status is the response's. */
function assertErrorBody(body: Record<string, unknown>, status: number, what: string): string {
  assert.deepEqual(Object.keys(body).sort(), ['content', 'error', 'isError'], what);
  const error = body.error as Record<string, unknown>;
  assert.ok(
    Object.keys(error).every((k) => ['code', 'message', 'details'].includes(k)),
    what,
  );
  const code = error.code as keyof typeof ErrorCodes;
  assert.ok(Object.hasOwn(ErrorCodes, code), `${what}: code ${String(code)} is not in the catalog`);
  assert.equal(ErrorCodes[code], status, `${what}: ${code} answered with ${status}`);
  assert.equal(typeof error.message, 'string', what);
  assert.deepEqual(body.content, [{ type: 'text', text: error.message }], what);
  assert.equal(body.isError, true, what);
  return code;
}

/**
 * Every answer: below 500, JSON, carrying the request id (the client's own when it sent one), and
 * either a ToolResult (200) or an error body. Returns the error code, if any.
 */
function assertWellFormed(req: HostileRequest, res: LightMyRequestResponse, secret: string): string | undefined {
  const what = `${describe(req)} -> ${res.statusCode} ${res.body.slice(0, 300)}`;
  assert.ok(res.statusCode < 500, what);
  assert.match(String(res.headers['content-type']), /^application\/json/, what);
  const sentId = req.headers['x-request-id'];
  assert.ok(res.headers['x-request-id'], `${what}: no x-request-id`);
  // The client's id is echoed when it is short and plain; anything else is replaced, not logged.
  if (sentId && /^[\w.:-]{1,128}$/.test(sentId)) assert.equal(res.headers['x-request-id'], sentId, what);
  else assert.match(String(res.headers['x-request-id']), /^req-[0-9a-z]+$/, what);
  assert.ok(!res.body.includes(secret), `${what}: a file outside the workspace leaked`);
  const body = JSON.parse(res.body) as Record<string, unknown>;
  if (res.statusCode === 200) {
    assertToolResult(body, what);
    return undefined;
  }
  return assertErrorBody(body, res.statusCode, what);
}

test('POST /tools/:name answers any hostile request with a ToolResult or a catalog error body, never a 5xx, and no prototype changes', async (t) => {
  const { app, tools, pathHints, secret } = await fixture(t);
  await app.inject({ method: 'POST', url: '/tools/Echo', payload: { text: 'warm-up' } });
  const prototypesUntouched = snapshotPrototypes();
  await fc.assert(
    fc.asyncProperty(hostileRequests({ tools, bodyLimit: BODY_LIMIT, pathHints, spared: SPARED }), async (req) => {
      const res = await send(app, req);
      const code = assertWellFormed(req, res, secret);
      if (req.expect) assert.equal(code, req.expect, describe(req));
      prototypesUntouched();
    }),
    { numRuns: RUNS.mixed },
  );
});

test('POST /tools/:name refuses __proto__ and constructor.prototype keys at any depth and in any spelling with 400 INVALID_JSON', async (t) => {
  const { app, tools, secret } = await fixture(t);
  const prototypesUntouched = snapshotPrototypes();
  await fc.assert(
    fc.asyncProperty(pollutingBodies(tools), async (req) => {
      const res = await send(app, req);
      assert.equal(assertWellFormed(req, res, secret), 'INVALID_JSON', describe(req));
      prototypesUntouched();
    }),
    { numRuns: RUNS.targeted },
  );
});

test('POST /tools/:name answers input nested up to 40 000 levels deep with 400 INVALID_INPUT, or 413 past the body limit', async (t) => {
  const { app, tools, secret } = await fixture(t);
  await fc.assert(
    fc.asyncProperty(deepBodies(tools, BODY_LIMIT), async (req) => {
      const res = await send(app, req);
      assert.equal(assertWellFormed(req, res, secret), req.expect, describe(req));
    }),
    { numRuns: RUNS.targeted },
  );
});

test('POST /tools/:name answers 413 PAYLOAD_TOO_LARGE exactly when the body is over the limit, in bytes not characters', async (t) => {
  const { app, tools, secret } = await fixture(t);
  await fc.assert(
    fc.asyncProperty(
      nearLimitBodies(
        tools.filter((tool) => !SPARED.includes(tool.name)),
        BODY_LIMIT,
      ),
      async (req) => {
        const res = await send(app, req);
        const code = assertWellFormed(req, res, secret);
        assert.equal(code === 'PAYLOAD_TOO_LARGE', req.expect === 'PAYLOAD_TOO_LARGE', describe(req));
      },
    ),
    { numRuns: RUNS.targeted },
  );
});

test('POST /tools/:name answers 404 for any name that is no served tool, and never 404 for one that is', async (t) => {
  const { app, tools, secret } = await fixture(t);
  const names = new Set(tools.map((tool) => tool.name));
  await fc.assert(
    fc.asyncProperty(toolUrl(tools), async (url) => {
      const req = { url, headers: { 'content-type': 'application/json' }, payload: '{}' };
      const res = await send(app, req);
      const code = assertWellFormed(req, res, secret);
      const segment = url.slice('/tools/'.length);
      if (names.has(segment)) assert.notEqual(res.statusCode, 404, describe(req));
      else if (!/[?#]/.test(segment)) assert.ok(code === 'TOOL_NOT_FOUND' || code === 'ROUTE_NOT_FOUND', `${describe(req)} -> ${code}`);
    }),
    { numRuns: RUNS.targeted },
  );
});

test('POST /tools/:name with a body and a Content-Type that is not JSON answers 415; with JSON it never does', async (t) => {
  const { app, secret } = await fixture(t);
  const notJson = [
    'text/plain',
    'text/json',
    'application/x-www-form-urlencoded',
    'multipart/form-data; boundary=x',
    'application/jsonp',
    'application/xml',
    '',
  ];
  await fc.assert(
    fc.asyncProperty(
      fc.oneof(fc.constantFrom(...notJson), fc.constantFrom('application/json', 'application/json; charset=utf-8', 'APPLICATION/JSON')),
      fc.json({ maxDepth: 2 }),
      async (type, payload) => {
        const req = { url: '/tools/Echo', headers: { 'content-type': type }, payload };
        const code = assertWellFormed(req, await send(app, req), secret);
        assert.equal(code === 'UNSUPPORTED_MEDIA_TYPE', notJson.includes(type), describe(req));
      },
    ),
    { numRuns: RUNS.targeted },
  );
});

test('POST /tools/:name answers a malformed percent-encoding or an over-long tool name with a catalog error body', async (t) => {
  const { app, secret } = await fixture(t);
  const malformed = fc.constantFrom('%', '%zz', 'Echo%', '%E0%A4%A', '%C0%AF', '%uD83D', 'a%2');
  const overLong = fc.integer({ min: 101, max: 2_000 }).map((n) => 'a'.repeat(n));
  const emoji = fc.integer({ min: 9, max: 40 }).map((n) => encodeURIComponent('💥'.repeat(n)));
  await fc.assert(
    fc.asyncProperty(fc.oneof(malformed, overLong, emoji), async (segment) => {
      const req = { url: `/tools/${segment}`, headers: { 'content-type': 'application/json' }, payload: '{}' };
      assertWellFormed(req, await send(app, req), secret);
    }),
    { numRuns: 30 },
  );
});

test('POST /tools/LS refuses an over-long ignore pattern of nested extglobs before compiling it', async (t) => {
  const { app, secret } = await fixture(t);
  const req = { url: '/tools/LS', headers: { 'content-type': 'application/json' }, payload: JSON.stringify({ path: '.', ignore: ['+('.repeat(6_000)] }) };
  const res = await send(app, req);
  assertWellFormed(req, res, secret);
  // Refused by the schema before any pattern is compiled: compiling it would hold the event loop for seconds.
  assert.equal(res.statusCode, 400);
  assert.equal(res.json().error.code, 'INVALID_INPUT');
});
