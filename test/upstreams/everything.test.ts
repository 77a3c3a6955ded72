import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { ToolRegistry } from '#src/core/registry.js';
import { buildApp } from '#src/http/app.js';
import { parseUpstreams } from '#src/upstreams/config.js';
import { openUpstreams } from '#src/upstreams/open.js';
import type { UpstreamSource, UpstreamSourceOptions } from '#src/upstreams/source.js';
import { EVERYTHING } from '../support/everything-server.js';
import { until } from '../support/wait.js';
import { Cleanups, temporaryDirectory } from '../support/workspace.js';

const RECORDING = path.resolve(import.meta.dirname, '../fixtures/upstreams/recording.mjs');

/**
 * The reference "everything" server over stdio as upstream `name` (with `extra` keys of its entry),
 * behind a recorder of what it receives (`log`).
 */
async function everythingUpstream(
  dir: string,
  { name = 'every', extra = {}, upstream = {} }: { name?: string; extra?: Record<string, unknown>; upstream?: UpstreamSourceOptions['upstream'] } = {},
): Promise<{ source: UpstreamSource; registry: ToolRegistry; log: string }> {
  const log = path.join(dir, 'received.log');
  // Made here: in the sandbox the upstream writes only below its cwd, where the upstreams file is hidden.
  await writeFile(log, '');
  const config = JSON.stringify({
    mcpServers: { [name]: { command: process.execPath, args: [RECORDING, log, process.execPath, EVERYTHING, 'stdio'], cwd: dir, ...extra } },
  });
  const file = path.join(dir, 'upstreams.json');
  await writeFile(file, config);
  const registry = new ToolRegistry();
  const source = await openUpstreams(parseUpstreams(config, {}), { upstreams: file, upstreamsLock: undefined }, registry, pino({ level: 'silent' }), {
    baseEnv: process.env,
    upstream,
  });
  return { source: source!, registry, log };
}

