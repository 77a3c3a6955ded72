import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { ServiceMetrics } from '#src/http/metrics.js';
import { Echo } from '#src/tools/echo.js';
import { gatedTool } from '../fixtures/gated-tool.js';
import { parseMetrics } from '../support/metrics-text.js';
import { Fails, Throws } from '../fixtures/tools.js';
import { appWith } from '../support/app.js';

async function scrape(app: FastifyInstance): Promise<Map<string, number>> {
  const res = await app.inject({ url: '/metrics' });
  assert.equal(res.statusCode, 200);
  assert.equal(res.headers['content-type'], 'text/plain; version=0.0.4; charset=utf-8');
  return parseMetrics(res.body);
}

const post = (app: FastifyInstance, url: string, payload: unknown = {}) => app.inject({ method: 'POST', url, payload: payload as object });

test('GET /metrics counts tool calls by tool and outcome, with their durations, in the Prometheus text format', async (t) => {
  const app = await appWith([Echo, Fails, Throws]);
  t.after(() => app.close());
  await post(app, '/tools/Echo', { text: 'a' });
  await post(app, '/tools/Echo', { text: 'b' });
  await post(app, '/tools/Fails');
  await post(app, '/tools/Throws');
  const m = await scrape(app);
  assert.equal(m.get('toolport_tool_calls_total{outcome="ok",tool="Echo",transport="rest"}'), 2);
  assert.equal(m.get('toolport_tool_calls_total{outcome="tool_error",tool="Fails",transport="rest"}'), 1);
  assert.equal(m.get('toolport_tool_calls_total{outcome="threw",tool="Throws",transport="rest"}'), 1);
  assert.equal(m.get('toolport_tool_calls_total{outcome="timeout",tool="Echo",transport="rest"}'), 0, 'every outcome starts at zero');
  assert.equal(m.get('toolport_tool_call_duration_seconds_count{tool="Echo"}'), 2);
  assert.equal(m.get('toolport_tool_call_duration_seconds_bucket{le="+Inf",tool="Echo"}'), 2);
  assert.ok((m.get('toolport_tool_call_duration_seconds_sum{tool="Echo"}') ?? -1) >= 0);
  assert.equal(m.get('toolport_tool_calls_in_flight{tool="Echo"}'), 0);
  assert.equal(m.get('toolport_tool_queue_depth{tool="Echo"}'), 0);
  assert.ok((m.get('process_resident_memory_bytes') ?? 0) > 0);
  assert.ok((m.get('nodejs_heap_size_used_bytes') ?? 0) > 0);
  assert.ok((m.get('process_cpu_seconds_total') ?? 0) > 0);
});

test('a tool that was never called is listed at zero', async (t) => {
  const app = await appWith([Echo]);
  t.after(() => app.close());
  const m = await scrape(app);
  assert.equal(m.get('toolport_tool_calls_total{outcome="ok",tool="Echo",transport="rest"}'), 0);
  assert.equal(m.get('toolport_tool_call_duration_seconds_count{tool="Echo"}'), 0);
  assert.equal(m.get('toolport_tool_calls_in_flight{tool="Echo"}'), 0);
});

test('GET /metrics shows calls in flight and waiting while they are, and a refused call as queue_full', async (t) => {
  const gated = gatedTool('Busy', { maxConcurrency: 1 });
  const app = await appWith([gated.tool], { queueSize: 1 });
  t.after(() => app.close());
  const first = post(app, '/tools/Busy');
  await gated.started(1);
  const second = post(app, '/tools/Busy');
  const end = Date.now() + 5_000;
  while (app.toolport.executor.load('Busy').waiting < 1) {
    assert.ok(Date.now() < end, 'the second call never queued');
    await new Promise((resolve) => setImmediate(resolve));
  }
  assert.equal((await post(app, '/tools/Busy')).statusCode, 503);
  const during = await scrape(app);
  assert.equal(during.get('toolport_tool_calls_in_flight{tool="Busy"}'), 1);
  assert.equal(during.get('toolport_tool_queue_depth{tool="Busy"}'), 1);
  assert.equal(during.get('toolport_rejected_calls_total{reason="queue_full",transport="rest"}'), 1);
  gated.runs[0]?.release();
  (await gated.started(2))[1]?.release();
  await Promise.all([first, second]);
  const after = await scrape(app);
  assert.equal(after.get('toolport_tool_calls_in_flight{tool="Busy"}'), 0);
  assert.equal(after.get('toolport_tool_queue_depth{tool="Busy"}'), 0);
  assert.equal(after.get('toolport_tool_calls_total{outcome="ok",tool="Busy",transport="rest"}'), 2);
});

