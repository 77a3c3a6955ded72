import assert from 'node:assert/strict';
import { openSync } from 'node:fs';
import { test } from 'node:test';
import { Writable } from 'node:stream';
import { createLogger, logDestination } from '../src/logger.js';

function capture() {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk, _enc, done) {
      lines.push(...String(chunk).split('\n').filter(Boolean));
      done();
    },
  });
  return { lines, destination };
}

test('the service logger redacts credentials in logged objects', () => {
  const { lines, destination } = capture();
  const log = createLogger('info', { destination });
  log.info({ req: { headers: { authorization: 'Bearer sk-live-123', cookie: 'session=abc' } }, key: { apiKey: 'k-1' } }, 'x');
  assert.equal(lines.length, 1);
  assert.doesNotMatch(lines[0]!, /sk-live-123|session=abc|k-1/);
  const line = JSON.parse(lines[0]!);
  assert.equal(line.req.headers.authorization, '[redacted]');
  assert.equal(line.key.apiKey, '[redacted]');
});

test('the service logger writes one JSON line per entry, at the configured level', () => {
  const { lines, destination } = capture();
  const log = createLogger('warn', { destination });
  log.info('dropped');
  log.warn({ tool: 'Echo' }, 'kept');
  assert.equal(lines.length, 1);
  assert.deepEqual({ ...JSON.parse(lines[0]!), time: 0, pid: 0, hostname: '' }, { level: 40, time: 0, pid: 0, hostname: '', tool: 'Echo', msg: 'kept' });
});

test('a log write that fails (ENOSPC) loses the line and does not end the process; the next line is tried again', async (t) => {
  const fd = openSync('/dev/full', 'w');
  const destination = logDestination(fd);
  t.after(() => destination.destroy());
  const errors: NodeJS.ErrnoException[] = [];
  // Watch the 'error' events without listening for them: a listener of the test's own would hide a
  // missing one. (pino's own listener passes each error on again, so one failure emits it twice.)
  const emit = destination.emit.bind(destination);
  destination.emit = (event: string | symbol, ...args: unknown[]) => {
    const err = args[0] as NodeJS.ErrnoException;
    if (event === 'error' && !errors.includes(err)) errors.push(err);
    return emit(event, ...args);
  };
  const log = createLogger('info', { destination });
  log.info('lost');
  await until(() => errors.length === 1);
  log.info('lost too');
  await until(() => errors.length === 2);
  assert.deepEqual(errors.map((e) => e.code), ['ENOSPC', 'ENOSPC']);
});

async function until(condition: () => boolean): Promise<void> {
  const end = Date.now() + 10_000;
  while (!condition()) {
    if (Date.now() > end) assert.fail('timed out');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