describe('the reference everything server as an upstream, over REST', () => {
  let dir: string;
  let app: FastifyInstance;
  let source: UpstreamSource;
  let registry: ToolRegistry;
  let received: string;
  const cleanups = new Cleanups();

  before(async () => {
    dir = await temporaryDirectory(cleanups);
    ({ source, registry, log: received } = await everythingUpstream(dir, { upstream: { backoffMs: 50 } }));
    app = await buildApp({ registry, upstreams: source });
  });
  after(async () => {
    await app.close();
    await source.stop();
    await cleanups.run();
  });

  it('lists its tools under the upstream prefix, in every format', async () => {
    const anthropic = (await app.inject({ url: '/tools' })).json() as Array<{ name: string }>;
    const names = anthropic.map((t) => t.name);
    assert.ok(names.includes('every__echo'), names.join(', '));
    assert.ok(names.includes('every__get-tiny-image'));
    const openai = (await app.inject({ url: '/tools?format=openai&strict=true' })).json() as Array<{ function: { name: string; strict?: boolean } }>;
    assert.ok(openai.some((t) => t.function.name === 'every__echo'));
    const mcp = (await app.inject({ url: '/tools?format=mcp' })).json() as { tools: Array<{ name: string; inputSchema: unknown }> };
    assert.deepEqual(mcp.tools.find((t) => t.name === 'every__echo')?.inputSchema, registry.get('every__echo')?.inputSchema);
  });

  it('calls a tool and answers its result', async () => {
    const response = await app.inject({ method: 'POST', url: '/tools/every__echo', payload: { message: 'hello' } });
    assert.equal(response.statusCode, 200);
    assert.deepEqual(response.json(), { content: [{ type: 'text', text: 'Echo: hello' }], isError: false });
  });

  it('refuses bad input with the JSON path before it reaches the upstream', async () => {
    const before = await readFile(received, 'utf8');
    const response = await app.inject({ method: 'POST', url: '/tools/every__echo', payload: { message: 42 } });
    assert.equal(response.statusCode, 400);
    const body = response.json() as { error: { code: string; details: { violations: Array<{ path: string }> } } };
    assert.equal(body.error.code, 'INVALID_INPUT');
    assert.equal(body.error.details.violations[0]?.path, '$.message');
    assert.equal(await readFile(received, 'utf8'), before, 'nothing more reached the upstream');
  });

  it('keeps images and structured content', async () => {
    const image = (await app.inject({ method: 'POST', url: '/tools/every__get-tiny-image', payload: {} })).json() as { content: Array<{ type: string }> };
    assert.ok(
      image.content.some((b) => b.type === 'image'),
      JSON.stringify(image).slice(0, 300),
    );
    const structured = (await app.inject({ method: 'POST', url: '/tools/every__get-structured-content', payload: { location: 'New York' } })).json() as {
      structuredContent: { temperature: number };
      isError: boolean;
    };
    assert.equal(structured.isError, false);
    assert.equal(typeof structured.structuredContent.temperature, 'number');
  });

  it('keeps embedded resources and resource links, as MCP blocks in MCP format and as text for a model', async () => {
    const reference = (
      await app.inject({ method: 'POST', url: '/tools/every__get-resource-reference?format=mcp', payload: { resourceType: 'Text', resourceId: 1 } })
    ).json() as { content: Array<{ type: string; resource?: { uri: string; text: string } }> };
    const embedded = reference.content.find((b) => b.type === 'resource');
    assert.equal(embedded?.resource?.uri, 'demo://resource/dynamic/text/1');
    assert.match(embedded!.resource!.text, /^Resource 1: This is a plaintext resource/);
    const links = (await app.inject({ method: 'POST', url: '/tools/every__get-resource-links?format=mcp', payload: { count: 2 } })).json() as {
      content: Array<{ type: string; uri?: string }>;
    };
    assert.deepEqual(
      links.content.filter((b) => b.type === 'resource_link').map((b) => b.uri),
      ['demo://resource/dynamic/blob/1', 'demo://resource/dynamic/text/2'],
    );
    const forModel = (
      await app.inject({ method: 'POST', url: '/tools/every__get-resource-links?format=anthropic&id=toolu_1', payload: { count: 1 } })
    ).json() as { content: Array<{ type: string; text: string }> };
    assert.ok(forModel.content.every((b) => b.type === 'text'));
    assert.ok(forModel.content.some((b) => b.text.includes('demo://resource/dynamic/blob/1')));
  });

  it('cancels the upstream call when the caller goes away', async () => {
    const controller = new AbortController();
    await app.listen({ port: 0, host: '127.0.0.1' });
    const address = app.server.address() as { port: number };
    const call = fetch(`http://127.0.0.1:${address.port}/tools/every__trigger-long-running-operation`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ duration: 30, steps: 30 }),
      signal: controller.signal,
    }).catch(() => undefined);
    await until(async () => (await readFile(received, 'utf8')).includes('trigger-long-running-operation'), 'the call to reach the upstream');
    controller.abort();
    await call;
    await until(async () => (await readFile(received, 'utf8')).includes('notifications/cancelled'), 'the cancellation to reach the upstream');
  });

  it('ends a call in flight with an error when the upstream dies, restarts it, and serves the next call', async () => {
    const pid = Number(/^pid (\d+)$/m.exec(await readFile(received, 'utf8'))![1]);
    const count = (await readFile(received, 'utf8')).split('trigger-long-running-operation').length;
    const call = app.inject({ method: 'POST', url: '/tools/every__trigger-long-running-operation', payload: { duration: 30, steps: 30 } });
    await until(async () => (await readFile(received, 'utf8')).split('trigger-long-running-operation').length > count, 'the call to reach the upstream');
    process.kill(pid, 'SIGKILL');
    const answer = (await call).json() as { isError: boolean; content: Array<{ text: string }> };
    assert.equal(answer.isError, true);
    assert.match(answer.content[0]!.text, /^Upstream "every" went away during the call \(the process killed by SIGKILL\)/);
    await until(() => source.status().every?.state === 'ready', 'the upstream to be restarted');
    assert.equal(source.status().every?.restarts, 1);
    const next = await app.inject({ method: 'POST', url: '/tools/every__echo', payload: { message: 'again' } });
    assert.deepEqual(next.json(), { content: [{ type: 'text', text: 'Echo: again' }], isError: false });
    const ready = (await app.inject({ url: '/readyz' })).json() as { upstreams: Record<string, { state: string }> };
    assert.equal(ready.upstreams.every?.state, 'ready');
  });
});

