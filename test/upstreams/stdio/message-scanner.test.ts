import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { MessageScanner } from '#src/upstreams/stdio/message-scanner.js';

/** What the scanner learns of `text` fed in pieces cut at `cuts` (byte offsets). */
function scan(text: string | Buffer, cuts: number[] = []): { kind: string | undefined; id: unknown; settled: boolean; notObject: boolean } {
  const bytes = Buffer.isBuffer(text) ? text : Buffer.from(text);
  const scanner = new MessageScanner();
  let at = 0;
  for (const cut of [...cuts.filter((c) => c > 0 && c < bytes.length).sort((a, b) => a - b), bytes.length]) {
    if (!scanner.settled) scanner.push(bytes.subarray(at, cut));
    at = cut;
  }
  return { kind: scanner.kind, id: scanner.id, settled: scanner.settled, notObject: scanner.notObject };
}

describe('MessageScanner', () => {
  it('finds the kind and the id of an answer, the id first or last', () => {
    assert.deepEqual(scan('{"jsonrpc":"2.0","id":7,"result":{"a":[1,{"b":"}"}]}}'), { kind: 'answer', id: 7, settled: true, notObject: false });
    assert.deepEqual(scan('{"result":{"text":"\\"id\\":9,"},"jsonrpc":"2.0","id":"s-1"}'), { kind: 'answer', id: 's-1', settled: true, notObject: false });
    assert.deepEqual(scan('{ "error" : { "code" : 1 } , "id" : 12 }'), { kind: 'answer', id: 12, settled: true, notObject: false });
  });

  it('takes a message whose first key of method, result and error is method for another kind', () => {
    assert.deepEqual(scan('{"jsonrpc":"2.0","method":"notifications/progress","params":{"result":1}}').kind, 'other');
    assert.deepEqual(scan('{"id":3,"method":"ping"}'), { kind: 'other', id: 3, settled: true, notObject: false });
  });

  it('reads keys and ids as JSON.parse does: escapes decoded, other values not ids', () => {
    assert.deepEqual(scan('{"result":{},"\\u0069d":5}').id, 5);
    assert.deepEqual(scan('{"result":{},"id":"a\\"b"}').id, 'a"b');
    for (const value of ['null', '1.5', 'true', '{"x":1}', '[1]', `"${'x'.repeat(100)}"`]) assert.equal(scan(`{"result":{},"id":${value}}`).id, null, value);
  });

  it('says what is not a JSON object, and stops there', () => {
    for (const text of ['aaaa', '[{"id":1}]', '"id"', '{"id" 1}', '{,}']) assert.equal(scan(text).notObject, true, text);
  });

  it('agrees with JSON.parse on answers of any shape however they are cut into pieces', () => {
    const text = fc.string({ unit: fc.constantFrom('a', '"', '\\', '}', '{', ']', '[', ',', ':', 'é', '\u2028', ' ') });
    const json = fc.letrec((tie) => ({
      value: fc.oneof(
        { depthSize: 'small' },
        text,
        fc.integer(),
        fc.constant(null),
        fc.array(tie('value'), { maxLength: 4 }),
        fc.dictionary(text, tie('value'), { maxKeys: 4 }),
      ),
    })).value;
    const message = fc
      .record({
        id: fc.oneof(fc.integer({ min: 0, max: 1e9 }), text),
        body: json,
        order: fc.constantFrom('id first', 'id last'),
        kind: fc.constantFrom('result', 'error', 'method'),
      })
      .map(({ id, body, order, kind }) => {
        const value = kind === 'method' ? JSON.stringify('tools/call') : JSON.stringify(body);
        const parts = [`"jsonrpc":"2.0"`, `"${kind}":${value}`];
        const idPart = `"id":${JSON.stringify(id)}`;
        return { text: `{${order === 'id first' ? [idPart, ...parts] : [...parts, idPart]}}`, id, kind };
      });
    fc.assert(
      fc.property(message, fc.array(fc.nat({ max: 400 }), { maxLength: 8 }), ({ text: line, id, kind }, cuts) => {
        const parsed = JSON.parse(line) as { id: unknown };
        assert.equal(parsed.id, id);
        const found = scan(line, cuts);
        assert.equal(found.kind, kind === 'method' ? 'other' : 'answer');
        assert.equal(found.id, typeof id === 'string' && Buffer.byteLength(JSON.stringify(id)) > 66 ? null : id);
      }),
      { numRuns: 2000 },
    );
  });

  it('scans a 32 MiB answer whose id comes last in pieces of 64 KiB', () => {
    const rows = Array.from({ length: 400_000 }, (_, i) => ({ i, name: `r${i}\\"`, ok: [true, { deep: 'x"y' }] }));
    const line = Buffer.from(JSON.stringify({ result: { structuredContent: { rows } }, jsonrpc: '2.0', id: 41 }));
    const cuts = Array.from({ length: Math.floor(line.length / 65536) }, (_, i) => (i + 1) * 65536);
    assert.deepEqual(scan(line, cuts), { kind: 'answer', id: 41, settled: true, notObject: false });
  });
});
