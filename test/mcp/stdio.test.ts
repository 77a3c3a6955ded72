import assert from 'node:assert/strict';
import { PassThrough, Writable } from 'node:stream';
import { test } from 'node:test';
import type { McpBackend } from '#src/mcp/backend.js';
import { McpDispatcher } from '#src/mcp/dispatcher.js';
import { serveStdio, type StdioOptions } from '#src/mcp/stdio.js';
import { ANYONE, fakeBackend, type FakeCaller } from './fake-backend.js';

interface Line {
  id?: unknown;
  method?: string;
  result?: Record<string, unknown>;
  error?: { code: number; message: string };
  params?: Record<string, unknown>;
}

/** A stdio server over in-memory streams, with every line it wrote, parsed. */
function harness(backend: McpBackend<FakeCaller> = fakeBackend(), options: Partial<StdioOptions<FakeCaller>> = {}) {
  const input = new PassThrough();
  const output = new PassThrough();
  const lines: Line[] = [];
  let pending = '';
  output.setEncoding('utf8');
  output.on('data', (chunk: string) => {
    pending += chunk;
    for (let at = pending.indexOf('\n'); at !== -1; at = pending.indexOf('\n')) {
      lines.push(JSON.parse(pending.slice(0, at)) as Line);
      pending = pending.slice(at + 1);
    }
  });
  const done = serveStdio(new McpDispatcher(backend, { progressIntervalMs: 0 }), input, output, { caller: ANYONE, ...options });
  const send = (message: unknown): void => void input.write(`${JSON.stringify(message)}\n`);
  /** Waits, with a deadline, until `lines` holds `count` lines. */
  const lineCount = async (count: number): Promise<Line[]> => {
    const deadline = Date.now() + 5000;
    while (lines.length < count) {
      if (Date.now() > deadline) assert.fail(`expected ${count} lines, got ${JSON.stringify(lines)}`);
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    return lines;
  };
  return { input, output, lines, done, send, lineCount };
}

/** A backend whose Slow tool reports progress, then waits for its signal or for `release`. */
function slowBackend() {
  let started!: () => void;
  const running = new Promise<void>((resolve) => (started = resolve));
  let finish: (() => void) | undefined;
  const backend = fakeBackend({
    Slow: (_args, { signal, onProgress }) =>
      new Promise((resolve) => {
        onProgress?.({ progress: 1, message: 'first output' });
        finish = () => resolve({ content: [{ type: 'text', text: 'finished' }], isError: false });
        started();
        signal.addEventListener('abort', () => resolve({ content: [{ type: 'text', text: 'aborted' }], isError: true }));
      }),
  });
  return { backend, running, release: () => finish?.() };
}

test('each line is one message, each response one line; blank lines are skipped and CRLF is taken', async () => {
  const { input, lineCount, done } = harness();
  input.write('\n{"jsonrpc":"2.0","id":1,"method":"ping"}\r\n   \n{"jsonrpc":"2.0","id":2,"method":"ping"}\n');
  assert.deepEqual(await lineCount(2), [
    { jsonrpc: '2.0', id: 1, result: {} },
    { jsonrpc: '2.0', id: 2, result: {} },
  ]);
  input.end();
  await done;
});

test('a message split across chunks, even inside a UTF-8 character, is put back together', async () => {
  const { input, lineCount, done } = harness();
  const bytes = Buffer.from('{"jsonrpc":"2.0","id":"é","method":"tools/call","params":{"name":"Echo","arguments":{"text":"日本"}}}\n');
  const cut = bytes.indexOf(Buffer.from('日')) + 1;
  input.write(bytes.subarray(0, 10));
  input.write(bytes.subarray(10, cut));
  input.write(bytes.subarray(cut));
  assert.deepEqual(await lineCount(1), [{ jsonrpc: '2.0', id: 'é', result: { content: [{ type: 'text', text: '日本' }], isError: false } }]);
  input.end();
  await done;
});

test('the revision initialize agreed applies to the lines after it', async () => {
  const { send, lineCount, input, done } = harness();
  send({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {} } });
  send({ jsonrpc: '2.0', method: 'notifications/initialized' });
  send([{ jsonrpc: '2.0', id: 2, method: 'ping' }]);
  send({ jsonrpc: '2.0', id: 3, method: 'tools/list' });
  const lines = await lineCount(3);
  assert.equal((lines[0]!.result as { protocolVersion: string }).protocolVersion, '2025-06-18');
  assert.deepEqual(lines[1], {
    jsonrpc: '2.0',
    error: { code: -32600, message: 'Invalid Request: protocol version 2025-06-18 does not allow batches (only 2025-03-26 did)' },
  });
  assert.equal((lines[2]!.result as { tools: { title?: string }[] }).tools[0]!.title, 'Echo');
  input.end();
  await done;
});

