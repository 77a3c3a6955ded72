/**
 * JSON-RPC 2.0 as MCP uses it, for both ends: the message shapes, the one table of error codes,
 * how a server sorts what a client sent (`classify`, lenient, answering what it refuses) and what
 * a client accepts from a server (`isJsonRpcMessage`, the SDK's exact shapes). The MCP server
 * (`mcp/`) and the upstream client (`upstreams/`) both read messages here; neither knows the
 * other, and the core knows no MCP method.
 */
import { isRecord } from './json.js';

/** MCP request ids: a string or a number, never null. */
export type RequestId = string | number;

export interface JsonRpcRequest {
  jsonrpc: '2.0';
  id: RequestId;
  method: string;
  params?: Record<string, unknown>;
}

export interface JsonRpcNotification {
  jsonrpc: '2.0';
  method: string;
  params?: Record<string, unknown>;
}

export interface JsonRpcError {
  code: number;
  message: string;
  data?: unknown;
}

export interface JsonRpcResultResponse {
  jsonrpc: '2.0';
  id: RequestId;
  result: Record<string, unknown>;
}

/**
 * `id` is absent only when the request's id could not be read. JSON-RPC 2.0 sends `null` there;
 * MCP's schema (2025-11-25 on) makes the id optional and allows no null, and the SDK's message
 * schema refuses a null id, so an unreadable id is left out.
 */
export interface JsonRpcErrorResponse {
  jsonrpc: '2.0';
  id?: RequestId;
  error: JsonRpcError;
}

export type JsonRpcResponse = JsonRpcResultResponse | JsonRpcErrorResponse;

/** Any of the four kinds of message. */
export type JsonRpcMessage = JsonRpcRequest | JsonRpcNotification | JsonRpcResponse;

/** The error codes JSON-RPC 2.0 itself defines. */
export const JSON_RPC = {
  PARSE_ERROR: -32700,
  INVALID_REQUEST: -32600,
  METHOD_NOT_FOUND: -32601,
  INVALID_PARAMS: -32602,
  INTERNAL_ERROR: -32603,
} as const;

/**
 * Every JSON-RPC error code toolport sends or makes: JSON-RPC's own, and those MCP reserves
 * (`-32020` and on, from 2026-07-28). `SERVER_ERROR`, the first of JSON-RPC's
 * implementation-defined range (legacy for MCP), is never sent to a client: the upstream client
 * stands it in for an answer it refused. The gateway's own refusals take codes outside both
 * ranges (see `ErrorCatalog`).
 */
export const RpcCodes = {
  ...JSON_RPC,
  SERVER_ERROR: -32000,
  HEADER_MISMATCH: -32020,
  MISSING_REQUIRED_CLIENT_CAPABILITY: -32021,
  UNSUPPORTED_PROTOCOL_VERSION: -32022,
} as const;

/** An error response; `id` null when the request's id could not be read (then left out). */
export function errorResponse(id: RequestId | null, code: number, message: string, data?: unknown): JsonRpcErrorResponse {
  const error: JsonRpcError = { code, message };
  if (data !== undefined) error.data = data;
  return id === null ? { jsonrpc: '2.0', error } : { jsonrpc: '2.0', id, error };
}

export function resultResponse(id: RequestId, result: Record<string, unknown>): JsonRpcResultResponse {
  return { jsonrpc: '2.0', id, result };
}

/** One message a server received, sorted by what it is; `invalid` carries the answer it gets. */
export type Incoming =
  | { kind: 'request'; message: JsonRpcRequest }
  | { kind: 'notification'; message: JsonRpcNotification }
  | { kind: 'response' }
  | { kind: 'invalid'; reply: JsonRpcErrorResponse };

function isRequestId(value: unknown): value is RequestId {
  return typeof value === 'string' || (typeof value === 'number' && Number.isFinite(value));
}

/**
 * Sorts one parsed JSON value a server received. A request whose params are not an object is
 * still a request (the method answers it with invalid params); a message that is not JSON-RPC at
 * all is answered with invalid request, carrying its id when the id could be read.
 */
