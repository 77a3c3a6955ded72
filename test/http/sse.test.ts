import assert from 'node:assert/strict';
import type { PassThrough } from 'node:stream';
import { test } from 'node:test';
import type { FastifyReply } from 'fastify';
import { CallAbort } from '#src/core/call-abort.js';
import { EventStream, keepAliveInterval } from '#src/http/sse.js';
import { readStream, type StreamItem } from '../support/sse-client.js';

/** A reply that keeps what it is sent: the stream's body, which the test reads (or does not). */
function fakeReply() {
  const sent: { body?: PassThrough; status?: number; headers: Record<string, string> } = { headers: {} };
  const reply = {
    code(status: number) {
      sent.status = status;
      return reply;
    },
    header(name: string, value: string) {
      sent.headers[name] = value;
      return reply;
    },
    send(body: PassThrough) {
      sent.body = body;
      return reply;
    },
  };
  return { reply: reply as unknown as FastifyReply, sent };
}

const buffered = (body: PassThrough): number => body.writableLength + body.readableLength;

async function readAll(body: PassThrough): Promise<StreamItem[]> {
  const items: StreamItem[] = [];
  for await (const item of readStream(ReadableStream.from(body) as ReadableStream<Uint8Array>)) items.push(item);
  return items;
}

test('an event stream that the client does not read holds its buffers and one report per call, and the latest of each goes out before the result', async () => {
  const { reply, sent } = fakeReply();
  const stream = new EventStream(reply, 60_000);
  const abort = new CallAbort();
  const calls = ['a', 'b'].map((id, index) => ({ id, reporter: stream.progressOf(String(index), { id, index }, abort, 0) }));
  const message = 'm'.repeat(200);
  let largest = 0;
  for (let n = 1; n <= 20_000; n++) {
    for (const { reporter } of calls) reporter.report({ progress: n, message });
    largest = Math.max(largest, buffered(sent.body!));
  }
  // Two buffers of 16 KiB (the stream's two sides) and the one write that found them full.
  assert.ok(largest < 2 * 16 * 1024 + 400, `${largest} bytes buffered for a client that reads nothing`);
  assert.equal(sent.status, 200);
  assert.equal(sent.headers['content-type'], 'text/event-stream');

  for (const { reporter } of calls) reporter.finish();
  stream.end('{"done":true}');
  const items = await readAll(sent.body!);
  const events = items.filter((i): i is { event: string; data: string } => 'event' in i);
  assert.ok(events.length < 300, `${events.length} events written of 40,000 reports`);
  assert.deepEqual(events.at(-1), { event: 'result', data: '{"done":true}' });
  for (const [index, id] of ['a', 'b'].entries()) {
    const last = events.filter((e) => e.event === 'progress' && (JSON.parse(e.data) as { id: string }).id === id).at(-1);
    assert.deepEqual(JSON.parse(last!.data), { id, index, progress: 20_000, message }, `the latest report of call ${id}`);
  }
});

test('an event stream begins at the first keep-alive tick of a silent call, and skips keep-alives while the client does not read', async (t) => {
  t.mock.timers.enable({ apis: ['setInterval'] });
  const { reply, sent } = fakeReply();
  const stream = new EventStream(reply, 1_000);
  assert.equal(stream.started, false);
  t.mock.timers.tick(1_000);
  assert.equal(stream.started, true);
  const body = sent.body!;
  assert.equal(body.read()?.toString(), ':\n\n');

  const reporter = stream.progressOf('0', {}, new CallAbort(), 0);
  for (let n = 1; !body.writableNeedDrain; n++) reporter.report({ progress: n, message: 'x'.repeat(500) });
  const held = buffered(body);
  for (let tick = 0; tick < 5; tick++) t.mock.timers.tick(1_000);
  // Nothing written while blocked: no write re-arms the connection's idle timeout.
  assert.equal(buffered(body), held);
  stream.close();
});

test('keep-alive comments come twice per idle timeout, at most once a second', () => {
  assert.equal(keepAliveInterval(30_000), 15_000);
  assert.equal(keepAliveInterval(1_000), 1_000);
});
