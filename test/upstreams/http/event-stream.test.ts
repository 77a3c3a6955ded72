import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { EventStreamParser, type ServerSentEvent } from '#src/upstreams/http/event-stream.js';
import { MessageTooLargeError } from '#src/upstreams/stdio/line-splitter.js';

/** The events `text` holds, fed in chunks of `size` bytes. */
function parse(text: string | Buffer, size = Infinity, maxBytes = 1024): { events: ServerSentEvent[]; parser: EventStreamParser } {
  const events: ServerSentEvent[] = [];
  const parser = new EventStreamParser(maxBytes, (event) => events.push(event));
  const bytes = Buffer.isBuffer(text) ? text : Buffer.from(text);
  for (let at = 0; at < bytes.length; at += Math.min(size, bytes.length)) parser.push(bytes.subarray(at, at + size));
  return { events, parser };
}

describe('EventStreamParser', () => {
  it('reads events however the stream is cut into chunks, to the byte', () => {
    const stream = 'event: message\ndata: {"a":1}\nid: 7\n\ndata: é\ndata: ü\r\n\r\n';
    const expected = [
      { event: 'message', data: '{"a":1}', id: '7' },
      { event: 'message', data: 'é\nü' },
    ];
    for (const size of [1, 2, 3, 5, 1000]) assert.deepEqual(parse(stream, size).events, expected, `chunks of ${size}`);
  });

  it('skips comments, unknown fields and events with empty data, and keeps the last id and the retry the stream set', () => {
    const { events, parser } = parse('\uFEFF: comment\nid: prime\ndata:\n\nfoo: bar\nevent: other\ndata:x\n\nretry: 25\nretry: soon\nid: last\n\n');
    assert.deepEqual(events, [{ event: 'other', data: 'x' }]);
    assert.equal(parser.lastEventId, 'last');
    assert.equal(parser.retryMs, 25);
  });

  it('takes a field without a colon as a field with an empty value, and strips one space after the colon only', () => {
    assert.deepEqual(parse('data\ndata:  two spaces\n\n').events, [{ event: 'message', data: '\n two spaces' }]);
  });

  it('refuses a line, or the data of one event, past its bound', () => {
    assert.throws(() => parse(`data: ${'a'.repeat(1100)}`, 100), {
      name: 'MessageTooLargeError',
      message: 'sent more than 0.0009765625 MiB without a line break',
    });
    assert.throws(
      () => parse(`data: ${'a'.repeat(600)}\ndata: ${'a'.repeat(600)}\n\n`),
      (err) => err instanceof MessageTooLargeError && err.message === 'sent an event of more than 0.0009765625 MiB',
    );
  });
});
