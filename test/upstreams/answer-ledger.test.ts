import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ProtocolError } from '@modelcontextprotocol/client';
import { AnswerLedger } from '#src/upstreams/answer-ledger.js';

const MiB = 1024 * 1024;
const request = (id: number | string, method: string, params?: Record<string, unknown>) => ({
  jsonrpc: '2.0' as const,
  id,
  method,
  ...(params ? { params } : {}),
});
const result = (id: number | string) => ({ jsonrpc: '2.0' as const, id, result: {} });

describe('AnswerLedger', () => {
  it('gives each request its allowance: a call maxResultBytes, a listing 16 MiB over its pages, anything else 1 MiB', () => {
    const ledger = new AnswerLedger(2 * MiB);
    ledger.sent(request(0, 'initialize'));
    ledger.sent(request(1, 'tools/call'));
    ledger.sent(request(2, 'tools/list'));
    assert.deepEqual(
      [0, 1, 2].map((id) => ledger.verdict(id)),
      [
        { kind: 'awaited', method: 'initialize', maxBytes: MiB },
        { kind: 'awaited', method: 'tools/call', maxBytes: 2 * MiB },
        { kind: 'awaited', method: 'tools/list', maxBytes: 16 * MiB },
      ],
    );
    assert.equal(ledger.largest(), 16 * MiB);
    // The next page may take what the first left; a new listing starts again.
    assert.deepEqual(ledger.admit(result(2), 10 * MiB), { deliver: result(2) });
    ledger.sent(request(3, 'tools/list', { cursor: 'c' }));
    assert.deepEqual(ledger.verdict(3), { kind: 'awaited', method: 'tools/list', maxBytes: 6 * MiB });
    ledger.sent(request(4, 'tools/list'));
    assert.deepEqual(ledger.verdict(4), { kind: 'awaited', method: 'tools/list', maxBytes: 16 * MiB });
  });

  it('tells late answers (answered, cancelled, forgotten) from answers to ids never sent', () => {
    const ledger = new AnswerLedger(MiB);
    for (const id of [0, 1, 2]) ledger.sent(request(id, 'tools/call'));
    ledger.admit(result(0), 10);
    ledger.sent({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1 } });
    ledger.forget(2);
    assert.deepEqual(
      [0, 1, 2, 3, -1, '1', null].map((id) => ledger.verdict(id).kind),
      ['late', 'late', 'late', 'unsent', 'unsent', 'unsent', 'unsent'],
    );
    const late: unknown[] = [];
    ledger.onLate = (id) => late.push(id);
    assert.deepEqual(ledger.admit(result(1), 10), { drop: true });
    assert.deepEqual(ledger.admit(result(7), 10), { breach: 'sent an answer to a request toolport never sent' });
    assert.deepEqual(late, [1]);
    assert.equal(ledger.counters.lateAnswers, 1);
  });

  it('answers a request past its allowance with a refusal only it recognises', () => {
    const ledger = new AnswerLedger(MiB);
    ledger.sent(request(0, 'tools/call'));
    const admitted = ledger.admit(result(0), MiB + 1);
    assert.ok('deliver' in admitted && 'error' in admitted.deliver);
    const { code, message, data } = admitted.deliver.error;
    assert.deepEqual([code, message], [-32000, 'the answer to tools/call was larger than 1 MiB']);
    assert.deepEqual(ledger.refusal(new ProtocolError(code, message, data)), { method: 'tools/call', maxBytes: MiB });
    // The same error from the upstream (it never sees the stamp), or another ledger's, is not one.
    assert.equal(ledger.refusal(new ProtocolError(code, message, { ...(data as object), toolport: 'guess' })), undefined);
    assert.equal(new AnswerLedger(MiB).refusal(new ProtocolError(code, message, data)), undefined);
    assert.equal(ledger.verdict(0).kind, 'late');
  });
});
