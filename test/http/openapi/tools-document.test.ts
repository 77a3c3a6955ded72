import assert from 'node:assert/strict';
import type { KeySpec } from '#src/auth/keyring.js';
import { test } from 'node:test';
import SwaggerParser from '@apidevtools/swagger-parser';
import { Echo } from '#src/tools/echo.js';
import { Nested, NoArgs } from '../../fixtures/tools.js';
import { appWith } from '../../support/app.js';

const FULL_KEY = 'full-access-secret-0123456789';
const SCOPED_KEY = 'ci-bot-secret-0123456789abcdef';
const KEYS: KeySpec[] = [
  { label: 'key-1', key: FULL_KEY },
  { label: 'ci-bot', key: SCOPED_KEY, tools: ['NoArgs', 'Echo'] },
];

interface Doc {
  info: { title: string; description: string };
  servers: unknown;
  tags: Array<{ name: string }>;
  paths: Record<string, Record<string, { operationId: string; parameters?: unknown; requestBody: unknown; responses: Record<string, { content: Record<string, { schema: unknown }> }> }>>;
  components: { schemas: Record<string, unknown>; securitySchemes: unknown };
}

const operationIds = (doc: Doc): string[] => Object.values(doc.paths).flatMap((item) => Object.values(item).map((op) => op.operationId));

test('GET /openapi.tools.json holds only the tool operations, each answering a plain ToolResult without query parameters', async (t) => {
  const app = await appWith([Echo, NoArgs, Nested]);
  t.after(() => app.close());
  const res = await app.inject({ url: '/openapi.tools.json' });
  assert.equal(res.statusCode, 200);
  assert.match(res.headers['content-type'] as string, /^application\/json/);
  const doc = res.json<Doc>();
  const full = (await app.inject({ url: '/openapi.json' })).json<Doc>();

  assert.deepEqual(Object.keys(doc.paths), ['/tools/Echo', '/tools/NoArgs', '/tools/Nested']);
  assert.deepEqual(operationIds(doc), ['Echo', 'NoArgs', 'Nested']);
  for (const [url, item] of Object.entries(doc.paths)) {
    assert.deepEqual(Object.keys(item), ['post']);
    const op = item.post!;
    assert.equal(op.parameters, undefined, `${url} offers query parameters a model would take for arguments`);
    assert.deepEqual(op.requestBody, full.paths[url]!.post!.requestBody);
    assert.deepEqual(op.responses['200']!.content['application/json']!.schema, { $ref: '#/components/schemas/ToolResult' });
    assert.deepEqual(op.responses['400'], full.paths[url]!.post!.responses['400']);
  }
  assert.deepEqual(doc.tags.map((tag) => tag.name), ['tools']);
  assert.equal(doc.info.title, 'toolport tools');
  assert.deepEqual(doc.servers, full.servers);
  assert.deepEqual(doc.components.securitySchemes, full.components.securitySchemes);
  // Only what the tool operations use: no tool lists, no provider shapes.
  assert.deepEqual(Object.keys(doc.components.schemas).sort(), [
    'AudioBlock',
    'BlobResourceContents',
    'ContentAnnotations',
    'ContentBlock',
    'ErrorBody',
    'ErrorCode',
    'ImageBlock',
    'ResourceBlock',
    'ResourceLinkBlock',
    'TextBlock',
    'TextResourceContents',
    'ToolResult',
  ]);
  await SwaggerParser.validate(structuredClone(doc) as never);
});

test('the full document keeps the service routes the tools-only one leaves out', async (t) => {
  const app = await appWith([Echo, NoArgs, Nested]);
  t.after(() => app.close());
  const full = (await app.inject({ url: '/openapi.json' })).json<Doc>();
  assert.deepEqual(operationIds(full).sort(), ['Echo', 'Nested', 'NoArgs', 'callTools', 'cancelTask', 'getTask', 'getTool', 'healthz', 'listTasks', 'listTools', 'readyz']);
});

test('with keys, GET /openapi.tools.json lists the tools the caller\'s key may use, and needs a key', async (t) => {
  const app = await appWith([Echo, NoArgs, Nested], { apiKeys: KEYS });
  t.after(() => app.close());
  const scoped = await app.inject({ url: '/openapi.tools.json', headers: { authorization: `Bearer ${SCOPED_KEY}` } });
  assert.equal(scoped.statusCode, 200);
  assert.deepEqual(operationIds(scoped.json<Doc>()), ['Echo', 'NoArgs']);
  const full = await app.inject({ url: '/openapi.tools.json', headers: { authorization: `Bearer ${FULL_KEY}` } });
  assert.deepEqual(operationIds(full.json<Doc>()), ['Echo', 'NoArgs', 'Nested']);
  // Asked again, the scoped key gets the same document (made once per scope).
  const again = await app.inject({ url: '/openapi.tools.json', headers: { authorization: `Bearer ${SCOPED_KEY}` } });
  assert.equal(again.body, scoped.body);

  const anonymous = await app.inject({ url: '/openapi.tools.json' });
  assert.equal(anonymous.statusCode, 401);
  const message = 'Authentication required: send an API key in the header "Authorization: Bearer <key>".';
  assert.deepEqual(anonymous.json(), { content: [{ type: 'text', text: message }], isError: true, error: { code: 'UNAUTHORIZED', message } });
});

test('with keys and publicDocs, GET /openapi.tools.json is open and lists every tool', async (t) => {
  const app = await appWith([Echo, NoArgs, Nested], { apiKeys: KEYS, publicDocs: true });
  t.after(() => app.close());
  const res = await app.inject({ url: '/openapi.tools.json' });
  assert.equal(res.statusCode, 200);
  assert.deepEqual(operationIds(res.json<Doc>()), ['Echo', 'NoArgs', 'Nested']);
});
