import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RgRecords, type RgRecordsOptions } from '#src/tools/grep/records.js';

/** The lines RgRecords makes of `output`, fed in pieces of `size` bytes. */
function read(output: Buffer, options: Partial<RgRecordsOptions>, size = output.length): string[] {
  const lines: string[] = [];
  const records = new RgRecords({ mode: 'content', lineNumbers: true, file: undefined, rename: (p) => p.replace(/^\.\//, ''), ...options }, (l) =>
    lines.push(l),
  );
  for (let i = 0; i < output.length; i += size) records.write(output.subarray(i, i + size));
  records.end();
  return lines;
}

const rg = (text: string): Buffer => Buffer.from(text.replaceAll('|', '\0'));

test('RgRecords reads paths up to their NUL, whatever they hold, in pieces of any size', () => {
  const output = rg('./a\nb:9:fake|1-before\n./a\nb:9:fake|2:match\n|\n./c.txt|7:mätch\n');
  const expected = ['"a\\nb:9:fake"-1-before', '"a\\nb:9:fake":2:match', '--', 'c.txt:7:mätch'];
  for (const size of [1, 2, 3, 7, output.length]) assert.deepEqual(read(output, {}, size), expected, `pieces of ${size}`);
  assert.deepEqual(read(output, { lineNumbers: false }), ['"a\\nb:9:fake"-before', '"a\\nb:9:fake":match', '--', 'c.txt:mätch']);
});

test('RgRecords reads files and counts', () => {
  assert.deepEqual(read(rg('./x\ny|./z|'), { mode: 'files_with_matches' }, 1), ['"x\\ny"', 'z']);
  assert.deepEqual(read(rg('./x\ny|12\n./z|3\n'), { mode: 'count' }, 1), ['"x\\ny":12', 'z:3']);
});

test('RgRecords reads the note on a binary file searched by name, which has no NUL', () => {
  const file = '/proc/1/fd/20';
  const output = rg(`${file}|1:text\n${file}: binary file matches (found "\\0" byte around offset 6)\n`);
  const lines = read(output, { file, rename: (p) => (p === file ? 'x\ny.dat' : p) }, 1);
  assert.deepEqual(lines, ['"x\\ny.dat":1:text', '"x\\ny.dat": binary file matches (found "\\0" byte around offset 6)']);
});

test('RgRecords hands on a record cut off at the end', () => {
  assert.deepEqual(read(rg('./a|1:par'), {}), ['a:1:par']);
  assert.deepEqual(read(rg('./a\nb'), {}), ['"a\\nb"']);
});
