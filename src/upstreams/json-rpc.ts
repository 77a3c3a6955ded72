import type { JSONRPCMessage } from '@modelcontextprotocol/client';
import { isJsonRpcMessage } from '../core/json-rpc.js';

/** A message an upstream sent that is JSON but not a JSON-RPC 2.0 message of MCP's four kinds. */
export class NotJsonRpcError extends Error {
  override readonly name = 'NotJsonRpcError';
}

/**
 * `text` as a JSON-RPC message: a request, a notification, a result or an error, each with no
 * other top-level key (see `isJsonRpcMessage`). Throws SyntaxError for what is not JSON,
 * `NotJsonRpcError` for JSON of another shape.
 */
export function parseMessage(text: string): JSONRPCMessage {
  return asMessage(JSON.parse(text));
}

/** `value`, parsed JSON, as a JSON-RPC message (see {@link parseMessage}); throws `NotJsonRpcError` for another shape. */
export function asMessage(value: unknown): JSONRPCMessage {
  if (!isJsonRpcMessage(value)) throw new NotJsonRpcError('the message is not a JSON-RPC request, notification, result or error');
  // The shapes the SDK's schema takes; its type spells out `_meta`, which the check leaves open.
  return value as JSONRPCMessage;
}
