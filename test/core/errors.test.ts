import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ERROR_CODES, ErrorCatalog, ErrorCodes, JSON_RPC, jsonRpcCodeOf, jsonRpcError, ToolportError } from '#src/core/errors.js';

test('every code has an HTTP status and a JSON-RPC code; ErrorCodes is the status alone', () => {
  for (const code of ERROR_CODES) {
    const { status, jsonRpc } = ErrorCatalog[code];
    assert.ok(status >= 400 && status < 600, code);
    assert.ok(Number.isInteger(jsonRpc), code);
    assert.equal(ErrorCodes[code], status, code);
  }
});

test("the JSON-RPC codes: the protocol's own where they fit, else distinct application codes outside JSON-RPC's reserved range", () => {
  assert.equal(ErrorCatalog.INVALID_JSON.jsonRpc, JSON_RPC.PARSE_ERROR);
  assert.equal(ErrorCatalog.BAD_REQUEST.jsonRpc, JSON_RPC.INVALID_REQUEST);
  assert.equal(ErrorCatalog.TOOL_NOT_FOUND.jsonRpc, JSON_RPC.INVALID_PARAMS);
  assert.equal(ErrorCatalog.INVALID_INPUT.jsonRpc, JSON_RPC.INVALID_PARAMS);
  assert.equal(ErrorCatalog.INTERNAL_ERROR.jsonRpc, JSON_RPC.INTERNAL_ERROR);
  const standard = new Set<number>(Object.values(JSON_RPC));
  const serverDefined = ERROR_CODES.map((code) => ErrorCatalog[code].jsonRpc).filter((n) => !standard.has(n));
  assert.equal(new Set(serverDefined).size, serverDefined.length, 'server-defined codes are distinct');
  for (const n of serverDefined) {
    // MCP 2026-07-28: -32000..-32019 is legacy (not for new implementations), -32020..-32099 the spec's own.
    assert.ok(n < -32768 || n > -32000, `${n} is outside JSON-RPC's reserved range`);
  }
});

test('a ToolportError carries its status, JSON-RPC code and retry delay, and no headers', () => {
  const err = new ToolportError('QUEUE_FULL', 'busy', { tool: 'Bash' }, { retryAfterSeconds: 1 });
  assert.deepEqual({ status: err.statusCode, jsonRpc: err.jsonRpcCode, retry: err.retryAfterSeconds }, { status: 503, jsonRpc: -31009, retry: 1 });
  assert.equal('headers' in err, false);
  assert.deepEqual(jsonRpcError(err), { code: -31009, message: 'busy', data: { code: 'QUEUE_FULL', details: { tool: 'Bash' }, retryAfterSeconds: 1 } });
  assert.deepEqual(jsonRpcError(new ToolportError('TOOL_NOT_FOUND', 'no')), { code: -32602, message: 'no', data: { code: 'TOOL_NOT_FOUND' } });
});

test('jsonRpcCodeOf reads the code of an error body, and knows no code outside the catalog', () => {
  assert.equal(jsonRpcCodeOf('INVALID_INPUT'), -32602);
  assert.equal(jsonRpcCodeOf('RATE_LIMITED'), -31006);
  assert.equal(jsonRpcCodeOf('toString'), undefined);
  assert.equal(jsonRpcCodeOf('NOPE'), undefined);
});
