import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as HttpV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Client as ClientV2, StreamableHTTPClientTransport as HttpV2 } from '@modelcontextprotocol/client';
import { Type } from 'typebox';
import { defineTool } from '#src/core/define-tool.js';
import { ToolRegistry } from '#src/core/registry.js';
import { textResult } from '#src/core/result.js';
import { buildApp } from '#src/http/app.js';
import { Echo } from '#src/tools/echo.js';
import { CLIENT_KINDS, type ClientKind } from '../support/mcp-clients.js';
import { WatchedRegistry } from '../support/watched-registry.js';
import { until } from '../support/wait.js';

// The SDKs' own clients, over real HTTP, hear the tool list change: v1 and v2 of the 2025
// revisions on the GET stream, v2 of 2026-07-28 on the subscription its listChanged option opens.

const upstreamTool = (name: string) =>
  defineTool({ name, description: `The upstream's ${name}.`, inputSchema: Type.Object({}, { additionalProperties: false }), execute: () => textResult(name) });

const INFO = { name: 'toolport-list-changed', version: '1.0.0' };
type Heard = { error: Error | null; tools: Array<{ name: string }> | null };

/** A connected client of this kind whose listChanged handler records what it heard; `tools/list` is fetched by the SDK itself. */
async function listeningClient(kind: ClientKind, url: string): Promise<{ heard: Heard[]; close: () => Promise<void> }> {
  const heard: Heard[] = [];
  const listChanged = { tools: { debounceMs: 0, onChanged: (error: Error | null, tools: Array<{ name: string }> | null) => heard.push({ error, tools }) } };
  const endpoint = new URL('/mcp', url);
  if (kind === 'v1') {
    const client = new ClientV1(INFO, { listChanged });
    await client.connect(new HttpV1(endpoint));
    return { heard, close: () => client.close() };
  }
  const client = new ClientV2(INFO, { listChanged, ...(kind === 'v2-modern' ? { versionNegotiation: { mode: { pin: '2026-07-28' } } } : {}) });
  await client.connect(new HttpV2(endpoint));
  // The 2026-07-28 client hears changes on the subscription its listChanged option opened, when the server announces them.
  assert.equal(client.autoOpenedSubscription !== undefined, kind === 'v2-modern' && client.getServerCapabilities()?.tools?.listChanged === true);
  return { heard, close: () => client.close() };
}

describe('MCP over HTTP with a tool list that changes', () => {
  let app: FastifyInstance;
  let url: string;
  const registry = new WatchedRegistry().register(Echo);

  before(async () => {
    // A short idle timeout: after a client aborts a stream, undici opens a connection it sends
    // nothing on, which only the idle timeout ends, and the server's close waits for it.
    app = await buildApp({ registry, upstreams: { status: () => ({}) }, connections: { idleTimeoutMs: 1000 } });
    url = await app.listen({ port: 0, host: '127.0.0.1' });
  });
  after(() => app.close());

  for (const kind of CLIENT_KINDS) {
    test(`${kind}: the client hears a change of the tool list, and the tools/list it then fetches has the new tool`, async (t) => {
      registry.replaceSource('up', []);
      const client = await listeningClient(kind, url);
      t.after(() => client.close());
      // The legacy clients open their GET stream after the handshake, without waiting for it.
      await until(() => registry.listeners === 1, 'the stream to be open');

      registry.replaceSource('up', [upstreamTool(`up__${kind.replace('-', '_')}`)]);
      await until(() => client.heard.length > 0, 'the list change to be heard');
      const [first] = client.heard;
      assert.equal(first?.error, null);
      assert.deepEqual(
        first?.tools?.map((tool) => tool.name),
        ['Echo', `up__${kind.replace('-', '_')}`],
      );
    });
  }

  test('a closed client leaves no subscription behind', async () => {
    for (const kind of CLIENT_KINDS) {
      const client = await listeningClient(kind, url);
      await until(() => registry.listeners === 1, `the stream of ${kind} to be open`);
      await client.close();
      await until(() => registry.listeners === 0, `the stream of ${kind} to be closed`);
    }
  });
});

describe('MCP over HTTP with a tool list that never changes', () => {
  test('every client kind connects and lists tools; nothing announces list changes and GET /mcp stays 405', async (t) => {
    const app = await buildApp({ registry: new ToolRegistry().register(Echo) });
    t.after(() => app.close());
    const url = await app.listen({ port: 0, host: '127.0.0.1' });
    for (const kind of CLIENT_KINDS) {
      const client = await listeningClient(kind, url);
      await client.close();
    }
    const get = await fetch(new URL('/mcp', url), { headers: { accept: 'text/event-stream' } });
    assert.equal(get.status, 405);
    assert.equal(get.headers.get('allow'), 'POST');
  });
});
