import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import SwaggerParser from '@apidevtools/swagger-parser';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { ToolRegistry } from '#src/core/registry.js';
import { buildApp } from '#src/http/app.js';
import { toolsDocument, type OpenAPIDocument } from '#src/http/openapi/tools-document.js';
import { createToolset } from '#src/assembly/toolset.js';
import { Echo } from '#src/tools/echo.js';
import { Files } from '../../fixtures/plugins/structured-tools.js';
import { withTemporaryDirectory } from '../../support/workspace.js';

const ROOT = path.resolve(import.meta.dirname, '../../..');
const COMMITTED = path.join(ROOT, 'openapi/openapi.json');
const REDOCLY = path.join(ROOT, 'node_modules/@redocly/cli/bin/cli.js');

/** The document the code generates for the built-in tools, as `npm run openapi` writes it. */
async function generatedDocument(): Promise<Record<string, unknown>> {
  return withTemporaryDirectory('toolport-openapi-', async (workspace) => {
    const registry = await createToolset({ workspace, bashSandbox: false, plugins: [], tools: undefined });
    const app = await buildApp({ registry });
    await app.ready();
    const doc = JSON.parse(JSON.stringify(app.openapiDocument())) as Record<string, unknown>;
    await app.close();
    return doc;
  });
}

test('the committed openapi/openapi.json matches what the code generates (run `npm run openapi` to update it)', async () => {
  const committed = JSON.parse(await readFile(COMMITTED, 'utf8')) as unknown;
  assert.deepEqual(committed, await generatedDocument(), 'openapi/openapi.json is stale: run `npm run openapi` and commit the result');
});

test('the OpenAPI document passes a real OpenAPI 3.1 validator', async () => {
  const doc = await generatedDocument();
  await SwaggerParser.validate(structuredClone(doc) as never);
  assert.equal(doc.openapi, '3.1.0');
});

interface LintProblem {
  ruleId: string;
  severity: string;
  message: string;
  location: Array<{ pointer: string }>;
}

