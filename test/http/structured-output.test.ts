import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { test } from 'node:test';
import SwaggerParser from '@apidevtools/swagger-parser';
import { ToolRegistry } from '#src/core/registry.js';
import { buildApp } from '#src/http/app.js';
import { Echo } from '#src/tools/echo.js';
import { createLsTool } from '#src/tools/ls.js';
import { Workspace } from '#src/os/fs/workspace.js';
import { BadFiles, Files } from '../fixtures/plugins/structured-tools.js';
import { temporaryDirectory } from '../support/workspace.js';
import { appWith } from '../support/app.js';

const FILES_JSON = '{"files":["a.ts","b.ts"],"count":2}';
const structuredContent = { files: ['a.ts', 'b.ts'], count: 2 };
const BAD_FILES_ERROR = {
  content: [
    {
      type: 'text',
      text: 'Tool "BadFiles" returned structuredContent that does not match its output schema:\n- $.extra: is not an allowed property\n- $.count: must be integer',
    },
  ],
  isError: true,
};

test("POST /tools/<name> answers the tool's structuredContent in the ToolResult, beside its own content", async (t) => {
  const app = await appWith([Echo, Files, BadFiles], {}, t);
  const res = await app.inject({ method: 'POST', url: '/tools/Files', payload: { names: ['a.ts', 'b.ts'] } });
  assert.equal(res.statusCode, 200);
  assert.deepEqual(res.json(), { content: [], isError: false, structuredContent });
});

test('POST /tools/<name> of a tool that breaks its output schema is a 200 error result naming the paths; a failure needs no structuredContent', async (t) => {
  const app = await appWith([Echo, Files, BadFiles], {}, t);
  const res = await app.inject({ method: 'POST', url: '/tools/BadFiles', payload: {} });
  assert.equal(res.statusCode, 200);
  assert.deepEqual(res.json(), BAD_FILES_ERROR);
  const failed = await app.inject({ method: 'POST', url: '/tools/Files', payload: { names: [] } });
  assert.equal(failed.statusCode, 200);
  assert.deepEqual(failed.json(), { content: [{ type: 'text', text: 'No names given.' }], isError: true });
});

test('?format= answers structured content as JSON text for Anthropic and OpenAI, and as structuredContent for MCP', async (t) => {
  const app = await appWith([Echo, Files, BadFiles], {}, t);
  const call = (query: string) => app.inject({ method: 'POST', url: `/tools/Files?${query}`, payload: { names: ['a.ts', 'b.ts'] } }).then((r) => r.json());
  assert.deepEqual(await call('format=anthropic&id=toolu_1'), {
    type: 'tool_result',
    tool_use_id: 'toolu_1',
    content: [{ type: 'text', text: FILES_JSON }],
    is_error: false,
  });
  assert.deepEqual(await call('format=openai&id=call_1'), [{ role: 'tool', tool_call_id: 'call_1', content: FILES_JSON }]);
  assert.deepEqual(await call('format=openai-responses&id=call_1'), { type: 'function_call_output', call_id: 'call_1', output: FILES_JSON });
  assert.deepEqual(await call('format=mcp'), { content: [{ type: 'text', text: FILES_JSON }], isError: false, structuredContent });
});

test('POST /calls answers structured content as JSON text in the next turn', async (t) => {
  const app = await appWith([Echo, Files, BadFiles], {}, t);
  const res = await app.inject({
    method: 'POST',
    url: '/calls',
    payload: [{ type: 'tool_use', id: 'toolu_1', name: 'Files', input: { names: ['a.ts', 'b.ts'] } }],
  });
  assert.equal(res.statusCode, 200);
  assert.deepEqual(res.json(), {
    role: 'user',
    content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: [{ type: 'text', text: FILES_JSON }], is_error: false }],
  });
});

test('GET /tools?format=mcp and GET /tools/<name>?format=mcp publish the output schema; the other formats leave it out', async (t) => {
  const app = await appWith([Echo, Files, BadFiles], {}, t);
  const list = (await app.inject({ url: '/tools?format=mcp' })).json<{ tools: Array<{ name: string; outputSchema?: unknown }> }>();
  assert.deepEqual(
    list.tools.map((tool) => [tool.name, tool.outputSchema]),
    [
      ['Echo', undefined],
      ['Files', Files.outputSchema],
      ['BadFiles', BadFiles.outputSchema],
    ],
  );
  assert.deepEqual((await app.inject({ url: '/tools/Files?format=mcp' })).json<{ outputSchema: unknown }>().outputSchema, Files.outputSchema);
  assert.doesNotMatch((await app.inject({ url: '/tools?format=anthropic' })).body, /outputSchema/);
});

test('the OpenAPI documents give a tool with an output schema its own ToolResult, whose structuredContent is that schema', async (t) => {
  const app = await appWith([Echo, Files, BadFiles], {}, t);
  for (const url of ['/openapi.json', '/openapi.tools.json']) {
    const doc = (await app.inject({ url })).json<{
      paths: Record<string, { post: { responses: Record<string, { content: { 'application/json': { schema: { anyOf?: unknown[]; $ref?: string } } } }> } }>;
      components: { schemas: Record<string, { properties: Record<string, unknown>; required: string[]; additionalProperties: boolean }> };
    }>();
    const answer = (tool: string) => doc.paths[`/tools/${tool}`]!.post.responses['200']!.content['application/json'].schema;
    const plainOf = (tool: string) => answer(tool).anyOf?.[0] ?? answer(tool);
    assert.deepEqual(plainOf('Files'), { $ref: '#/components/schemas/ToolResult_Files' }, url);
    assert.deepEqual(plainOf('Echo'), { $ref: '#/components/schemas/ToolResult' }, url);
    const own = doc.components.schemas['ToolResult_Files']!;
    assert.deepEqual(
      own.properties['structuredContent'],
      { ...Files.outputSchema, description: 'The result as JSON, for programs: always present on success.' },
      url,
    );
    assert.deepEqual([own.required, own.additionalProperties], [['content', 'isError'], false], url);
    await SwaggerParser.validate(structuredClone(doc) as never);
  }
});

test('POST /tools/LS answers the listing as structuredContent too', async (t) => {
  const dir = await temporaryDirectory(t, 'toolport-structured-');
  await mkdir(path.join(dir, 'src'));
  await writeFile(path.join(dir, 'a.txt'), '');
  const app = await buildApp({ registry: new ToolRegistry().register(createLsTool(await Workspace.open(dir))) });
  t.after(() => app.close());
  const res = await app.inject({ method: 'POST', url: '/tools/LS', payload: { path: '.' } });
  assert.equal(res.statusCode, 200);
  assert.deepEqual(res.json(), {
    content: [{ type: 'text', text: 'Directory ".", 2 entries:\na.txt\nsrc/' }],
    isError: false,
    structuredContent: {
      path: '.',
      entries: [
        { name: 'a.txt', type: 'file' },
        { name: 'src', type: 'directory' },
      ],
      total: 2,
      ignored: 0,
    },
  });
});
