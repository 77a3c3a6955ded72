import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { NotJsonRpcError, parseMessage } from '#src/upstreams/json-rpc.js';

describe('parseMessage', () => {
  it('takes the four kinds of JSON-RPC message MCP sends', () => {
    for (const message of [
      { jsonrpc: '2.0', id: 1, method: 'ping' },
      { jsonrpc: '2.0', id: 'a', method: 'sampling/createMessage', params: { _meta: { progressToken: 1 }, messages: [] } },
      { jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 1, progress: 1 } },
      { jsonrpc: '2.0', id: 1, result: {} },
      { jsonrpc: '2.0', id: 1, error: { code: -32601, message: 'Method not found', data: { x: 1 } } },
      { jsonrpc: '2.0', error: { code: -32700, message: 'Parse error' } },
    ]) {
      assert.deepEqual(parseMessage(JSON.stringify(message)), message);
    }
  });

  it('refuses JSON of another shape, as the SDK schema does, and throws SyntaxError for what is not JSON', () => {
    for (const message of [
      [],
      'text',
      null,
      { id: 1, method: 'ping' },
      { jsonrpc: '1.0', id: 1, method: 'ping' },
      { jsonrpc: '2.0', id: 1.5, method: 'ping' },
      { jsonrpc: '2.0', id: null, error: { code: 1, message: 'm' } },
      { jsonrpc: '2.0', id: 1, method: 'ping', extra: true },
      { jsonrpc: '2.0', id: 1, method: 'ping', params: [] },
      { jsonrpc: '2.0', id: 1, method: 'ping', params: { _meta: 'x' } },
      { jsonrpc: '2.0', id: 1, result: [] },
      { jsonrpc: '2.0', result: {} },
      { jsonrpc: '2.0', id: 1, result: {}, error: { code: 1, message: 'm' } },
      { jsonrpc: '2.0', id: 1, error: { code: 1.5, message: 'm' } },
      { jsonrpc: '2.0', id: 1, error: { code: 1 } },
      { jsonrpc: '2.0', id: 1 },
    ]) {
      assert.throws(
        () => parseMessage(JSON.stringify(message)),
        { name: 'NotJsonRpcError', message: 'the message is not a JSON-RPC request, notification, result or error' },
        JSON.stringify(message),
      );
    }
    assert.throws(() => parseMessage('{"jsonrpc":'), SyntaxError);
    assert.ok(new NotJsonRpcError('x') instanceof Error);
  });
});
