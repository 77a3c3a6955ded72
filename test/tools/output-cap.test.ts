import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { capText, MAX_OUTPUT_CHARS, OutputCapture } from '#src/tools/output-cap.js';

const BROKEN = /\uFFFD|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function capture(bytes: Buffer, chunkSize: number, keepBytes?: number): OutputCapture {
  const out = new OutputCapture(keepBytes);
  for (let i = 0; i < bytes.length; i += chunkSize) out.write(bytes.subarray(i, i + chunkSize));
  return out;
}

test('OutputCapture returns short output unchanged', () => {
  const out = capture(Buffer.from('hello\nworld\n'), 3);
  assert.deepEqual(out.render(), { text: 'hello\nworld\n', binary: false, omittedBytes: 0 });
  assert.equal(out.totalBytes, 12);
});

test('OutputCapture keeps the head and tail of long output and counts the bytes left out', () => {
  const lines = Array.from({ length: 100_000 }, (_, i) => `line ${i}`).join('\n');
  const out = capture(Buffer.from(lines), 65_536);
  const { text, omittedBytes, binary } = out.render(1_000);
  assert.equal(binary, false);
  assert.ok(text.length <= 1_000, `${text.length} characters`);
  assert.ok(text.startsWith('line 0\nline 1\n'));
  assert.ok(text.endsWith('line 99998\nline 99999'));
  const [head, tail] = text.split(/\n\[\.\.\. \d+ bytes omitted[^\n]*\]\n/);
  // The split takes the newline before the note, which belongs to the head when it ended a line.
  const shown = Buffer.byteLength(head!) + Buffer.byteLength(tail!);
  assert.ok([shown, shown + 1].includes(Buffer.byteLength(lines) - omittedBytes));
  assert.match(text, new RegExp(`\\[\\.\\.\\. ${omittedBytes} bytes omitted; the output was ${Buffer.byteLength(lines)} bytes`));
});

test('OutputCapture keeps bounded memory: only the first and last bytes are stored', () => {
  const out = new OutputCapture(1_000);
  const chunk = Buffer.alloc(65_536, 'x');
  for (let i = 0; i < 200; i++) out.write(chunk);
  out.write(Buffer.from('END'));
  assert.equal(out.totalBytes, 200 * 65_536 + 3);
  const { text } = out.render(500);
  assert.ok(text.endsWith('xxEND'));
});

test('OutputCapture keeps exactly the first and last keepBytes bytes, whatever the chunk sizes', () => {
  fc.assert(
    fc.property(fc.array(fc.string({ unit: fc.constantFrom('a', 'b', 'c', '\n'), maxLength: 40 }), { maxLength: 30 }), (pieces) => {
      const out = new OutputCapture(16);
      for (const piece of pieces) out.write(Buffer.from(piece));
      const all = pieces.join('');
      const { text, omittedBytes } = out.render(10_000);
      if (all.length <= 32) {
        assert.deepEqual({ text, omittedBytes }, { text: all, omittedBytes: 0 });
      } else {
        assert.equal(omittedBytes, all.length - 32);
        const head = all.slice(0, 16);
        assert.equal(
          text,
          `${head.endsWith('\n') ? head : `${head}\n`}[... ${all.length - 32} bytes omitted; the output was ${all.length} bytes, showing its beginning and end ...]\n${all.slice(-16)}`,
        );
      }
    }),
  );
});

test('OutputCapture decodes characters split across chunks, whole and cut', () => {
  const euros = Buffer.from('€'.repeat(100_000));
  for (const size of [1, 2, 7, 4096, 65_536]) {
    const whole = capture(euros.subarray(0, 3 * 5_000), size).render();
    assert.equal(whole.text, '€'.repeat(5_000), `chunk size ${size}`);
    const cut = capture(euros, size).render();
    assert.doesNotMatch(cut.text, BROKEN, `chunk size ${size}`);
    assert.ok(cut.text.length <= MAX_OUTPUT_CHARS);
    assert.match(cut.text, /^€+\n\[\.\.\. \d+ bytes omitted[^\n]*\]\n€+$/u);
  }
});

test('OutputCapture cuts at character boundaries when head and tail are stored apart', () => {
  // keepBytes 10 falls inside a 3-byte character at both ends.
  const out = capture(Buffer.from('€'.repeat(1_000)), 5, 10);
  const { text } = out.render(400);
  assert.doesNotMatch(text, BROKEN);
  assert.match(text, /^€{3}\n\[\.\.\. 2982 bytes omitted[^\n]*\]\n€{3}$/u);
});

test('OutputCapture reports NUL bytes and invalid UTF-8 as binary', () => {
  assert.deepEqual(capture(Buffer.from('a\0b'), 1).render(), { text: '[binary output, 3 bytes]', binary: true, omittedBytes: 3 });
  assert.equal(capture(Buffer.from([0x61, 0xff, 0x62]), 2).render().text, '[binary output, 3 bytes]');
  const big = Buffer.alloc(1_000_000, 0x41);
  big[999_990] = 0xc0;
  assert.equal(capture(big, 65_536).render().text, '[binary output, 1000000 bytes]');
});

test('OutputCapture treats a character cut off at the very end as text, not binary', () => {
  const bytes = Buffer.from('ok €');
  const { text, binary } = capture(bytes.subarray(0, bytes.length - 1), 1).render();
  assert.equal(binary, false);
  assert.ok(text.startsWith('ok '));
});

test('capText never splits a surrogate pair and stays within the limit', () => {
  const emoji = '😀'.repeat(50_000);
  for (const max of [301, 302, 303, 1_000, 29_999]) {
    const { text } = capText(emoji, max);
    assert.ok(text.length <= max, `${text.length} > ${max}`);
    assert.doesNotMatch(text, BROKEN);
  }
  assert.deepEqual(capText('short', 10), { text: 'short', omittedBytes: 0 });
});