export function classify(value: unknown): Incoming {
  if (!isRecord(value)) return invalid(null, 'the message is not a JSON object');
  const id = value['id'];
  const readableId = isRequestId(id) ? id : null;
  if (value['jsonrpc'] !== '2.0') return invalid(readableId, 'jsonrpc must be "2.0"');
  const method = value['method'];
  if (typeof method !== 'string') {
    if (readableId !== null && ('result' in value || 'error' in value)) return { kind: 'response' };
    return invalid(readableId, 'method must be a string');
  }
  if (!('id' in value)) return { kind: 'notification', message: value as unknown as JsonRpcNotification };
  if (readableId === null) return invalid(null, 'id must be a string or a number');
  return { kind: 'request', message: value as unknown as JsonRpcRequest };
}

function invalid(id: RequestId | null, why: string): Incoming {
  return { kind: 'invalid', reply: errorResponse(id, RpcCodes.INVALID_REQUEST, `Invalid Request: ${why}`) };
}

/**
 * True for a request, a notification, a result or an error, each with no other top-level key:
 * the shapes of the MCP SDK's `JSONRPCMessageSchema` (ids integers or strings, `params` and its
 * `_meta` objects), checked by hand, for a client reading what a server sent: the SDK's Zod parse
 * cost more per call than the rest of the transport, and its protocol layer checks the message
 * again as it routes it.
 */
export function isJsonRpcMessage(value: unknown): value is JsonRpcMessage {
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

// The SDK's id: a string or an integer (a server takes any finite number, see `isRequestId`).
function isId(id: unknown): boolean {
  return typeof id === 'string' || Number.isInteger(id);
}

// The same test secure-json-parse (Fastify's body parser) makes before it looks for these keys.
const SUSPECT_PROTO =
  /"(?:_|\\u005[Ff])(?:_|\\u005[Ff])(?:p|\\u0070)(?:r|\\u0072)(?:o|\\u006[Ff])(?:t|\\u0074)(?:o|\\u006[Ff])(?:_|\\u005[Ff])(?:_|\\u005[Ff])"\s*:/;
const SUSPECT_CONSTRUCTOR =
  /"(?:c|\\u0063)(?:o|\\u006[Ff])(?:n|\\u006[Ee])(?:s|\\u0073)(?:t|\\u0074)(?:r|\\u0072)(?:u|\\u0075)(?:c|\\u0063)(?:t|\\u0074)(?:o|\\u006[Ff])(?:r|\\u0072)"\s*:/;

/**
 * Parses one message's text, as a server does. Refuses what REST refuses too: text that is not
 * JSON, and JSON that holds a `__proto__` or `constructor.prototype` key, which a careless merge
 * downstream would turn into prototype pollution. Returns the parse-error response instead of
 * throwing.
 */
export function parseIncoming(text: string): { value: unknown } | { reply: JsonRpcErrorResponse } {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { reply: errorResponse(null, RpcCodes.PARSE_ERROR, 'Parse error: the message is not valid JSON') };
  }
  if ((SUSPECT_PROTO.test(text) || SUSPECT_CONSTRUCTOR.test(text)) && holdsPoisonKey(value)) {
    return {
      reply: errorResponse(null, RpcCodes.PARSE_ERROR, 'Parse error: the message holds a __proto__ or constructor.prototype key'),
    };
  }
  return { value };
}

function holdsPoisonKey(root: unknown): boolean {
  const stack: unknown[] = [root];
  while (stack.length > 0) {
    const node = stack.pop();
    if (typeof node !== 'object' || node === null) continue;
    if (!Array.isArray(node)) {
      if (Object.hasOwn(node, '__proto__')) return true;
      const ctor = (node as Record<string, unknown>)['constructor'];
      if (Object.hasOwn(node, 'constructor') && typeof ctor === 'object' && ctor !== null && Object.hasOwn(ctor, 'prototype')) {
        return true;
      }
    }
    for (const child of Object.values(node)) stack.push(child);
  }
  return false;
}
