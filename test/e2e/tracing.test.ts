import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { context, propagation, type Tracer } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { UndiciInstrumentation } from '@opentelemetry/instrumentation-undici';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { everythingOverHttp } from '../support/everything-server.js';
import { otlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../support/otlp-receiver.js';
import { freePort } from '../support/ports.js';
import { recordingProxy, type ProxiedRequest } from '../support/recording-proxy.js';
import { kill, startServer, type ServerProcess } from '../support/server-process.js';
import { Cleanups, temporaryDirectory } from '../support/workspace.js';

// One trace across real processes: an agent instrumented with the OpenTelemetry Node SDK (its
// undici instrumentation puts the traceparent on fetch) calls toolport, which calls the reference
// everything server over Streamable HTTP through a proxy that records what arrives there. toolport
// exports OTLP/protobuf, the agent and `toolport mcp` OTLP/JSON, to one receiver that decodes both.

const ROOT = path.resolve(import.meta.dirname, '../..');
const KEY = 'e'.repeat(32);
const SERVER = 2;
const CLIENT = 3;

describe('a trace from an instrumented agent through toolport to an upstream MCP server', () => {
  const cleanups = new Cleanups();
  let receiver: OtlpReceiver;
  let proxied: ProxiedRequest[];
  let server: ServerProcess;
  let provider: TracerProvider;
  let tracer: Tracer;
  let undici: UndiciInstrumentation;
  let stdioEnv: Record<string, string>;

  before(async () => {
    receiver = await otlpReceiver(cleanups);
    const everything = await everythingOverHttp(cleanups, await freePort());
    const proxy = await recordingProxy(cleanups, everything.url);
    proxied = proxy.requests;
    const dir = await temporaryDirectory(cleanups);
    const upstreams = path.join(dir, 'upstreams.json');
    const metaEcho = path.join(ROOT, 'test/fixtures/upstreams/meta-echo-server.mjs');
    await writeFile(upstreams, JSON.stringify({ mcpServers: { ev: { type: 'http', url: proxy.url }, me: { command: process.execPath, args: [metaEcho] } } }));
    const otel = { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: '20', OTEL_SERVICE_NAME: 'toolport' };
    server = await startServer({
      ...otel,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
      TOOLPORT_API_KEYS: KEY,
      TOOLPORT_UPSTREAMS: upstreams,
      TOOLPORT_BASH_SANDBOX: 'false',
      TOOLPORT_UPSTREAM_SANDBOX: 'false',
      TOOLPORT_SHUTDOWN_GRACE_MS: '100',
    });
    stdioEnv = {
      ...otel,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      TOOLPORT_WORKSPACE: dir,
      TOOLPORT_BASH_SANDBOX: 'false',
      OTEL_SERVICE_NAME: 'toolport-stdio',
    };

    // The agent: the OpenTelemetry SDK with its undici instrumentation, exporting OTLP/JSON.
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    propagation.setGlobalPropagator(new CompositePropagator({ propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()] }));
    provider = new TracerProvider({
      resource: resourceFromAttributes({ 'service.name': 'agent' }),
      spanProcessors: [new SimpleSpanProcessor({ exporter: new OTLPTraceExporter({ url: `${receiver.url}/v1/traces` }) })],
    });
    undici = new UndiciInstrumentation();
    undici.setTracerProvider(provider);
    undici.enable();
    tracer = provider.getTracer('agent');
  });
  after(async () => {
    undici.disable();
    await provider.shutdown();
    kill(server);
    await server.exited;
    await cleanups.run();
  });

  /** Runs `work` inside a root span of the agent's; answers its span context once it ended. */
  async function asAgent<T>(name: string, work: () => Promise<T>): Promise<{ value: T; traceId: string; spanId: string }> {
    return tracer.startActiveSpan(name, async (span) => {
      try {
        const value = await work();
        return { value, ...span.spanContext() };
      } finally {
        span.end();
        await provider.forceFlush();
      }
    });
  }

  const child = (parent: ReceivedSpan | string, match: (s: ReceivedSpan) => boolean, what: string): Promise<ReceivedSpan> => {
    const id = typeof parent === 'string' ? parent : parent.spanId;
    return receiver.span((s) => s.parentSpanId === id && match(s), what);
  };
  /** The first span under `root`, at any depth, that `match` holds for. */
  const descendant = (root: string, match: (s: ReceivedSpan) => boolean, what: string): Promise<ReceivedSpan> =>
    receiver.span((s) => {
      if (!match(s)) return false;
      for (let at: ReceivedSpan | undefined = s; at !== undefined; at = receiver.spans.find((p) => p.spanId === at!.parentSpanId)) {
        if (at.parentSpanId === root) return true;
      }
      return false;
    }, what);

  test('REST: agent, toolport, its client span for the upstream, and the traceparent the upstream received are one trace', async () => {
    const agent = await asAgent('agent turn', async () => {
      const response = await fetch(`${server.url}/tools/ev__echo`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` },
        body: JSON.stringify({ message: 'hello' }),
      });
      assert.equal(response.status, 200);
      return (await response.json()) as { content: Array<{ text: string }> };
    });
    assert.match(agent.value.content[0]!.text, /hello/);
    const fetchSpan = await child(agent.spanId, (s) => s.kind === CLIENT && s.resource['service.name'] === 'agent', "the agent's fetch span");
    assert.equal(fetchSpan.encoding, 'json');
    const request = await child(fetchSpan, (s) => s.name === 'POST /tools/:name', "toolport's request span");
    assert.equal(request.kind, SERVER);
    assert.equal(request.encoding, 'protobuf');
    assert.equal(request.resource['service.name'], 'toolport');
    const call = await descendant(request.spanId, (s) => s.name === 'execute_tool ev__echo', 'the execute_tool span');
    assert.equal(call.attributes['gen_ai.operation.name'], 'execute_tool');
    assert.equal(call.attributes['toolport.caller'], 'key-1');
    const work = await child(call, (s) => s.name === 'run ev__echo', 'the work span');
    const upstream = await child(work, (s) => s.name === 'tools/call echo', 'the client span of the upstream call');
    assert.equal(upstream.kind, CLIENT);
    assert.equal(upstream.attributes['mcp.method.name'], 'tools/call');
    assert.equal(upstream.attributes['gen_ai.tool.name'], 'echo');
    assert.equal(upstream.attributes['server.address'], '127.0.0.1');
    for (const span of [fetchSpan, request, call, work, upstream]) assert.equal(span.traceId, agent.traceId);

    const sent = proxied.find((r) => (r.body as { method?: string } | undefined)?.method === 'tools/call' && JSON.stringify(r.body).includes('hello'));
    assert.ok(sent, 'the upstream received the call');
    const expected = `00-${agent.traceId}-${upstream.spanId}-01`;
    assert.equal(sent.headers['traceparent'], expected, 'the traceparent header is the span toolport made for the upstream call');
    assert.equal((sent.body as { params: { _meta: { traceparent: string } } }).params._meta.traceparent, expected, 'and so is params._meta.traceparent');
  });

  test('a stdio upstream gets the context of the client span of its call in params._meta', async () => {
    const agent = await asAgent('agent calls a stdio upstream', async () => {
      const response = await fetch(`${server.url}/tools/me__meta`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` },
        body: '{}',
      });
      assert.equal(response.status, 200);
      return JSON.parse(((await response.json()) as { content: Array<{ text: string }> }).content[0]!.text) as { traceparent?: string };
    });
    const upstream = await descendant(agent.spanId, (s) => s.name === 'tools/call meta', 'the client span of the stdio upstream call');
    assert.equal(upstream.kind, CLIENT);
    assert.equal(upstream.attributes['network.transport'], 'pipe');
    assert.equal(agent.value.traceparent, `00-${agent.traceId}-${upstream.spanId}-01`);
  });

  test('/calls: each call of a turn is a span of its own, named by its tool and carrying the provider call id, in the agent trace', async () => {
    const agent = await asAgent('agent turn with calls', async () => {
      const response = await fetch(`${server.url}/calls`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` },
        body: JSON.stringify({
          role: 'assistant',
          content: [
            { type: 'tool_use', id: 'toolu_01', name: 'Echo', input: { text: 'one' } },
            { type: 'tool_use', id: 'toolu_02', name: 'Echo', input: { text: 'two' } },
            { type: 'tool_use', id: 'toolu_03', name: 'Echo', input: { text: 3 } },
          ],
        }),
      });
      assert.equal(response.status, 200);
    });
    for (const id of ['toolu_01', 'toolu_02', 'toolu_03']) {
      const span = await receiver.span((s) => s.attributes['gen_ai.tool.call.id'] === id, `the span of ${id}`);
      assert.equal(span.traceId, agent.traceId);
      assert.equal(span.name, 'execute_tool Echo');
      assert.equal(span.attributes['toolport.transport'], 'calls');
    }
    const refused = receiver.spans.find((s) => s.attributes['gen_ai.tool.call.id'] === 'toolu_03')!;
    assert.equal(refused.attributes['error.type'], 'INVALID_INPUT');
  });

  test('Bash: the command sees TRACEPARENT, the context of the span of its work', async () => {
    const agent = await asAgent('agent runs a command', async () => {
      const response = await fetch(`${server.url}/tools/Bash`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` },
        body: JSON.stringify({ command: 'printf "<%s>" "$TRACEPARENT"' }),
      });
      assert.equal(response.status, 200);
      return ((await response.json()) as { content: Array<{ text: string }> }).content[0]!.text;
    });
    const work = await descendant(agent.spanId, (s) => s.name === 'run Bash', 'the work span of Bash');
    assert.match(agent.value, new RegExp(`<00-${agent.traceId}-${work.spanId}-01>`));
  });

  test('MCP over HTTP: an SDK client sending _meta.traceparent is the parent of a server span named tools/call {tool}', async () => {
    const client = new Client({ name: 'traced-agent', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL('/mcp', server.url), { requestInit: { headers: { authorization: `Bearer ${KEY}` } } }));
    cleanups.after(() => client.close());
    const traceId = 'a'.repeat(31) + '1';
    const parent = 'b'.repeat(15) + '2';
    const result = await client.callTool({ name: 'Echo', arguments: { text: 'over mcp' }, _meta: { traceparent: `00-${traceId}-${parent}-01` } });
    assert.equal(result.isError, false);
    const span = await child(parent, (s) => s.name === 'tools/call Echo', 'the MCP server span');
    assert.equal(span.traceId, traceId);
    assert.equal(span.kind, SERVER);
    assert.equal(span.attributes['mcp.method.name'], 'tools/call');
    assert.equal(span.attributes['gen_ai.tool.name'], 'Echo');
    assert.equal(span.attributes['gen_ai.operation.name'], 'execute_tool');
    assert.equal(typeof span.attributes['mcp.protocol.version'], 'string');
    assert.equal(typeof span.attributes['jsonrpc.request.id'], 'string');
    assert.equal(span.attributes['toolport.transport'], 'mcp');
    assert.equal(span.links.length, 1, 'it links the HTTP request it came in');
  });

  test('stdio: toolport mcp continues the _meta.traceparent of a tools/call and exports OTLP/JSON', async () => {
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: ['--import', 'tsx', 'src/cli.ts', 'mcp'],
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...stdioEnv },
      stderr: 'pipe',
    });
    const client = new Client({ name: 'traced-desktop', version: '1.0.0' });
    await client.connect(transport);
    cleanups.after(() => client.close());
    const traceId = 'c'.repeat(31) + '3';
    const parent = 'd'.repeat(15) + '4';
    const result = await client.callTool({
      name: 'Echo',
      arguments: { text: 'over stdio' },
      _meta: { traceparent: `00-${traceId}-${parent}-01`, tracestate: 'vendor=x' },
    });
    assert.equal(result.isError, false);
    const span = await child(parent, (s) => s.name === 'tools/call Echo', 'the stdio server span');
    assert.equal(span.encoding, 'json');
    assert.equal(span.resource['service.name'], 'toolport-stdio');
    assert.equal(span.traceId, traceId);
    assert.equal(span.attributes['toolport.transport'], 'stdio');
    assert.equal(span.attributes['network.transport'], 'pipe');
  });
});