test('a 2025-03-26 batch is answered on one line as an array', async () => {
  const { send, lineCount, input, done } = harness();
  send([
    { jsonrpc: '2.0', id: 1, method: 'ping' },
    { jsonrpc: '2.0', id: 2, method: 'ping' },
  ]);
  assert.deepEqual(await lineCount(1), [
    [
      { jsonrpc: '2.0', id: 1, result: {} },
      { jsonrpc: '2.0', id: 2, result: {} },
    ],
  ]);
  input.end();
  await done;
});

test('notifications/cancelled aborts a running call, which then gets no response; progress came before', async () => {
  const { backend, running } = slowBackend();
  const { send, lines, lineCount, input, done } = harness(backend);
  send({ jsonrpc: '2.0', id: 'slow', method: 'tools/call', params: { name: 'Slow', _meta: { progressToken: 'tok' } } });
  await running;
  await lineCount(1);
  send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'slow', reason: 'stop' } });
  send({ jsonrpc: '2.0', id: 'after', method: 'ping' });
  await lineCount(2);
  assert.equal(backend.calls[0]!.options.signal.aborted, true);
  input.end();
  await done;
  assert.deepEqual(lines, [
    { jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 'tok', progress: 1, message: 'first output' } },
    { jsonrpc: '2.0', id: 'after', result: {} },
  ]);
});

test('a line that is not JSON is a parse error; the next line is still served', async () => {
  const { input, lineCount, done } = harness();
  input.write('not json\n{"jsonrpc":"2.0","id":1,"method":"ping"}\n');
  assert.deepEqual(await lineCount(2), [
    { jsonrpc: '2.0', error: { code: -32700, message: 'Parse error: the message is not valid JSON' } },
    { jsonrpc: '2.0', id: 1, result: {} },
  ]);
  input.end();
  await done;
});

test('a line over the limit is refused without being kept; the next line is still served', async () => {
  const { input, lineCount, done } = harness(fakeBackend(), { maxLineBytes: 64 });
  input.write(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"text":"${'x'.repeat(50)}`);
  input.write(`${'y'.repeat(100)}"}}\n{"jsonrpc":"2.0","id":2,"method":"ping"}\n`);
  assert.deepEqual(await lineCount(2), [
    { jsonrpc: '2.0', error: { code: -32600, message: 'Invalid Request: the message is longer than 64 bytes' } },
    { jsonrpc: '2.0', id: 2, result: {} },
  ]);
  input.end();
  await done;
});

test('past maxInFlight, the next request waits for a slot', async () => {
  const { backend, running, release } = slowBackend();
  const { send, lines, lineCount, input, done } = harness(backend, { maxInFlight: 1 });
  send({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'Slow' } });
  send({ jsonrpc: '2.0', id: 2, method: 'ping' });
  await running;
  // Give the second request every chance to be answered early: several turns of the event loop.
  for (let turn = 0; turn < 20; turn += 1) await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(lines, []);
  release();
  assert.deepEqual(
    (await lineCount(2)).map((line) => line.id),
    [1, 2],
  );
  input.end();
  await done;
});

test('when the input ends, calls still running after the grace are aborted, answered, and the server resolves', async () => {
  const { backend, running } = slowBackend();
  const { send, lines, input, done } = harness(backend, { endGraceMs: 10 });
  send({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'Slow' } });
  await running;
  input.end();
  await done;
  assert.equal(backend.calls[0]!.options.signal.aborted, true);
  assert.deepEqual(lines.at(-1), { jsonrpc: '2.0', id: 1, result: { content: [{ type: 'text', text: 'aborted' }], isError: true } });
});

test('a last line without a newline is served when the input ends', async () => {
  const { input, lines, done } = harness();
  input.end('{"jsonrpc":"2.0","id":9,"method":"ping"}');
  await done;
  assert.deepEqual(lines, [{ jsonrpc: '2.0', id: 9, result: {} }]);
});

test('the shutdown signal aborts running calls and stops reading', async () => {
  const { backend, running } = slowBackend();
  const shutdown = new AbortController();
  const { send, done, lines } = harness(backend, { signal: shutdown.signal, endGraceMs: 60_000 });
  send({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'Slow' } });
  await running;
  shutdown.abort(new Error('SIGTERM'));
  await done;
  assert.equal(backend.calls[0]!.options.signal.aborted, true);
  assert.equal(lines.at(-1)!.id, 1);
});

