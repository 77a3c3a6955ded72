/**
 * Encoding the server's JSON-RPC messages, with results that do not change serialised once. The
 * messages themselves, their codes and their parsing are the core's (core/json-rpc.ts), shared
 * with the upstream client.
 */
import type { JsonRpcNotification, JsonRpcResponse } from '../core/json-rpc.js';

const encodedResults = new WeakMap<object, string>();

/**
 * Serialises a result once, for results that do not change (tool lists, discovery): `encode`
 * then splices the stored text instead of serialising the object again. The object must not be
 * changed afterwards.
 */
export function encodeOnce<T extends Record<string, unknown>>(result: T): T {
  encodedResults.set(result, JSON.stringify(result));
  return result;
}

/** One message as JSON text (no newline), reusing the text `encodeOnce` stored for its result. */
export function encode(message: JsonRpcResponse | JsonRpcNotification): string {
  if ('result' in message) {
    const stored = encodedResults.get(message.result);
    if (stored !== undefined) return `{"jsonrpc":"2.0","id":${JSON.stringify(message.id)},"result":${stored}}`;
  }
  return JSON.stringify(message);
}
