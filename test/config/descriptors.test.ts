import assert from 'node:assert/strict';
import { test } from 'node:test';
import { defaultMaxConnections, DescriptorLimitError, descriptorUsage, parseDescriptorLimit } from '#src/config/descriptors.js';

const LIMITS = `Limit                     Soft Limit           Hard Limit           Units
Max cpu time              unlimited            unlimited            seconds
Max open files            4096                 524288               files
Max locked memory         8388608              8388608              bytes
`;

test('parseDescriptorLimit reads the soft "Max open files" limit', () => {
  assert.equal(parseDescriptorLimit(LIMITS), 4096);
});

test('parseDescriptorLimit gives undefined for an unlimited or missing limit', () => {
  assert.equal(parseDescriptorLimit(LIMITS.replace('4096   ', 'unlimited')), undefined);
  assert.equal(parseDescriptorLimit('Max cpu time unlimited unlimited seconds\n'), undefined);
  assert.equal(parseDescriptorLimit(''), undefined);
});

test("descriptorUsage reads this process's limit and open descriptors from /proc", () => {
  const { limit, open } = descriptorUsage();
  assert.ok(Number.isInteger(limit) && limit! > 0, `limit ${String(limit)}`);
  // At least standard input, output and error.
  assert.ok(Number.isInteger(open) && open! >= 3, `open ${String(open)}`);
});

test('defaultMaxConnections leaves out what is open and a quarter of the limit (at least 64) for tool calls', () => {
  assert.equal(defaultMaxConnections({ limit: 1024, open: 30 }), 1024 - 30 - 256);
  assert.equal(defaultMaxConnections({ limit: 65_536, open: 40 }), 65_536 - 40 - 16_384);
  assert.equal(defaultMaxConnections({ limit: 160, open: 26 }), 160 - 26 - 64);
});

test('defaultMaxConnections assumes a limit of 1024 and 64 open descriptors when /proc cannot tell', () => {
  assert.equal(defaultMaxConnections({ limit: undefined, open: undefined }), 1024 - 64 - 256);
});

test('defaultMaxConnections refuses a limit that leaves no room for connections, naming the way out', () => {
  assert.throws(
    () => defaultMaxConnections({ limit: 90, open: 26 }),
    (err: unknown) => {
      assert.ok(err instanceof DescriptorLimitError);
      assert.equal(
        err.message,
        'The descriptor limit (ulimit -n) of 90 leaves no room for connections: 26 are open at start-up and 64 are kept for tool calls. Raise the limit, or set TOOLPORT_MAX_CONNECTIONS.',
      );
      return true;
    },
  );
});
