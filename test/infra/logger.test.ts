import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { openSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { Writable } from 'node:stream';
import { createLogger, logDestination, redactSecrets } from '#src/infra/logger.js';
import { until } from '../support/wait.js';
import { temporaryDirectory } from '../support/workspace.js';

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

test('redaction returns fields without a secret as they are, and never changes the object logged', () => {
  const audit = { reqId: 'req-1', tool: 'Echo', ms: 0.5, outcome: 'ok', key: 'ci-bot' };
  assert.equal(redactSecrets(audit), audit);
  const headers = { authorization: 'Bearer sk-live-123', accept: '*/*' };
  const logged = { headers, nested: { token: 't-1', kept: 1 }, err: Object.assign(new Error('boom'), { password: 'p-1' }) };
  const redacted = redactSecrets(logged);
  assert.deepEqual(redacted.headers, { authorization: '[redacted]', accept: '*/*' });
  assert.deepEqual(redacted.nested, { token: '[redacted]', kept: 1 });
  assert.equal((redacted.err as { password: string; message: string }).password, '[redacted]');
  assert.equal((redacted.err as { message: string }).message, 'boom');
  assert.equal(headers.authorization, 'Bearer sk-live-123', 'the logged object is left alone');
  assert.equal(logged.nested.token, 't-1');
});

test('the log destination writes a buffered line within its flush interval, without waiting for more', async (t) => {
  const dir = await temporaryDirectory(t, 'toolport-log-');
  const file = path.join(dir, 'log');
  const destination = logDestination(openSync(file, 'w'));
  t.after(() => destination.destroy());
  createLogger('info', { destination }).info({ tool: 'Echo' }, 'tool call');
  await until(() => readFileSync(file, 'utf8').includes('"msg":"tool call"'), 'the tool call line in the log file');
});

test('the log destination hands lines over in batches, in order, and flush(callback) calls back once they are written', async (t) => {
  const dir = await temporaryDirectory(t, 'toolport-log-');
  const file = path.join(dir, 'log');
  const destination = logDestination(openSync(file, 'w'));
  t.after(() => destination.destroy());
  const log = createLogger('info', { destination });
  for (let i = 0; i < 5000; i++) log.info({ i }, 'tool call');
  await new Promise<void>((resolve, reject) => destination.flush((err) => (err ? reject(err) : resolve())));
  const seen = readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => (JSON.parse(line) as { i: number }).i);
  assert.deepEqual(
    seen,
    Array.from({ length: 5000 }, (_, i) => i),
  );
});

test('lines still buffered when the process exits are written before it ends', async (t) => {
  const dir = await temporaryDirectory(t, 'toolport-log-');
  const file = path.join(dir, 'log');
  const logger = path.resolve(import.meta.dirname, '../../src/infra/logger.ts');
  const program = [
    `import { openSync } from 'node:fs';`,
    `import { createLogger, logDestination } from ${JSON.stringify(logger)};`,
    `const log = createLogger('info', { destination: logDestination(openSync(${JSON.stringify(file)}, 'w')) });`,
    `for (let i = 0; i < 3; i++) log.info({ i }, 'tool call');`,
    'process.exit(0);',
  ].join('\n');
  execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '--eval', program], { stdio: 'pipe' });
  assert.equal(readFileSync(file, 'utf8').split('\n').filter(Boolean).length, 3);
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
  await until(() => errors.length === 1, 'the first error');
  log.info('lost too');
  await until(() => errors.length === 2, 'the second error');
  assert.deepEqual(
    errors.map((e) => e.code),
    ['ENOSPC', 'ENOSPC'],
  );
});
