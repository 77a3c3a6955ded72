import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import SwaggerParser from '@apidevtools/swagger-parser';
import { ToolRegistry } from '../../src/core/registry.js';
import { buildApp } from '../../src/http/app.js';
import { createToolset } from '../../src/toolset.js';
import { Echo } from '../../src/tools/echo.js';

const COMMITTED = path.resolve(import.meta.dirname, '../../openapi/openapi.json');

/** The document the code generates for the built-in tools, as `npm run openapi` writes it. */
async function generatedDocument(): Promise<Record<string, unknown>> {
  const workspace = await mkdtemp(path.join(tmpdir(), 'toolport-openapi-'));
  try {
    const registry = await createToolset({ workspace, bashSandbox: false, plugins: [], tools: undefined });
    const app = await buildApp({ registry });
    await app.ready();
    const doc = JSON.parse(JSON.stringify(app.swagger())) as Record<string, unknown>;
    await app.close();
    return doc;
  } finally {
    await rm(workspace, { recursive: true, force: true });
  }
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
  assert.deepEqual(Object.keys(op.responses).sort(), ['200', '400', '401', '403', '404', '413', '415', '429', '500', '503']);
  assert.equal(op.responses['200'].content['application/json'].schema.$ref, '#/components/schemas/ToolResult');
  assert.equal(op.responses['400'].content['application/json'].schema.$ref, '#/components/schemas/ErrorBody');
  assert.ok(doc.components.schemas.ToolResult && doc.components.schemas.ErrorBody);
  // The generic route is not an operation of its own: every tool already is one.
  assert.equal(doc.paths['/tools/{name}'].post, undefined);
  assert.ok(doc.paths['/tools/{name}'].get);
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