/** The problems `redocly lint` finds in `doc` with the repository's redocly.yaml (the recommended rules), offline. */
async function redoclyProblems(doc: unknown): Promise<LintProblem[]> {
  return withTemporaryDirectory('toolport-redocly-', async (dir) => {
    const file = path.join(dir, 'openapi.json');
    await writeFile(file, JSON.stringify(doc));
    const env = { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' };
    const args = [REDOCLY, 'lint', file, '--format=json', `--config=${path.join(ROOT, 'redocly.yaml')}`];
    // It exits 1 when it finds errors; the report on stdout says which either way.
    const { stdout } = await promisify(execFile)(process.execPath, args, { env, cwd: dir }).catch((err: { stdout?: string }) => ({ stdout: err.stdout ?? '' }));
    const report = JSON.parse(stdout) as { totals: { errors: number; warnings: number }; problems: LintProblem[] };
    return report.problems;
  });
}

const describeProblems = (problems: LintProblem[]): string =>
  problems.map((p) => `${p.severity} ${p.ruleId} at ${p.location[0]?.pointer ?? '?'}: ${p.message}`).join('\n');

test('redocly lint with the recommended rules finds no problem in the OpenAPI document, not even a warning', async () => {
  const problems = await redoclyProblems(await generatedDocument());
  assert.deepEqual(problems, [], describeProblems(problems));
});

test('the tools-only document passes redocly lint and swagger-parser too', async () => {
  const doc = toolsDocument((await generatedDocument()) as unknown as OpenAPIDocument);
  await SwaggerParser.validate(structuredClone(doc) as never);
  const problems = await redoclyProblems(doc);
  assert.deepEqual(problems, [], describeProblems(problems));
});

test('redocly lint reports what the recommended rules refuse, so a clean report means something', async () => {
  const doc = await generatedDocument();
  delete doc.servers;
  const paths = doc.paths as Record<string, { get?: { responses: Record<string, unknown> } }>;
  paths['/healthz']!.get!.responses = { 200: paths['/healthz']!.get!.responses['200'] };
  const problems = await redoclyProblems(doc);
  assert.deepEqual(problems.map((p) => `${p.severity} ${p.ruleId}`).sort(), ['error no-empty-servers', 'warn operation-4xx-response']);
});

test('every operation documents its 4xx answers, and servers is relative', async () => {
  const doc = await generatedDocument();
  assert.deepEqual(doc.servers, [{ url: '/', description: 'The server that serves this document.' }]);
  for (const [url, item] of Object.entries(doc.paths as Record<string, Record<string, { responses: Record<string, unknown> }>>)) {
    for (const [method, op] of Object.entries(item)) {
      assert.ok(Object.keys(op.responses).some((status) => status.startsWith('4')), `${method} ${url} documents no 4xx answer`);
    }
  }
});

test('every enum in the document carries its type, and every object a union holds is a named component', async () => {
  const doc = await generatedDocument();
  const untyped: string[] = [];
  const inline: string[] = [];
  const walk = (node: unknown, at: string): void => {
    if (Array.isArray(node)) return node.forEach((item, i) => walk(item, `${at}/${i}`));
    if (typeof node !== 'object' || node === null) return;
    const schema = node as Record<string, unknown>;
    if (Array.isArray(schema.enum) && schema.type === undefined) untyped.push(at);
    for (const union of ['anyOf', 'oneOf'] as const) {
      const members = schema[union];
      if (!Array.isArray(members)) continue;
      members.forEach((member: Record<string, unknown>, i) => {
        if (member.$ref === undefined && (member.type === 'object' || member.properties !== undefined)) inline.push(`${at}/${union}/${i}`);
      });
    }
    for (const [keyword, value] of Object.entries(schema)) if (keyword !== 'enum' && keyword !== 'const') walk(value, `${at}/${keyword}`);
  };
  walk(doc, '#');
  // Open WebUI drops the values of an enum without a type; generators name inline members ...AnyOf0.
  assert.deepEqual(untyped, [], 'enums without type');
  assert.deepEqual(inline, [], 'inline objects in unions');
});

test('each tool is its own operation, with the tool name as operationId and its input schema as the body', async (t) => {
  const registry = new ToolRegistry().register(Echo);
  const app = await buildApp({ registry });
  t.after(() => app.close());
  const res = await app.inject({ url: '/openapi.json' });
  assert.equal(res.statusCode, 200);
  const doc = res.json();
  const op = doc.paths['/tools/Echo'].post;
  assert.equal(op.operationId, 'Echo');
  assert.equal(op.description, Echo.description);
  assert.deepEqual(op.tags, ['tools']);
  assert.deepEqual(op.requestBody.content['application/json'].schema, Echo.inputSchema);
  // No 404: the tool of this operation always exists.
  assert.deepEqual(Object.keys(op.responses).sort(), ['200', '202', '400', '401', '403', '413', '415', '429', '500', '503']);
  assert.deepEqual(
    op.responses['200'].content['application/json'].schema.anyOf.map((s: { $ref: string }) => s.$ref),
    ['ToolResult', 'AnthropicToolResultBlock', 'OpenAIToolMessages', 'OpenAIFunctionCallOutput', 'MCPCallToolResult'].map((name) => `#/components/schemas/${name}`),
  );
  assert.equal(op.responses['400'].content['application/json'].schema.$ref, '#/components/schemas/ErrorBody');
  assert.ok(doc.components.schemas.ToolResult && doc.components.schemas.ErrorBody);
  // The generic route is not an operation of its own: every tool already is one.
  assert.equal(doc.paths['/tools/{name}'].post, undefined);
  assert.ok(doc.paths['/tools/{name}'].get);
});

test('both documents are sent as the lists are: compressed when accepted, with a strong ETag per coding, 304 when it matches, made once until the tools change', async (t) => {
  const registry = new ToolRegistry().register(Echo);
  const app = await buildApp({ registry });
  t.after(() => app.close());
  for (const url of ['/openapi.json', '/openapi.tools.json']) {
    const plain = await app.inject({ url });
    assert.equal(plain.statusCode, 200);
    assert.equal(plain.headers['content-type'], 'application/json; charset=utf-8');
    assert.equal(plain.headers['content-encoding'], undefined);
    assert.equal(plain.headers['cache-control'], 'no-cache');
    assert.match(String(plain.headers.vary), /Accept-Encoding/);
    const tag = String(plain.headers.etag);
    assert.match(tag, /^"[\w-]{22}"$/);
    const br = await app.inject({ url, headers: { 'accept-encoding': 'gzip, deflate, br' } });
    assert.equal(br.headers['content-encoding'], 'br');
    assert.equal(br.headers.etag, `${tag.slice(0, -1)}-br"`);
    assert.ok(br.rawPayload.length < plain.rawPayload.length / 2, `${url}: brotli ${br.rawPayload.length} B of ${plain.rawPayload.length} B`);
    assert.deepEqual(JSON.parse(brotliDecompressSync(br.rawPayload).toString('utf8')), plain.json());
    const gz = await app.inject({ url, headers: { 'accept-encoding': 'gzip' } });
    assert.equal(gz.headers['content-encoding'], 'gzip');
    assert.deepEqual(JSON.parse(gunzipSync(gz.rawPayload).toString('utf8')), plain.json());
    const again = await app.inject({ url, headers: { 'if-none-match': tag } });
    assert.equal(again.statusCode, 304);
    assert.equal(again.body, '');
    // The same bytes while the tools are the same.
    assert.equal((await app.inject({ url })).headers.etag, tag);
  }
  const before = (await app.inject({ url: '/openapi.json' })).headers.etag;
  registry.register({ ...Echo, name: 'Echo2' });
  const after = await app.inject({ url: '/openapi.json', headers: { 'if-none-match': String(before) } });
  assert.equal(after.statusCode, 200, 'a new tool makes a new document');
  assert.equal(after.json().paths['/tools/Echo2'].post.operationId, 'Echo2');
});

test('the API browser is given the document /openapi.json serves: one operation per tool, no generic call', async (t) => {
  const app = await buildApp({ registry: new ToolRegistry().register(Echo) });
  t.after(() => app.close());
  const served = (await app.inject({ url: '/openapi.json' })).json();
  const browsers = (await app.inject({ url: '/docs/json' })).json();
  assert.deepEqual(browsers.paths, served.paths);
  assert.equal(browsers.paths['/tools/Echo'].post.operationId, 'Echo');
  assert.equal(browsers.paths['/tools/{name}'].post, undefined);
});

test("a tool with an output schema answers its own typed ToolResult in the documents; a source's tool, whose schema may change after start-up, the plain one", async (t) => {
  const registry = new ToolRegistry().register(Files);
  registry.replaceSource('up', [{ ...Files, name: 'up__files' }]);
  const app = await buildApp({ registry });
  t.after(() => app.close());
  const json = (operation: { responses: Record<string, { content: Record<string, { schema: { anyOf: Array<{ $ref: string }> } }> }> }) =>
    operation.responses['200']!.content['application/json']!.schema.anyOf.map((member) => member.$ref);
  const full = (await app.inject({ url: '/openapi.json' })).json();
  assert.ok(json(full.paths['/tools/Files'].post).includes('#/components/schemas/ToolResult_Files'));
  assert.ok(!json(full.paths['/tools/Files'].post).includes('#/components/schemas/ToolResult'));
  assert.ok(json(full.paths['/tools/up__files'].post).includes('#/components/schemas/ToolResult'));
  assert.ok(!json(full.paths['/tools/up__files'].post).includes('#/components/schemas/ToolResult_up__files'));
  const tools = (await app.inject({ url: '/openapi.tools.json' })).json();
  assert.equal(tools.paths['/tools/Files'].post.responses['200'].content['application/json'].schema.$ref, '#/components/schemas/ToolResult_Files');
  assert.equal(tools.paths['/tools/up__files'].post.responses['200'].content['application/json'].schema.$ref, '#/components/schemas/ToolResult');
  assert.equal(tools.components.schemas.ToolResult_up__files, undefined);
});

test('GET /docs serves the API browser', async (t) => {
  const app = await buildApp({ registry: new ToolRegistry().register(Echo) });
  t.after(() => app.close());
  const res = await app.inject({ url: '/docs/' });
  assert.equal(res.statusCode, 200);
  assert.match(res.body, /swagger-ui/i);
});

test('docs: false leaves /docs unserved', async (t) => {
  const app = await buildApp({ registry: new ToolRegistry().register(Echo), docs: false });
  t.after(() => app.close());
  assert.equal((await app.inject({ url: '/docs/' })).statusCode, 404);
  assert.equal((await app.inject({ url: '/openapi.json' })).statusCode, 200);
});

test('POST /calls declares its body: an AssistantTurn, whose six shapes take each dialect\'s real turns and refuse what no provider sends', async (t) => {
  const registry = new ToolRegistry().register(Echo);
  const app = await buildApp({ registry });
  t.after(() => app.close());
  const doc = (await app.inject({ url: '/openapi.json' })).json();
  const body = doc.paths['/calls'].post.requestBody;
  assert.deepEqual(body, { required: true, content: { 'application/json': { schema: { $ref: '#/components/schemas/AssistantTurn' } } } });
  const ajv = new Ajv2020({ strict: false });
  // Components refer to each other by '#/components/schemas/<name>'; resolve them inside one document.
  ajv.addSchema({ $id: 'doc', components: doc.components });
  const validate = ajv.compile({ $ref: 'doc#/components/schemas/AssistantTurn' });
  const anthropic = { role: 'assistant', content: [{ type: 'text', text: 'hi' }, { type: 'tool_use', id: 'toolu_1', name: 'Echo', input: { text: 'x' } }] };
  const openai = { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'Echo', arguments: '{"text":"x"}' } }] };
  const responses = { id: 'resp_1', output: [{ type: 'reasoning', id: 'rs_1' }, { type: 'function_call', id: 'fc_1', call_id: 'call_1', name: 'Echo', arguments: '{}' }] };
  for (const turn of [anthropic, anthropic.content, openai, openai.tool_calls, responses, responses.output]) assert.equal(validate(turn), true, JSON.stringify(validate.errors));
  for (const wrong of ['a turn', 42, { role: 'assistant' }, [{ id: 'toolu_1' }], { output: 'text' }]) assert.equal(validate(wrong), false, JSON.stringify(wrong));
});
