import type { JSONRPCMessage } from '@modelcontextprotocol/client';
import { isRecord } from '../core/json.js';

/** A message an upstream sent that is JSON but not a JSON-RPC 2.0 message of MCP's four kinds. */
export class NotJsonRpcError extends Error {
  override readonly name = 'NotJsonRpcError';
}

/**
 * `text` as a JSON-RPC message: a request, a notification, a result or an error, each with no
 * other top-level key (the shapes of the SDK's `JSONRPCMessageSchema`, checked by hand: its Zod
 * parse cost more per call than the rest of the transport, and the protocol layer checks the
 * message again as it routes it). Throws SyntaxError for what is not JSON, `NotJsonRpcError` for
 * JSON of another shape.
 */
export function parseMessage(text: string): JSONRPCMessage {
  return asMessage(JSON.parse(text));
}

/** `value`, parsed JSON, as a JSON-RPC message (see {@link parseMessage}); throws `NotJsonRpcError` for another shape. */
export function asMessage(value: unknown): JSONRPCMessage {
  if (!isMessage(value)) throw new NotJsonRpcError('the message is not a JSON-RPC request, notification, result or error');
  return value;
}

function isMessage(value: unknown): value is JSONRPCMessage {
  if (!isRecord(value) || value['jsonrpc'] !== '2.0') return false;
  const has = (key: string): boolean => value[key] !== undefined;
  const only = (...keys: string[]): boolean => Object.keys(value).every((key) => key === 'jsonrpc' || keys.includes(key));
  if (has('method')) {
    const params = value['params'];
    const meta = isRecord(params) ? params['_meta'] : undefined;
    const paramsOk = params === undefined || (isRecord(params) && (meta === undefined || isRecord(meta)));
    return typeof value['method'] === 'string' && paramsOk && (has('id') ? isId(value['id']) && only('id', 'method', 'params') : only('method', 'params'));
  }
  if (has('result')) return isId(value['id']) && isRecord(value['result']) && only('id', 'result');
  const error = value['error'];
  return (
    isRecord(error) &&
    Number.isInteger(error['code']) &&
    typeof error['message'] === 'string' &&
    (value['id'] === undefined || isId(value['id'])) &&
    only('id', 'error')
  );
}

function isId(id: unknown): boolean {
  return typeof id === 'string' || Number.isInteger(id);
}
