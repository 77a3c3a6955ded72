import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Writable } from 'node:stream';
import { createLogger } from '../src/logger.js';

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
