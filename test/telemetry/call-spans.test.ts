import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { buildApp } from '#src/http/app.js';
import { runtimeFromOptions } from '#src/http/app-options.js';
import { Gateway } from '#src/core/gateway.js';
import { defineTool } from '#src/core/define-tool.js';
import type { ToolResult } from '#src/core/types.js';
import { loadConfig } from '#src/config/config.js';
import { openTracing, type Tracing } from '#src/telemetry/sdk.js';
import { Echo } from '#src/tools/echo.js';
import { createLogger } from '#src/infra/logger.js';
import { registryOf } from '../support/app.js';
import { until } from '../support/wait.js';
import { otlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../support/otlp-receiver.js';
import { Cleanups } from '../support/workspace.js';

const KEY = 'k'.repeat(32);
const NARROW = 'n'.repeat(32);
const LIMITED = 'l'.repeat(32);

/** A tool that answers with the trace context it would pass on to a process or an upstream. */
const Carrier = defineTool({
  name: 'Carrier',
  description: 'Answers with its trace carrier.',
  inputSchema: Type.Object({}, { additionalProperties: false }),
  execute: (_input, ctx) => ({ content: [{ type: 'text', text: JSON.stringify(ctx.trace?.carrier ?? null) }] }),
});

/** A tool that holds its slot until the test lets it go: the way to a full queue. */
let release: () => void = () => {};
const Hold = defineTool({
  name: 'Hold',
  description: 'Waits until released.',
  inputSchema: Type.Object({}, { additionalProperties: false }),
  maxConcurrency: 1,
  execute: () => new Promise<ToolResult>((resolve) => (release = () => resolve({ content: [{ type: 'text', text: 'released' }] }))),
});

describe('call spans over OTLP/JSON, from an app served in this process', () => {
  const cleanups = new Cleanups();
  let receiver: OtlpReceiver;
  let tracing: Tracing;
  let app: FastifyInstance;
  let gateway: Gateway;
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger('info', {
    traced: true,
    destination: new Writable({
      write(chunk, _encoding, done) {
        for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
        done();
      },
    }),
  });

  before(async () => {
    receiver = await otlpReceiver(cleanups);
    const config = loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_SERVICE_NAME: 'toolport-test' });
    tracing = await openTracing(config.tracing!, logger);
    const registry = registryOf([Echo, Hold, Carrier]);
    const [runtime, http] = runtimeFromOptions({
      registry,
      logger,
      queueSize: 0,
      rateLimit: 20,
      apiKeys: [
        { label: 'main', key: KEY },
        { label: 'narrow', key: NARROW, tools: ['Echo'] },
        { label: 'limited', key: LIMITED },
      ],
    });
    gateway = new Gateway({ registry, logger, queueSize: 0, scopes: runtime.keyring.scopes, observer: runtime.metrics.observer, tracer: tracing.tracer });
    app = await buildApp({ ...runtime, gateway, tracing }, http);
  });
  after(async () => {
    await app.close();
    await tracing.shutdown();
    await cleanups.run();
  });

  const call = (tool: string, key: string | undefined, payload: object = { text: 'hi' }) =>
    app.inject({ method: 'POST', url: `/tools/${tool}`, payload, headers: key === undefined ? {} : { authorization: `Bearer ${key}` } });

  async function spanOf(requestId: string): Promise<ReceivedSpan> {
    await tracing.flush();
    return receiver.span(
      (s) => s.attributes['gen_ai.tool.call.id'] === requestId && s.attributes['gen_ai.operation.name'] === 'execute_tool',
      `the span of ${requestId}`,
    );
  }

  test('a call that ran has an execute_tool span with the conventions attributes, sizes as numbers, and no input or key', async () => {
    const response = await call('Echo', KEY, { text: 'a secret input' });
    assert.equal(response.statusCode, 200);
    const span = await spanOf(String(response.headers['x-request-id']));
    assert.equal(span.name, 'execute_tool Echo');
    assert.equal(span.encoding, 'json');
    assert.equal(span.resource['service.name'], 'toolport-test');
    assert.equal(span.attributes['gen_ai.tool.name'], 'Echo');
    assert.equal(span.attributes['toolport.transport'], 'rest');
    assert.equal(span.attributes['toolport.caller'], 'main');
    assert.equal(span.attributes['toolport.tool.outcome'], 'ok');
    assert.equal(typeof span.attributes['toolport.tool.input.size'], 'number');
    assert.equal(typeof span.attributes['toolport.tool.result.size'], 'number');
    assert.equal(span.attributes['error.type'], undefined);
    assert.deepEqual(
      span.events.map((e) => e.name),
      ['validated', 'admitted'],
    );
    // Echo works in-process and passes the trace nowhere: its call's span is its work.
    assert.deepEqual(
      receiver.spans.filter((s) => s.parentSpanId === span.spanId),
      [],
    );
    const request = await receiver.span(
      (s) => s.spanId === span.parentSpanId || receiver.spans.some((h) => h.spanId === span.parentSpanId && h.parentSpanId === s.spanId),
      'the request span',
    );
    assert.equal(request.name, 'POST /tools/:name');
    assert.ok(request.events.some((e) => e.name === 'credentials checked' && e.attributes['toolport.caller'] === 'main'));
    const everything = JSON.stringify(receiver.spans);
    assert.ok(!everything.includes('a secret input'), 'the input is never in a span');
    assert.ok(!everything.includes(KEY), 'the key is never in a span');
  });

  test("a tool that passes the trace on does it from a span of its work, dated from the work's start, under the call", async () => {
    const response = await call('Carrier', KEY, {});
    assert.equal(response.statusCode, 200);
    const span = await spanOf(String(response.headers['x-request-id']));
    const work = await receiver.span((s) => s.parentSpanId === span.spanId && s.name === 'run Carrier', 'the work span');
    assert.equal(work.traceId, span.traceId);
    assert.equal(work.attributes['gen_ai.tool.name'], 'Carrier');
    const carrier = JSON.parse(response.json<{ content: { text: string }[] }>().content[0]!.text) as Record<string, string>;
    assert.equal(carrier['traceparent'], `00-${work.traceId}-${work.spanId}-01`);
    const admitted = span.events.find((e) => e.name === 'admitted');
    assert.ok(admitted !== undefined);
    // The SDK anchors each span's clock on Date.now(), so two spans' times agree to a millisecond.
    const ms = 1_000_000n;
    const [workStart, workEnd] = [BigInt(work.startTimeUnixNano), BigInt(work.endTimeUnixNano)];
    assert.ok(workStart <= workEnd);
    assert.ok(workStart + ms >= BigInt(admitted.timeUnixNano), 'the work starts once the call is admitted');
    assert.ok(workEnd <= BigInt(span.endTimeUnixNano) + ms, 'and ends before its call');
  });

  test('probes and the scraper are not traced: /healthz, /readyz and /metrics make no span', async () => {
    for (const url of ['/healthz', '/readyz', '/metrics'])
      assert.equal((await app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${KEY}` } })).statusCode, 200);
    const marker = await call('Echo', KEY);
    await spanOf(String(marker.headers['x-request-id']));
    assert.deepEqual(
      receiver.spans.filter((s) => /healthz|readyz|metrics/.test(s.name)),
      [],
    );
  });

  test('the audit line of a traced call carries its trace_id and span_id', async () => {
    const response = await call('Echo', KEY);
    const span = await spanOf(String(response.headers['x-request-id']));
    const line = lines.find((l) => l['msg'] === 'tool call' && l['reqId'] === response.headers['x-request-id']);
    assert.equal(line?.['trace_id'], span.traceId);
    assert.equal(line?.['span_id'], span.spanId);
  });

  test('a call continues the trace of the traceparent it came with', async () => {
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const response = await app.inject({ method: 'POST', url: '/tools/Echo', payload: { text: 'x' }, headers: { authorization: `Bearer ${KEY}`, traceparent } });
    const span = await spanOf(String(response.headers['x-request-id']));
    assert.equal(span.traceId, '4bf92f3577b34da6a3ce929d0e0e4736');
    const request = await receiver.span((s) => s.parentSpanId === '00f067aa0ba902b7', 'the request span under the given parent');
    assert.equal(request.traceId, span.traceId);
  });

  test('without a handler span, a body that arrives in several reads still has the call in its request span', async () => {
    const url = await app.listen({ host: '127.0.0.1', port: 0 });
    const traceId = '6bf92f3577b34da6a3ce929d0e0e4736';
    // The second half is sent only once the first has been written: two reads on the server.
    let second: () => void = () => {};
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode('{"text":"' + 'a'.repeat(32_768)));
        second = () => {
          controller.enqueue(new TextEncoder().encode('"}'));
          controller.close();
        };
      },
    });
    setImmediate(() => setTimeout(second, 20));
    const response = await fetch(`${url}/tools/Echo`, {
      method: 'POST',
      body,
      duplex: 'half',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', traceparent: `00-${traceId}-00f067aa0ba902b7-01` },
    } as RequestInit);
    assert.equal(response.status, 200);
    const span = await spanOf(String(response.headers.get('x-request-id')));
    assert.equal(span.traceId, traceId);
    const parent = await receiver.span((s) => s.spanId === span.parentSpanId, 'the parent span');
    assert.equal(parent.name, 'POST /tools/:name');
  });

  test('a call under an unsampled traceparent makes no span, and its tool passes the unsampled trace on', async () => {
    const traceId = '5bf92f3577b34da6a3ce929d0e0e4736';
    const traceparent = `00-${traceId}-00f067aa0ba902b7-00`;
    const headers = { authorization: `Bearer ${KEY}`, traceparent };
    const response = await app.inject({ method: 'POST', url: '/tools/Carrier', payload: {}, headers });
    assert.equal(response.statusCode, 200);
    // Its audit line names no trace: the ids of one that was not sampled lead nowhere.
    const line = lines.find((l) => l['msg'] === 'tool call' && l['reqId'] === response.headers['x-request-id']);
    assert.ok(line !== undefined, 'the audit line');
    assert.equal(line['trace_id'], undefined);
    assert.equal(line['span_id'], undefined);
    const carrier = JSON.parse(response.json<{ content: { text: string }[] }>().content[0]!.text) as Record<string, string>;
    assert.match(carrier['traceparent'] ?? '', new RegExp(`^00-${traceId}-[0-9a-f]{16}-00$`));
    // A sampled call after it is exported; the unsampled one left nothing in the same batch.
    const sampled = await app.inject({ method: 'POST', url: '/tools/Carrier', payload: {}, headers: { authorization: `Bearer ${KEY}` } });
    await spanOf(String(sampled.headers['x-request-id']));
    assert.deepEqual(
      receiver.spans.filter((s) => s.traceId === traceId),
      [],
    );
  });

  for (const [status, code, make] of [
    [401, 'UNAUTHORIZED', () => call('Echo', undefined)],
    [403, 'FORBIDDEN', () => call('Hold', NARROW, {})],
    [400, 'INVALID_INPUT', () => call('Echo', KEY, { text: 1 })],
  ] as const) {
    test(`a refusal with ${status} ${code} is a span whose error.type is ${code}`, async () => {
      const response = await make();
      assert.equal(response.statusCode, status);
      assert.equal(response.json<{ error: { code: string } }>().error.code, code);
      const span = await spanOf(String(response.headers['x-request-id']));
      assert.equal(span.attributes['error.type'], code);
      assert.equal(span.statusCode, 2);
      // A child of its request's span, whether a guard or the gateway refused it.
      const parent = await receiver.span((s) => s.spanId === span.parentSpanId, 'the parent span');
      assert.equal(parent.name, 'POST /tools/:name');
    });
  }

  test('a refusal with 429 RATE_LIMITED is a span whose error.type is RATE_LIMITED', async () => {
    let response;
    for (let i = 0; i < 21; i++) response = await call('Echo', LIMITED);
    assert.ok(response !== undefined);
    assert.equal(response.statusCode, 429);
    assert.equal(response.json<{ error: { code: string } }>().error.code, 'RATE_LIMITED');
    const span = await spanOf(String(response.headers['x-request-id']));
    assert.equal(span.attributes['error.type'], 'RATE_LIMITED');
    assert.equal(span.attributes['toolport.caller'], 'limited');
  });

  test('a refusal with 503 QUEUE_FULL is a span whose error.type is QUEUE_FULL', async () => {
    const holding = call('Hold', KEY, {});
    // The first call holds the tool's one slot; with no queue, the next is refused at once.
    await until(() => gateway.inFlight === 1, 'the first call to hold the slot');
    const response = await call('Hold', KEY, {});
    release();
    assert.equal((await holding).statusCode, 200);
    assert.equal(response.statusCode, 503);
    assert.equal(response.json<{ error: { code: string } }>().error.code, 'QUEUE_FULL');
    const span = await spanOf(String(response.headers['x-request-id']));
    assert.equal(span.name, 'execute_tool Hold');
    assert.equal(span.attributes['error.type'], 'QUEUE_FULL');
  });
});
