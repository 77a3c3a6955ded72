import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ERROR_CODES, ErrorCatalog, ErrorCodes, JSON_RPC, jsonRpcCodeOf, jsonRpcError, ToolportError } from '../../src/core/errors.js';

test('every code has an HTTP status and a JSON-RPC code; ErrorCodes is the status alone', () => {
  for (const code of ERROR_CODES) {
    const { status, jsonRpc } = ErrorCatalog[code];
    assert.ok(status >= 400 && status < 600, code);
    assert.ok(Number.isInteger(jsonRpc), code);
    assert.equal(ErrorCodes[code], status, code);
  }
});

test('the JSON-RPC codes: the protocol\'s own where they fit, else distinct server codes that avoid the ones MCP uses', () => {
  assert.equal(ErrorCatalog.INVALID_JSON.jsonRpc, JSON_RPC.PARSE_ERROR);
  assert.equal(ErrorCatalog.BAD_REQUEST.jsonRpc, JSON_RPC.INVALID_REQUEST);
  assert.equal(ErrorCatalog.TOOL_NOT_FOUND.jsonRpc, JSON_RPC.INVALID_PARAMS);
  assert.equal(ErrorCatalog.INVALID_INPUT.jsonRpc, JSON_RPC.INVALID_PARAMS);
  assert.equal(ErrorCatalog.INTERNAL_ERROR.jsonRpc, JSON_RPC.INTERNAL_ERROR);
  const standard = new Set<number>(Object.values(JSON_RPC));
  const serverDefined = ERROR_CODES.map((code) => ErrorCatalog[code].jsonRpc).filter((n) => !standard.has(n));
  assert.equal(new Set(serverDefined).size, serverDefined.length, 'server-defined codes are distinct');
  for (const n of serverDefined) {
    assert.ok(n <= -32000 && n >= -32099, `${n} is in the server range`);
    assert.ok(![-32000, -32001, -32002, -32042].includes(n), `${n} is not one MCP or its SDKs use`);
  }
});

test('a ToolportError carries its status, JSON-RPC code and retry delay, and no headers', () => {
  const err = new ToolportError('QUEUE_FULL', 'busy', { tool: 'Bash' }, { retryAfterSeconds: 1 });
  assert.deepEqual({ status: err.statusCode, jsonRpc: err.jsonRpcCode, retry: err.retryAfterSeconds }, { status: 503, jsonRpc: -32021, retry: 1 });
  assert.equal('headers' in err, false);
  assert.deepEqual(jsonRpcError(err), { code: -32021, message: 'busy', data: { code: 'QUEUE_FULL', details: { tool: 'Bash' }, retryAfterSeconds: 1 } });
  assert.deepEqual(jsonRpcError(new ToolportError('TOOL_NOT_FOUND', 'no')), { code: -32602, message: 'no', data: { code: 'TOOL_NOT_FOUND' } });
});

test('jsonRpcCodeOf reads the code of an error body, and knows no code outside the catalog', () => {
  assert.equal(jsonRpcCodeOf('INVALID_INPUT'), -32602);
  assert.equal(jsonRpcCodeOf('RATE_LIMITED'), -32015);
  assert.equal(jsonRpcCodeOf('toString'), undefined);
  assert.equal(jsonRpcCodeOf('NOPE'), undefined);
});
