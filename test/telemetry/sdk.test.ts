import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { otlpReceiver } from '../support/otlp-receiver.js';
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
