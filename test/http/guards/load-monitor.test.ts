import assert from 'node:assert/strict';
import { test } from 'node:test';
import { LoadMonitor, type LoadThresholds } from '#src/http/guards/load-monitor.js';
import { capturedLog } from '../../support/log-capture.js';
import { until } from '../../support/wait.js';

const OFF: LoadThresholds = { maxEventLoopDelayMs: 0, maxHeapUsedBytes: 0, maxRssBytes: 0, healthCheckIntervalMs: 1000, sampleIntervalMs: 5 };

test('a sample that fails (EMFILE reading resident memory) is logged once and the process goes on with the last values', async (t) => {
  const emfile = Object.assign(new Error('EMFILE: too many open files, uv_resident_set_memory'), { code: 'EMFILE' });
  const rss = t.mock.method(process.memoryUsage, 'rss', () => {
    throw emfile;
  });
  const { lines, logger } = capturedLog();
  const monitor = await LoadMonitor.start({ ...OFF, maxRssBytes: 1 }, logger);
  t.after(() => monitor.stop());
  await until(() => rss.mock.callCount() >= 5, 'five samples');
  const failures = lines.filter((l) => l.msg === 'load sample failed; keeping the last values');
  assert.equal(failures.length, 1);
  assert.equal((failures[0]!.err as { code?: string }).code, 'EMFILE');
  assert.equal(monitor.overloaded, false, 'no value was read yet, so nothing is over its threshold');
  // Once reading works again, the sample counts: resident memory is over the 1-byte threshold.
  rss.mock.restore();
  await until(() => monitor.overloaded, 'the next sample');
});

test('the heap threshold is sampled from V8 without reading /proc', async (t) => {
  const rss = t.mock.method(process.memoryUsage, 'rss');
  const monitor = await LoadMonitor.start({ ...OFF, maxHeapUsedBytes: 1 }, capturedLog().logger);
  t.after(() => monitor.stop());
  await until(() => monitor.overloaded, 'a sample over the heap threshold');
  assert.equal(rss.mock.callCount(), 0);
});

test('a health check that throws counts as overloaded and is logged', async (t) => {
  const { lines, logger } = capturedLog();
  const monitor = await LoadMonitor.start(
    {
      ...OFF,
      healthCheck: () => {
        throw new Error('probe broke');
      },
    },
    logger,
  );
  t.after(() => monitor.stop());
  assert.equal(monitor.overloaded, true);
  assert.equal(lines.filter((l) => l.msg === 'health check threw; counting the server as overloaded').length, 1);
});
