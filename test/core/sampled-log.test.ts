import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SampledLog } from '#src/core/sampled-log.js';

function recorder() {
  const lines: Array<{ level: 'info' | 'warn'; fields: Record<string, unknown>; msg: string }> = [];
  return {
    lines,
    log: {
      info: (fields: Record<string, unknown>, msg: string) => lines.push({ level: 'info', fields, msg }),
      warn: (fields: Record<string, unknown>, msg: string) => lines.push({ level: 'warn', fields, msg }),
    } as never,
  };
}

test('under a flood, each key writes its first lines of the interval; the next interval says how many were left out', () => {
  let now = 1_000_000;
  const { lines, log } = recorder();
  const sampled = new SampledLog(log, 'lines left out', { perInterval: 3, intervalMs: 10_000, now: () => now });
  for (let i = 0; i < 50; i += 1) sampled.info('UNAUTHORIZED', { i }, 'refused');
  // Another key is not crowded out by the flood.
  sampled.info('FORBIDDEN', { who: 'alice' }, 'refused');
  assert.deepEqual(
    lines.map((line) => [line.level, line.fields.i ?? line.fields.who]),
    [
      ['info', 0],
      ['info', 1],
      ['info', 2],
      ['info', 'alice'],
    ],
  );
  now += 10_000;
  sampled.info('UNAUTHORIZED', { i: 'next' }, 'refused');
  assert.deepEqual(lines.slice(4), [
    { level: 'warn', fields: { leftOut: { UNAUTHORIZED: 47 }, intervalMs: 10_000, perInterval: 3 }, msg: 'lines left out' },
    { level: 'info', fields: { i: 'next' }, msg: 'refused' },
  ]);
});

test('the count is written at the end of the interval even when the flood stops', (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  let now = 0;
  const { lines, log } = recorder();
  const sampled = new SampledLog(log, 'lines left out', { perInterval: 1, intervalMs: 10_000, now: () => now });
  sampled.info('UNAUTHORIZED', {}, 'refused');
  sampled.info('UNAUTHORIZED', {}, 'refused');
  sampled.info('RATE_LIMITED', {}, 'refused');
  sampled.info('RATE_LIMITED', {}, 'refused');
  assert.equal(lines.length, 2);
  now = 10_000;
  t.mock.timers.tick(10_000);
  assert.deepEqual(lines.at(-1), {
    level: 'warn',
    fields: { leftOut: { UNAUTHORIZED: 1, RATE_LIMITED: 1 }, intervalMs: 10_000, perInterval: 1 },
    msg: 'lines left out',
  });
  // Nothing left out since: no more counts.
  sampled.flush();
  assert.equal(lines.length, 3);
});
