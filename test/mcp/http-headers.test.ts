import assert from 'node:assert/strict';
import { test } from 'node:test';
import { checkStandardHeaders, decodeHeaderValue } from '#src/mcp/http-headers.js';

const MODERN = '2026-07-28';
const META = { 'io.modelcontextprotocol/protocolVersion': MODERN, 'io.modelcontextprotocol/clientCapabilities': {} };
const call = (name: string) => ({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: {}, _meta: META } });
const list = { jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: META } };

function mismatch(why: string) {
  return { jsonrpc: '2.0', id: 1, error: { code: -32020, message: `Header mismatch: ${why}` } };
}

test('a stateless-revision request whose headers match its body passes', () => {
  assert.equal(checkStandardHeaders(list, { protocolVersion: MODERN, method: 'tools/list' }), undefined);
  assert.equal(checkStandardHeaders(call('Echo'), { protocolVersion: MODERN, method: 'tools/call', name: 'Echo' }), undefined);
});

test('optional whitespace around a header value is not part of it', () => {
  assert.equal(checkStandardHeaders(call('Echo'), { protocolVersion: ` ${MODERN}`, method: 'tools/call\t', name: '  Echo  ' }), undefined);
});

test('legacy requests are not checked: those revisions had no such headers', () => {
  const legacy = { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'Echo' } };
  assert.equal(checkStandardHeaders(legacy, {}), undefined);
  assert.equal(checkStandardHeaders(legacy, { protocolVersion: '2025-06-18', method: 'ping' }), undefined);
});

test('notifications and messages that are not requests are not checked', () => {
  assert.equal(checkStandardHeaders({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { _meta: META } }, {}), undefined);
  assert.equal(checkStandardHeaders('text', {}), undefined);
});

for (const [what, message, headers, why] of [
  ['MCP-Protocol-Version missing', list, { method: 'tools/list' }, 'the required MCP-Protocol-Version header is missing'],
  ['Mcp-Method missing', list, { protocolVersion: MODERN }, 'the body names method tools/list but the required Mcp-Method header is missing'],
  [
    'Mcp-Method naming another method',
    list,
    { protocolVersion: MODERN, method: 'tools/call' },
    'the Mcp-Method header names tools/call but the body names tools/list',
  ],
  [
    'Mcp-Method differing in case only (values are case-sensitive)',
    list,
    { protocolVersion: MODERN, method: 'TOOLS/LIST' },
    'the Mcp-Method header names TOOLS/LIST but the body names tools/list',
  ],
  [
    'Mcp-Name missing on tools/call',
    call('Echo'),
    { protocolVersion: MODERN, method: 'tools/call' },
    'the body names name "Echo" but the required Mcp-Name header is missing',
  ],
  [
    'Mcp-Name naming another tool',
    call('Echo'),
    { protocolVersion: MODERN, method: 'tools/call', name: 'Bash' },
    'the Mcp-Name header names "Bash" but the body names "Echo"',
  ],
  [
    'Mcp-Name with broken Base64',
    call('Echo'),
    { protocolVersion: MODERN, method: 'tools/call', name: '=?base64?***?=' },
    'the Mcp-Name header holds an invalid =?base64?...?= value',
  ],
] as const) {
  test(`a stateless-revision request with ${what} is HeaderMismatch (-32020)`, () => {
    assert.deepEqual(checkStandardHeaders(message, headers), mismatch(why));
  });
}

test('a request without _meta but with a stateless-revision header is checked too', () => {
  const bare = { jsonrpc: '2.0', id: 1, method: 'tools/list' };
  assert.deepEqual(
    checkStandardHeaders(bare, { protocolVersion: MODERN, method: 'tools/call' }),
    mismatch('the Mcp-Method header names tools/call but the body names tools/list'),
  );
});

test('a Base64-encoded Mcp-Name is decoded before it is compared', () => {
  const name = 'Grüße';
  const encoded = `=?base64?${Buffer.from(name).toString('base64')}?=`;
  assert.equal(checkStandardHeaders(call(name), { protocolVersion: MODERN, method: 'tools/call', name: encoded }), undefined);
});

test('decodeHeaderValue: plain values as they are, sentinels decoded, invalid sentinels refused', () => {
  assert.equal(decodeHeaderValue('us-west1'), 'us-west1');
  assert.equal(decodeHeaderValue('=?base64?SGVsbG8sIOS4lueVjA==?='), 'Hello, 世界');
  assert.equal(decodeHeaderValue('=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?='), '=?base64?literal?=');
  assert.equal(decodeHeaderValue('=?base64?abc?='), undefined);
  assert.equal(decodeHeaderValue('=?base64?/w==?='), undefined);
});

// Quadratic trimming of 200,000 spaces would run for minutes; the test's deadline catches it.
test('a long run of spaces in a header is trimmed in linear time', { timeout: 30_000 }, () => {
  const checked = checkStandardHeaders(call('Echo'), { protocolVersion: MODERN, method: 'tools/call', name: `${' '.repeat(100_000)}x${' '.repeat(100_000)}` });
  assert.equal(checked?.error.message, 'Header mismatch: the Mcp-Name header names "x" but the body names "Echo"');
});

test('tasks/get and tasks/cancel must carry Mcp-Name equal to params.taskId (the tasks extension), so a balancer can route by it', () => {
  for (const method of ['tasks/get', 'tasks/cancel']) {
    const message = { jsonrpc: '2.0', id: 1, method, params: { taskId: 'task_abc', _meta: META } };
    assert.equal(checkStandardHeaders(message, { protocolVersion: MODERN, method, name: 'task_abc' }), undefined);
    assert.deepEqual(
      checkStandardHeaders(message, { protocolVersion: MODERN, method }),
      mismatch('the body names taskId "task_abc" but the required Mcp-Name header is missing'),
    );
    assert.deepEqual(
      checkStandardHeaders(message, { protocolVersion: MODERN, method, name: 'task_other' }),
      mismatch('the Mcp-Name header names "task_other" but the body names "task_abc"'),
    );
  }
});
