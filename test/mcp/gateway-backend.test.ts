import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ANYONE, Gateway } from '#src/core/gateway.js';
import { ToolRegistry } from '#src/core/registry.js';
import { textResult } from '#src/core/result.js';
import type { ToolDef } from '#src/core/types.js';
import { McpDispatcher } from '#src/mcp/dispatcher.js';
import { gatewayBackend } from '#src/mcp/gateway-backend.js';
import type { JsonRpcNotification } from '#src/core/json-rpc.js';

const Backwards: ToolDef = {
  name: 'Backwards',
  description: 'Reports progress that goes back, stands still, then a message alone.',
  inputSchema: { type: 'object' },
  execute: (_input, { progress }) => {
    progress?.({ progress: 3, total: 10 });
    progress?.({ progress: 2, message: 'going back' });
    progress?.({ progress: 3, message: 'standing still' });
    progress?.('a message alone is one step on');
    return textResult('done');
  },
};

test('over MCP, progress that does not grow never becomes a notification: the gateway drops it, the MCP layer sends the rest', async () => {
  const registry = new ToolRegistry();
  registry.register(Backwards);
  const backend = gatewayBackend(new Gateway({ registry }), { transport: 'mcp', serverInfo: { name: 'toolport', version: '0.1.0' } });
  const sent: JsonRpcNotification[] = [];
  const message = { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'Backwards', _meta: { progressToken: 'p' } } };
  const outcome = await new McpDispatcher(backend, { progressIntervalMs: 0 }).handle(message, { caller: ANYONE, notify: (n) => sent.push(n) });
  assert.equal(outcome.status, 200);
  assert.deepEqual(
    sent.map((n) => n.params),
    [
      { progressToken: 'p', progress: 3, total: 10 },
      { progressToken: 'p', progress: 4, message: 'a message alone is one step on' },
    ],
  );
});