test('every error response to a tool call is counted by its error code, whichever stage refused it', async (t) => {
  const app = await appWith([Echo], { rateLimit: 6, bodyLimit: 64 });
  t.after(() => app.close());
  await post(app, '/tools/Echo', {});
  await post(app, '/tools/Echo', { text: 1 });
  await post(app, '/tools/Nope');
  await app.inject({ method: 'POST', url: '/tools/Echo', headers: { 'content-type': 'application/json' }, payload: '{"text": ' });
  await app.inject({ method: 'POST', url: '/tools/Echo', headers: { 'content-type': 'text/plain' }, payload: 'hi' });
  await post(app, '/tools/Echo', { text: 'x'.repeat(100) });
  await post(app, '/tools/Echo', { text: 'over the rate limit' });
  await app.inject({ url: '/nowhere' });
  const m = await scrape(app);
  const rejected = Object.fromEntries([...m].filter(([k]) => k.startsWith('toolport_rejected_calls_total')));
  assert.deepEqual(rejected, {
    'toolport_rejected_calls_total{reason="invalid_input",transport="rest"}': 2,
    'toolport_rejected_calls_total{reason="tool_not_found",transport="rest"}': 1,
    'toolport_rejected_calls_total{reason="invalid_json",transport="rest"}': 1,
    'toolport_rejected_calls_total{reason="unsupported_media_type",transport="rest"}': 1,
    'toolport_rejected_calls_total{reason="payload_too_large",transport="rest"}': 1,
    'toolport_rejected_calls_total{reason="rate_limited",transport="rest"}': 1,
  });
  assert.equal(m.get('toolport_tool_calls_total{outcome="ok",tool="Echo",transport="rest"}'), 0, 'refused calls are not tool calls');
});

test('calls of POST /calls count under transport calls, apart from POST /tools/<name> under rest', async (t) => {
  const app = await appWith([Echo], { bodyLimit: 512 });
  t.after(() => app.close());
  const turn = (...calls: unknown[]) => ({ role: 'assistant', content: calls });
  const toolUse = (id: string, input: unknown) => ({ type: 'tool_use', id, name: 'Echo', input });
  await post(app, '/tools/Echo', { text: 'a' });
  assert.equal((await post(app, '/calls', turn(toolUse('toolu_1', { text: 'b' }), toolUse('toolu_2', { wrong: 1 })))).statusCode, 200);
  // Refused before the gateway: the body is over the limit.
  assert.equal((await post(app, '/calls', turn(toolUse('toolu_3', { text: 'x'.repeat(600) })))).statusCode, 413);
  const m = await scrape(app);
  assert.equal(m.get('toolport_tool_calls_total{outcome="ok",tool="Echo",transport="rest"}'), 1);
  assert.equal(m.get('toolport_tool_calls_total{outcome="ok",tool="Echo",transport="calls"}'), 1);
  const rejected = Object.fromEntries([...m].filter(([k]) => k.startsWith('toolport_rejected_calls_total')));
  assert.deepEqual(rejected, {
    'toolport_rejected_calls_total{reason="invalid_input",transport="calls"}': 1,
    'toolport_rejected_calls_total{reason="payload_too_large",transport="calls"}': 1,
  });
});

test('calls shed under pressure are counted as overloaded', async (t) => {
  const app = await appWith([Echo], { pressure: { healthCheck: () => false } });
  t.after(() => app.close());
  await post(app, '/tools/Echo', { text: 'a' });
  const m = await scrape(app);
  assert.equal(m.get('toolport_rejected_calls_total{reason="overloaded",transport="rest"}'), 1);
});

test("each app has its own metrics: two apps in one process do not see each other's calls", async (t) => {
  const one = await appWith([Echo]);
  const two = await appWith([Echo]);
  t.after(() => Promise.all([one.close(), two.close()]));
  await post(one, '/tools/Echo', { text: 'a' });
  assert.equal((await scrape(one)).get('toolport_tool_calls_total{outcome="ok",tool="Echo",transport="rest"}'), 1);
  assert.equal((await scrape(two)).get('toolport_tool_calls_total{outcome="ok",tool="Echo",transport="rest"}'), 0);
});

test('/metrics is left out of the OpenAPI document', async (t) => {
  const app = await appWith([Echo]);
  t.after(() => app.close());
  await app.ready();
  assert.equal(Object.keys((app.swagger() as { paths: object }).paths).includes('/metrics'), false);
});

test('call durations fall in the first bucket whose bound they do not exceed, and the buckets are cumulative', async () => {
  const metrics = new ServiceMetrics(['Echo']);
  for (const seconds of [0.005, 0.006, 700]) metrics.observer.callFinished('Echo', 'ok', seconds, 'rest');
  metrics.observer.callFinished('Echo', 'aborted', undefined, 'rest');
  const m = parseMetrics(await metrics.registry.metrics());
  const bucket = (le: string): number | undefined => m.get(`toolport_tool_call_duration_seconds_bucket{le="${le}",tool="Echo"}`);
  assert.deepEqual([bucket('0.005'), bucket('0.01'), bucket('600'), bucket('+Inf')], [1, 2, 2, 3]);
  assert.equal(m.get('toolport_tool_call_duration_seconds_count{tool="Echo"}'), 3, 'a call that never ran has no duration');
  assert.equal(m.get('toolport_tool_call_duration_seconds_sum{tool="Echo"}'), 700.011);
  assert.equal(m.get('toolport_tool_calls_total{outcome="aborted",tool="Echo",transport="rest"}'), 1);
});