describe('the everything server with a deadline of its own', () => {
  const cleanups = new Cleanups();
  let app: FastifyInstance;
  let source: UpstreamSource;
  let received: string;

  before(async () => {
    let registry: ToolRegistry;
    ({ source, registry, log: received } = await everythingUpstream(await temporaryDirectory(cleanups), { name: 'slow', extra: { timeoutMs: 400 } }));
    app = await buildApp({ registry, upstreams: source });
    await app.listen({ port: 0, host: '127.0.0.1' });
  });
  after(async () => {
    await app.close();
    await source.stop();
    await cleanups.run();
  });

  it("times a call out at the upstream's timeoutMs and cancels it upstream", async () => {
    const response = await app.inject({ method: 'POST', url: '/tools/slow__trigger-long-running-operation', payload: { duration: 30, steps: 30 } });
    const body = response.json() as { isError: boolean; content: Array<{ text: string }> };
    assert.equal(body.isError, true);
    assert.match(body.content[0]!.text, /timed out after 400 ms/);
    await until(async () => (await readFile(received, 'utf8')).includes('notifications/cancelled'), 'the cancellation to reach the upstream');
  });

  it("streams the upstream's progress to a REST caller that asks for events", async () => {
    const { port } = app.server.address() as { port: number };
    const response = await fetch(`http://127.0.0.1:${port}/tools/slow__trigger-long-running-operation`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ duration: 0.3, steps: 3 }),
    });
    assert.equal(response.headers.get('content-type'), 'text/event-stream');
    const text = await response.text();
    const events = [...text.matchAll(/^event: (\w+)\ndata: (.*)$/gm)].map((m) => ({ event: m[1]!, data: JSON.parse(m[2]!) as Record<string, unknown> }));
    const progress = events.filter((e) => e.event === 'progress');
    assert.ok(progress.length >= 1, text);
    assert.equal(progress.at(-1)!.data.total, 3);
    assert.equal(events.at(-1)!.event, 'result');
    assert.equal((events.at(-1)!.data as { isError: boolean }).isError, false);
  });
});

describe("an upstream's slots, shared between callers", () => {
  const cleanups = new Cleanups();
  let app: FastifyInstance;
  let source: UpstreamSource;
  let received: string;
  const A = { authorization: 'Bearer key-a-0123456789abcdef' };
  const B = { authorization: 'Bearer key-b-0123456789abcdef' };

  before(async () => {
    let registry: ToolRegistry;
    ({ source, registry, log: received } = await everythingUpstream(await temporaryDirectory(cleanups), { extra: { maxConcurrency: 2 } }));
    app = await buildApp({
      registry,
      upstreams: source,
      apiKeys: [
        { label: 'a', key: 'key-a-0123456789abcdef' },
        { label: 'b', key: 'key-b-0123456789abcdef' },
      ],
    });
  });
  after(async () => {
    await app.close();
    await source.stop();
    await cleanups.run();
  });

  it('a caller that floods one upstream through its tools holds half its slots: another caller is answered before any of its calls ends', async () => {
    let firstOfA: string | undefined;
    const long = { duration: 30, steps: 30 };
    const flood = [1, 2, 3].map((n) =>
      app.inject({ method: 'POST', url: '/tools/every__trigger-long-running-operation', headers: A, payload: long }).then((answer) => {
        firstOfA ??= `call ${n} of A ended first`;
        return answer;
      }),
    );
    await until(async () => (await readFile(received, 'utf8')).includes('trigger-long-running-operation'), "A's calls to reach the upstream");
    const answer = await app.inject({ method: 'POST', url: '/tools/every__echo', headers: B, payload: { message: 'b' } });
    assert.deepEqual(answer.json(), { content: [{ type: 'text', text: 'Echo: b' }], isError: false });
    // Without a share per caller, A holds both slots and B's call waits for one of A's to end.
    assert.equal(firstOfA, undefined, "B was answered while all of A's calls still ran or waited");
    // A's calls have shown what they had to: a shutdown without grace ends them now, not in a minute.
    await app.toolport.shutdown(0);
    await Promise.all(flood);
  });
});
