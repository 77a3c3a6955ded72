import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import { BoundedOutput } from '#src/mcp/bounded-output.js';
import type { JsonRpcNotification } from '#src/core/json-rpc.js';

const HIGH_WATER_MARK = 256;
const line = (text: string): string => `${text}\n`;

/** A stream whose reader reads only when the test says so: every write waits until `read()`. */
function reader() {
  const held: Array<() => void> = [];
  const taken: string[] = [];
  const stream = new Writable({
    highWaterMark: HIGH_WATER_MARK,
    decodeStrings: false,
    write(chunk: string, _encoding, done) {
      taken.push(String(chunk));
      held.push(done);
    },
  });
  /** Reads everything written so far (and what the stream hands on meanwhile), then lets 'drain' fire. */
  const read = async (): Promise<void> => {
    while (held.length > 0) held.shift()!();
    await new Promise((resolve) => setImmediate(resolve));
  };
  /** The messages the reader has seen, parsed. */
  const messages = () =>
    taken
      .join('')
      .split('\n')
      .filter(Boolean)
      .map((text) => JSON.parse(text) as { id?: unknown; params?: Record<string, unknown> });
  return { stream, taken, read, messages };
}

const progress = (token: string | number, n: number): JsonRpcNotification => ({
  jsonrpc: '2.0',
  method: 'notifications/progress',
  params: { progressToken: token, progress: n, message: 'm'.repeat(100) },
});

test('while the stream takes writes, every notification is written at once, in order', async () => {
  const { stream, read, messages } = reader();
  const out = new BoundedOutput(stream, { frame: line });
  out.progress(progress('a', 1));
  await read();
  out.progress(progress('a', 2));
  await read();
  assert.equal(out.blocked, false);
  assert.deepEqual(
    messages().map((m) => m.params?.['progress']),
    [1, 2],
  );
});

test('a stream that is not read holds at most one waiting notification per token, however many reports come', async () => {
  const { stream, read, messages } = reader();
  const out = new BoundedOutput(stream, { frame: line });
  for (let n = 1; n <= 100_000; n++) {
    out.progress(progress('a', n));
    out.progress(progress(7, n));
  }
  assert.equal(out.blocked, true);
  assert.equal(out.waiting, 2);
  // What the stream itself holds stopped at its high-water mark: one frame past it at most.
  assert.ok(stream.writableLength < HIGH_WATER_MARK + 200, `the stream holds ${stream.writableLength} bytes`);
  await read();
  await read();
  const seen = messages().map((m) => [m.params?.['progressToken'], m.params?.['progress']]);
  assert.ok(seen.length <= 4, `the reader got ${seen.length} notifications`);
  assert.deepEqual(
    seen.slice(-2),
    [
      ['a', 100_000],
      [7, 100_000],
    ],
    'the latest of each token comes last',
  );
  assert.equal(out.waiting, 0);
  assert.equal(out.blocked, false);
});

test('the number 1 and the string "1" are different tokens', async () => {
  const { stream, read, messages } = reader();
  const out = new BoundedOutput(stream, { frame: line });
  out.progress(progress('x', 1));
  out.progress(progress('x', 2));
  out.progress(progress(1, 1));
  out.progress(progress('1', 1));
  assert.equal(out.waiting, 2);
  await read();
  await read();
  assert.deepEqual(
    messages()
      .slice(-2)
      .map((m) => m.params?.['progressToken']),
    [1, '1'],
  );
});

test('a response is written while the stream is blocked, after the progress that waits', async () => {
  const { stream, read, messages } = reader();
  const out = new BoundedOutput(stream, { frame: line });
  out.progress(progress('a', 1));
  out.progress(progress('a', 2));
  out.progress(progress('a', 3));
  assert.equal(out.blocked, true);
  out.send({ jsonrpc: '2.0', id: 1, result: { done: true } });
  out.send([{ jsonrpc: '2.0', id: 2, result: {} }]);
  assert.equal(out.waiting, 0);
  await read();
  await read();
  assert.deepEqual(messages(), [
    { jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 'a', progress: 1, message: 'm'.repeat(100) } },
    { jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 'a', progress: 2, message: 'm'.repeat(100) } },
    { jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 'a', progress: 3, message: 'm'.repeat(100) } },
    { jsonrpc: '2.0', id: 1, result: { done: true } },
    [{ jsonrpc: '2.0', id: 2, result: {} }] as never,
  ]);
});

test('optional text (a keep-alive comment) is skipped while the stream is blocked', async () => {
  const { stream, taken, read } = reader();
  const out = new BoundedOutput(stream, { frame: line });
  out.optional(':\n\n');
  out.progress(progress('a', 1));
  out.progress(progress('a', 2));
  out.optional(':\n\n');
  await read();
  await read();
  assert.equal(taken.filter((chunk) => chunk === ':\n\n').length, 1);
});

test('after close, nothing is written and what waits is forgotten', async () => {
  const { stream, read, messages } = reader();
  const out = new BoundedOutput(stream, { frame: line });
  out.progress(progress('a', 1));
  out.progress(progress('a', 2));
  out.progress(progress('a', 3));
  out.close();
  out.progress(progress('a', 4));
  out.send({ jsonrpc: '2.0', id: 1, result: {} });
  await read();
  await read();
  assert.deepEqual(
    messages().map((m) => m.params?.['progress']),
    [1, 2],
  );
});
