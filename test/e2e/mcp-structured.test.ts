import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { ToolRegistry } from '#src/core/registry.js';
import { buildApp } from '#src/http/app.js';
import { createLsTool } from '#src/tools/ls.js';
import { Workspace } from '#src/os/fs/workspace.js';
import { CLIENT_KINDS, httpClient } from '../support/mcp-clients.js';
import { Cleanups, temporaryDirectory } from '../support/workspace.js';
import { BadFiles, Files } from '../fixtures/plugins/structured-tools.js';

// The SDKs' own clients as judges of structured output: each one, given a tool's outputSchema by
// tools/list, refuses a successful result without structuredContent and checks the structured
// content against the schema (v1 and v2 both), so a call that returns here passed their checks.
let app: FastifyInstance;

// The test clients' result type leaves structuredContent out; the SDKs' results carry it.
const structuredOf = (result: object): unknown => (result as { structuredContent?: unknown }).structuredContent;

let url: string;
let workspace: string;
const cleanups = new Cleanups();

before(async () => {
  workspace = await temporaryDirectory(cleanups, 'toolport-mcp-structured-');
  await mkdir(path.join(workspace, 'src'));
  await writeFile(path.join(workspace, 'a.txt'), '');
  const registry = new ToolRegistry()
    .register(Files)
    .register(BadFiles)
    .register(createLsTool(await Workspace.open(workspace)));
  app = await buildApp({ registry });
  await app.listen({ port: 0, host: '127.0.0.1' });
  url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
});
after(async () => {
  await app.close();
  await cleanups.run();
});

for (const kind of CLIENT_KINDS) {
  describe(`structured output over MCP, ${kind}`, () => {
    test(`${kind}: tools/list gives each tool's outputSchema, and a call's structuredContent passes the client's own check against it`, async (t) => {
      const client = await httpClient(kind, url);
      t.after(() => client.close());
      const { tools } = await client.listTools();
      assert.deepEqual(tools.find((tool) => tool.name === 'Files')?.['outputSchema'], Files.outputSchema);
      const result = await client.callTool('Files', { names: ['a.ts', 'b.ts'] });
      // No text of its own: the content holds the structured content as JSON, for clients that read only content.
      assert.deepEqual(
        [result.content, result.isError, structuredOf(result)],
        [[{ type: 'text', text: '{"files":["a.ts","b.ts"],"count":2}' }], false, { files: ['a.ts', 'b.ts'], count: 2 }],
      );
    });

    test(`${kind}: LS answers its listing as structured content the client accepts, beside its text`, async (t) => {
      const client = await httpClient(kind, url);
      t.after(() => client.close());
      await client.listTools();
      const result = await client.callTool('LS', { path: '.' });
      assert.equal(result.isError, false);
      assert.deepEqual(result.content, [{ type: 'text', text: 'Directory ".", 2 entries:\na.txt\nsrc/' }]);
      assert.deepEqual(structuredOf(result), {
        path: '.',
        entries: [
          { name: 'a.txt', type: 'file' },
          { name: 'src', type: 'directory' },
        ],
        total: 2,
        ignored: 0,
      });
    });

    test(`${kind}: a tool that breaks its output schema answers an error result naming the paths, which the client takes as one`, async (t) => {
      const client = await httpClient(kind, url);
      t.after(() => client.close());
      await client.listTools();
      const result = await client.callTool('BadFiles', {});
      assert.equal(result.isError, true);
      assert.equal(structuredOf(result), undefined);
      assert.deepEqual(result.content, [
        {
          type: 'text',
          text: 'Tool "BadFiles" returned structuredContent that does not match its output schema:\n- $.extra: is not an allowed property\n- $.count: must be integer',
        },
      ]);
    });
  });
}
