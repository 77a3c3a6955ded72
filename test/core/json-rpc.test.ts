import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { JSON_RPC as CATALOG_JSON_RPC } from '#src/core/errors.js';
import { classify, errorResponse, isJsonRpcMessage, JSON_RPC, parseIncoming, RpcCodes } from '#src/core/json-rpc.js';

test('one table holds every code: JSON-RPC 2.0 own codes, and those MCP reserves', () => {
  assert.equal(CATALOG_JSON_RPC, JSON_RPC);
  for (const [name, code] of Object.entries(JSON_RPC)) assert.equal(RpcCodes[name as keyof typeof JSON_RPC], code);
  assert.deepEqual([RpcCodes.HEADER_MISMATCH, RpcCodes.MISSING_REQUIRED_CLIENT_CAPABILITY, RpcCodes.UNSUPPORTED_PROTOCOL_VERSION], [-32020, -32021, -32022]);
});

describe('classify (a server reading what a client sent)', () => {
  test('sorts requests, notifications and responses', () => {
    assert.equal(classify({ jsonrpc: '2.0', id: 1.5, method: 'ping', params: [] }).kind, 'request');
    assert.equal(classify({ jsonrpc: '2.0', method: 'notifications/initialized' }).kind, 'notification');
    assert.deepEqual(classify({ jsonrpc: '2.0', id: 'a', result: {} }), { kind: 'response' });
  });

  test('answers what is not JSON-RPC with invalid request, carrying the id it could read', () => {
    const reply = (value: unknown) => {
      const sorted = classify(value);
      assert.equal(sorted.kind, 'invalid');
      return sorted.kind === 'invalid' ? sorted.reply : undefined;
    };
    assert.deepEqual(reply([]), errorResponse(null, -32600, 'Invalid Request: the message is not a JSON object'));
    assert.deepEqual(reply({ jsonrpc: '1.0', id: 7, method: 'ping' }), errorResponse(7, -32600, 'Invalid Request: jsonrpc must be "2.0"'));
    assert.deepEqual(reply({ jsonrpc: '2.0', id: 7 }), errorResponse(7, -32600, 'Invalid Request: method must be a string'));
    assert.deepEqual(reply({ jsonrpc: '2.0', id: null, method: 'ping' }), {
      jsonrpc: '2.0',
      error: { code: -32600, message: 'Invalid Request: id must be a string or a number' },
    });
  });
});

test('parseIncoming refuses text that is not JSON and JSON holding a __proto__ key, with a parse error', () => {
  assert.deepEqual(parseIncoming('{"jsonrpc":"2.0"}'), { value: { jsonrpc: '2.0' } });
  assert.deepEqual(parseIncoming('{'), { reply: errorResponse(null, -32700, 'Parse error: the message is not valid JSON') });
  assert.deepEqual(parseIncoming('{"a":{"__proto__":{}}}'), {
    reply: errorResponse(null, -32700, 'Parse error: the message holds a __proto__ or constructor.prototype key'),
  });
});

test('isJsonRpcMessage (a client reading what a server sent) takes only the SDK exact shapes', () => {
  assert.equal(isJsonRpcMessage({ jsonrpc: '2.0', id: 1, error: { code: -32601, message: 'Method not found' } }), true);
  assert.equal(isJsonRpcMessage({ jsonrpc: '2.0', id: 1.5, method: 'ping' }), false);
  assert.equal(isJsonRpcMessage({ jsonrpc: '2.0', id: 1, method: 'ping', params: [] }), false);
});
