import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { pino } from 'pino';
import { loadConfig } from '#src/config/config.js';
import { Gateway } from '#src/core/gateway.js';
import { buildApp } from '#src/http/app.js';
import { runtimeFromOptions } from '#src/http/app-options.js';
import { connectRedis } from '#src/infra/redis.js';
import { openTracing } from '#src/telemetry/sdk.js';
import { Echo } from '#src/tools/echo.js';
import { registryOf } from '../support/app.js';
import { otlpReceiver } from '../support/otlp-receiver.js';
import { startRedis } from '../support/redis-server.js';
import { Cleanups, temporaryDirectory } from '../support/workspace.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const PROBE = path.join(ROOT, 'test/fixtures/opentelemetry-probe.ts');

/** Runs the probe with `env`: the OpenTelemetry modules it saw loaded, and who first asked for them. */
async function probe(env: Record<string, string>): Promise<{ loaded: string[]; via: string[] }> {
  const cleanups = new Cleanups();
  try {
    const workspace = await temporaryDirectory(cleanups);
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', PROBE], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, TOOLPORT_WORKSPACE: workspace, TOOLPORT_TOOLS: 'Echo', ...env },
    });
    const { ok, loaded, via } = JSON.parse(stdout) as { ok: boolean; loaded: string[]; via: string[] };
    assert.ok(ok, 'the call succeeded');
    return { loaded, via };
  } finally {
    await cleanups.run();
  }
}

// prom-client (the metrics) requires @opentelemetry/api itself, for exemplars, whether or not
// toolport traces: that much a server loaded before tracing existed. Tracing adds nothing to it.
const PROMETHEUS = ['prom-client/lib/metrics/processCpuTotal.js'];

test('a server without tracing loads no OpenTelemetry module of its own: only the API that prom-client requires', async () => {
  const { loaded, via } = await probe({});
  assert.deepEqual(via, PROMETHEUS);
  assert.deepEqual(
    loaded.filter((url) => !url.startsWith('@opentelemetry/api/')),
    [],
  );
});

test('toolport mcp without tracing loads not one OpenTelemetry module', async () => {
  assert.deepEqual(await probe({ PROBE_KIND: 'stdio' }), { loaded: [], via: [] });
});

test('OTEL_SDK_DISABLED=true keeps tracing unloaded even with an endpoint set', async () => {
  assert.deepEqual(await probe({ PROBE_KIND: 'stdio', OTEL_SDK_DISABLED: 'true', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' }), { loaded: [], via: [] });
});

test('the probe sees the SDK and @fastify/otel when tracing is on, so its silence above means something', async (t) => {
  const cleanups = new Cleanups();
  t.after(() => cleanups.run());
  const receiver = await otlpReceiver(cleanups);
  const { loaded, via } = await probe({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url });
  assert.ok(via.includes('src/telemetry/sdk.ts'), via.join('\n'));
  assert.ok(
    loaded.some((url) => url.startsWith('@opentelemetry/sdk-trace/')),
    loaded.join('\n'),
  );
  assert.ok(
    loaded.some((url) => url.startsWith('@fastify/otel/')),
    loaded.join('\n'),
  );
  assert.ok(receiver.spans.some((s) => s.name === 'execute_tool Echo'));
});

test("a rate-limit count kept in Redis is a client span of the request's trace", async (t) => {
  const cleanups = new Cleanups();
  t.after(() => cleanups.run());
  const redisServer = await startRedis();
  cleanups.after(() => redisServer.stop());
  const receiver = await otlpReceiver(cleanups);
  const logger = pino({ level: 'silent' });
  const tracing = await openTracing(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' }).tracing!, logger);
  cleanups.after(() => tracing.shutdown());
  const redis = await connectRedis(redisServer.url, logger);
  cleanups.after(async () => void (await redis.quit()));
  const registry = registryOf([Echo]);
  const [runtime, http] = runtimeFromOptions({ registry, logger, redis, rateLimit: 100 });
  const gateway = new Gateway({ registry, logger, observer: runtime.metrics.observer, tracer: tracing.tracer });
  const app = await buildApp({ ...runtime, gateway, tracing }, http);
  cleanups.after(() => app.close());

  const traceId = '7'.repeat(32);
  const response = await app.inject({
    method: 'POST',
    url: '/tools/Echo',
    payload: { text: 'x' },
    headers: { traceparent: `00-${traceId}-${'8'.repeat(16)}-01` },
  });
  assert.equal(response.statusCode, 200);
  await tracing.flush();
  const count = await receiver.span((s) => s.traceId === traceId && s.name === 'EVALSHA toolport_count', 'the Redis span');
  assert.equal(count.kind, 3);
  assert.equal(count.attributes['db.system.name'], 'redis');
  assert.equal(count.attributes['db.operation.batch.size'], 1);
  const request = await receiver.span((s) => s.traceId === traceId && s.name === 'POST /tools/:name', 'the request span');
  assert.equal(count.parentSpanId, request.spanId);
});
