import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { JSONRPCMessage } from '@modelcontextprotocol/client';
import { AnswerLedger } from '#src/upstreams/answer-ledger.js';
import { StdioMessageReader } from '#src/upstreams/stdio/reader.js';

const KiB = 1024;
const MiB = 1024 * KiB;

/** A reader whose ledger awaits a call (id 1, `maxResultBytes`) and a listing (id 2, when `listing`); `feed` pushes text in pieces of `size` bytes. */
function reader(maxResultBytes = 64 * KiB, listing = false) {
  const ledger = new AnswerLedger(maxResultBytes);
  ledger.sent({ jsonrpc: '2.0', id: 0, method: 'initialize', params: {} });
  ledger.admit({ jsonrpc: '2.0', id: 0, result: {} }, 10);
  ledger.sent({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 't' } });
  if (listing) ledger.sent({ jsonrpc: '2.0', id: 2, method: 'tools/list' });
  const heard = { messages: [] as JSONRPCMessage[], broken: [] as string[], late: [] as unknown[] };
  ledger.onLate = (id) => heard.late.push(id);
  const lines = new StdioMessageReader(ledger, { message: (m) => heard.messages.push(m), broken: (why) => heard.broken.push(why) });
  const feed = (text: string, size = 64 * KiB): void => {
    const bytes = Buffer.from(text);
    for (let at = 0; at < bytes.length; at += size) lines.push(bytes.subarray(at, at + size));
  };
  return { ledger, lines, heard, feed };
}

const answer = (id: unknown, bytes: number, order: 'first' | 'last' = 'last'): string => {
  const result = JSON.stringify({ content: [{ type: 'text', text: 'x'.repeat(bytes) }] });
  return order === 'first'
    ? `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":${result}}\n`
    : `{"result":${result},"jsonrpc":"2.0","id":${JSON.stringify(id)}}\n`;
};
const errorOf = (messages: JSONRPCMessage[]): unknown => messages.map((m) => ('error' in m ? m.error.message : 'result' in m ? 'result' : m.method));

describe('StdioMessageReader', () => {
  it('hands on an answer within its allowance, its id first or last, cut in any pieces', () => {
    for (const order of ['first', 'last'] as const)
      for (const size of [1, 7, 4096]) {
        const { ledger, heard, feed } = reader();
        feed(answer(1, 1000, order), size);
        assert.deepEqual(errorOf(heard.messages), ['result'], `${order}, pieces of ${size}`);
        assert.equal(ledger.counters.parsedBytes, Buffer.byteLength(answer(1, 1000)) - 1);
      }
  });

  it('refuses an answer past its allowance unparsed: kept no further than the allowance when its id comes first', () => {
    const { ledger, heard, feed } = reader(64 * KiB);
    feed(answer(1, 10 * MiB, 'first'));
    assert.deepEqual(errorOf(heard.messages), ['the answer to tools/call was larger than 64 KiB']);
    assert.equal(ledger.counters.parsedBytes, 0);
    assert.ok(ledger.counters.peakHeldBytes <= 64 * KiB, String(ledger.counters.peakHeldBytes));
  });

  it('keeps an answer whose id comes last up to the largest allowance awaited, then skips it unkept and refuses it once its id shows', () => {
    const { ledger, heard, feed } = reader(64 * KiB, true);
    // Under the listing's 16 MiB: kept, then refused at its end, unparsed.
    feed(answer(1, 100 * KiB));
    // Past 16 MiB: skipped from there on.
    feed(answer(2, 17 * MiB));
    assert.deepEqual(errorOf(heard.messages), ['the answer to tools/call was larger than 64 KiB', 'the answer to tools/list was larger than 16 MiB']);
    assert.equal(ledger.counters.parsedBytes, 0);
    assert.ok(ledger.counters.peakHeldBytes <= 16 * MiB, String(ledger.counters.peakHeldBytes));
    assert.deepEqual(heard.broken, []);
  });

  it('drops a late answer unparsed, and says so', () => {
    const { ledger, heard, feed } = reader();
    ledger.sent({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1 } });
    feed(answer(1, 2 * MiB, 'first'));
    feed(answer(1, 100, 'last'));
    assert.deepEqual(heard.messages, []);
    assert.deepEqual(heard.late, [1, 1]);
    assert.equal(ledger.counters.parsedBytes, 0);
    assert.ok(ledger.counters.peakHeldBytes < KiB, String(ledger.counters.peakHeldBytes));
  });

  it('breaks on an answer to an id never sent, a string one included, before it is kept whole', () => {
    for (const id of [9, '1', 1.5]) {
      const { ledger, heard, feed } = reader();
      feed(answer(id, 30 * MiB, 'first'));
      assert.deepEqual(heard.broken, ['sent an answer to a request toolport never sent'], String(id));
      assert.equal(ledger.counters.parsedBytes, 0);
      assert.ok(ledger.counters.peakHeldBytes < KiB);
    }
  });

  it('breaks on a notification, a line that is not JSON, or an answer without an id past their bounds', () => {
    const cases = [
      [`{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"${'x'.repeat(2 * MiB)}"}}\n`, 'sent more than 1 MiB without a line break'],
      [`${'x'.repeat(2 * MiB)}\n`, 'sent more than 1 MiB without a line break'],
      [`{"result":{"text":"${'x'.repeat(MiB)}"},"jsonrpc":"2.0"}\n`, 'sent more than 1 MiB without a line break'],
      [`{"result":{"text":"${'x'.repeat(33 * MiB)}`, 'sent more than 32 MiB without a line break'],
    ];
    for (const [text, why] of cases) {
      const { heard, feed } = reader();
      feed(text!);
      assert.deepEqual(heard.broken, [why]);
    }
  });

  it('skips a short line that is not JSON, breaks on JSON that is not JSON-RPC, and says when a line is open', () => {
    const { lines, heard, feed } = reader();
    feed('Server started on stdio\r\n');
    assert.deepEqual(heard, { messages: [], broken: [], late: [] });
    feed('{"jsonrpc":"2.0","result":');
    assert.ok(lines.lineOpenSince !== undefined);
    feed('{}}\n');
    assert.equal(lines.lineOpenSince, undefined);
    assert.deepEqual(heard.broken, ['sent what is not a JSON-RPC message']);
  });
});