test('a closed output (EPIPE) ends the session like the end of input, with nothing thrown', async () => {
  const input = new PassThrough();
  const output = new Writable({
    write(_chunk, _encoding, callback) {
      callback(Object.assign(new Error('write EPIPE'), { code: 'EPIPE' }));
    },
  });
  const done = serveStdio(new McpDispatcher(fakeBackend(), { progressIntervalMs: 0 }), input, output, { caller: ANYONE, endGraceMs: 0 });
  input.write(`${JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' })}\n`);
  await done;
  input.destroy();
});

test('a progress token over 256 bytes, or a number that is not a safe integer, is refused on its line with -32602', async () => {
  const { send, lineCount, input, done } = harness();
  send({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'Echo', arguments: { text: 'x' }, _meta: { progressToken: 't'.repeat(900_000) } } });
  send({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'Echo', arguments: { text: 'x' }, _meta: { progressToken: 2 ** 60 } } });
  send({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'Echo', arguments: { text: 'x' }, _meta: { progressToken: 'ok' } } });
  const lines = await lineCount(3);
  input.end();
  await done;
  assert.deepEqual(
    [...lines].sort((a, b) => Number(a.id) - Number(b.id)),
    [
      { jsonrpc: '2.0', id: 1, error: { code: -32602, message: 'Invalid params: _meta.progressToken is a string of 900000 bytes; at most 256 are taken' } },
      {
        jsonrpc: '2.0',
        id: 2,
        error: {
          code: -32602,
          message: 'Invalid params: _meta.progressToken must be a string of at most 256 bytes or an integer from -(2^53 - 1) to 2^53 - 1',
        },
      },
      { jsonrpc: '2.0', id: 3, result: { content: [{ type: 'text', text: 'x' }], isError: false } },
    ],
  );
});

test("an output that is not read gets each call's latest progress, not a queue of it; the responses are still written", async () => {
  const held: Array<() => void> = [];
  const taken: string[] = [];
  const output = new Writable({
    decodeStrings: false,
    write(chunk: string, _encoding, callback) {
      taken.push(String(chunk));
      held.push(callback);
    },
  });
  const reports = 20_000;
  const reported = { count: 0 };
  let allReported!: () => void;
  const finished = new Promise<void>((resolve) => (allReported = resolve));
  const backend = fakeBackend({
    Flood: async (_args, { onProgress }) => {
      for (let n = 1; n <= reports; n++) onProgress?.({ progress: n, message: 'x'.repeat(1000) });
      if (++reported.count === 3) allReported();
      return { content: [{ type: 'text', text: 'flooded' }], isError: false };
    },
  });
  const input = new PassThrough();
  const done = serveStdio(new McpDispatcher(backend, { progressIntervalMs: 0 }), input, output, { caller: ANYONE });
  // One chunk, so all three start before reading pauses for the blocked output.
  input.write(
    [1, 2, 3]
      .map((id) => `${JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'Flood', _meta: { progressToken: `t${id}` } } })}\n`)
      .join(''),
  );
  await finished;
  // 60,000 reports of a kilobyte each: what the output holds is its buffer (its high-water mark
  // and the write that crossed it), a notification per call and the three responses.
  const bound = output.writableHighWaterMark + 8 * 1024;
  assert.ok(output.writableLength < bound, `the output holds ${output.writableLength} bytes, over ${bound}`);
  input.end();
  while (held.length > 0 || taken.length === 0) {
    held.shift()?.();
    await new Promise((resolve) => setImmediate(resolve));
  }
  await done;
  const lines = taken
    .join('')
    .split('\n')
    .filter(Boolean)
    .map((text) => JSON.parse(text) as Line);
  assert.deepEqual(
    lines
      .filter((l) => l.id !== undefined)
      .map((l) => l.id)
      .sort(),
    [1, 2, 3],
  );
  const notifications = lines.filter((l) => l.method === 'notifications/progress');
  assert.ok(notifications.length < 100, `${notifications.length} notifications were written`);
  for (const token of ['t1', 't2', 't3']) {
    const own = notifications.filter((n) => n.params?.['progressToken'] === token);
    assert.equal(own.at(-1)?.params?.['progress'], reports, `the last report of ${token} reached the reader`);
    const answer = lines.findIndex((l) => l.id === Number(token.slice(1)));
    assert.ok(lines.indexOf(own.at(-1)!) < answer, `the progress of ${token} came before its response`);
  }
});
