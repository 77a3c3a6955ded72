import type { Static } from 'typebox';
import { JSON_RPC } from './json-rpc.js';
import type { ErrorBodySchema } from './schemas.js';

// Where it was defined before the JSON-RPC module held every code; part of the package's API.
export { JSON_RPC };

/**
 * Every error a client can cause, with a fixed code, and how each transport answers it: the HTTP
 * status, and the JSON-RPC error code (for MCP). The codes JSON-RPC defines map as their meaning
 * says; the rest take application codes from -31001 to -31012, outside JSON-RPC's reserved range
 * (-32768 to -32000). MCP 2026-07-28 ("Error Codes" in basic/index) splits JSON-RPC's server
 * range: -32000 to -32019 is legacy, which new implementations should not use, and -32020 to
 * -32099 is the spec's own (-32020 HeaderMismatch, -32021 MissingRequiredClientCapability, -32022
 * UnsupportedProtocolVersion, on which a client retries with another version); codes for other
 * purposes should be allocated outside the reserved range. One handler per transport turns them
 * into responses; the body is itself a ToolResult so an agent loop can hand it to the model
 * unchanged. `summary` says in one line when a client gets the code; `npm run docs` turns the
 * catalog into the table of docs/rest-api.md.
 */
export const ErrorCatalog = {
  INVALID_JSON: { status: 400, jsonRpc: JSON_RPC.PARSE_ERROR, summary: 'The body is not valid JSON, or holds `__proto__` / `constructor.prototype` keys.' },
  INVALID_INPUT: {
    status: 400,
    jsonRpc: JSON_RPC.INVALID_PARAMS,
    summary: "The input is not an object or fails the tool's schema; the violations are listed with their JSON paths.",
  },
  INVALID_QUERY: {
    status: 400,
    jsonRpc: JSON_RPC.INVALID_PARAMS,
    summary: 'A query parameter is malformed, or does not apply (`?strict=true` with a format it does not apply to).',
  },
  BAD_REQUEST: {
    status: 400,
    jsonRpc: JSON_RPC.INVALID_REQUEST,
    summary: "The request is malformed: not valid HTTP, a malformed URL, or a body of `POST /calls` that is no provider's turn or holds too many calls.",
  },
  UNAUTHORIZED: { status: 401, jsonRpc: -31001, summary: 'No valid API key, where keys are configured; sent with `WWW-Authenticate: Bearer`.' },
  FORBIDDEN: { status: 403, jsonRpc: -31002, summary: 'The key may not use the tool, or the Host and Origin guard refuses the request.' },
  TOOL_NOT_FOUND: { status: 404, jsonRpc: JSON_RPC.INVALID_PARAMS, summary: 'No tool of that name; the message lists the available ones.' },
  ROUTE_NOT_FOUND: { status: 404, jsonRpc: JSON_RPC.METHOD_NOT_FOUND, summary: 'No route for that method and path.' },
  REQUEST_TIMEOUT: { status: 408, jsonRpc: -31003, summary: 'The headers or the body did not arrive in time; the connection closes.' },
  PAYLOAD_TOO_LARGE: { status: 413, jsonRpc: -31004, summary: 'The body is larger than `TOOLPORT_BODY_LIMIT`.' },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, jsonRpc: -31005, summary: 'The body is not JSON.' },
  RATE_LIMITED: { status: 429, jsonRpc: -31006, summary: 'The key (or client address) used its calls for the minute; sent with `Retry-After`.' },
  HEADERS_TOO_LARGE: { status: 431, jsonRpc: -31007, summary: 'The request headers are larger than the server accepts.' },
  INTERNAL_ERROR: {
    status: 500,
    jsonRpc: JSON_RPC.INTERNAL_ERROR,
    summary: 'Something unexpected in the service itself; the message carries the request id and no internals.',
  },
  SHUTTING_DOWN: { status: 503, jsonRpc: -31008, summary: 'The server is shutting down and took nothing new; retrying elsewhere is safe.' },
  QUEUE_FULL: {
    status: 503,
    jsonRpc: -31009,
    summary: "Every slot of the tool is taken and its queue, or the caller's share of it, is full; sent with `Retry-After: 1`.",
  },
  OVERLOADED: { status: 503, jsonRpc: -31010, summary: 'The server is overloaded (event-loop delay or memory); sent with `Retry-After: 5`.' },
  TASK_NOT_FOUND: {
    status: 404,
    jsonRpc: JSON_RPC.INVALID_PARAMS,
    summary: "No such task for this caller: unknown, forgotten after its retention, or another caller's (the answer never says which).",
  },
  TOO_MANY_TASKS: {
    status: 429,
    jsonRpc: -31011,
    summary:
      'The caller has as many tasks running as it may (`TOOLPORT_TASKS_PER_CALLER`), or as many event streams and `tasks/result` waits open on them (16); wait for one to end, or cancel or close one.',
  },
  TASKS_FULL: {
    status: 503,
    jsonRpc: -31012,
    summary: 'All callers together have as many tasks running as the server takes (`TOOLPORT_TASKS_MAX`); sent with `Retry-After: 5`.',
  },
} as const satisfies Record<string, { status: number; jsonRpc: number; summary: string }>;

export type ErrorCode = keyof typeof ErrorCatalog;

/** Every code, in catalog order. */
export const ERROR_CODES = Object.keys(ErrorCatalog) as ErrorCode[];

/** The HTTP status of each code (the catalog's `status`, for callers that need only that). */
export const ErrorCodes = Object.fromEntries(ERROR_CODES.map((code) => [code, ErrorCatalog[code].status])) as {
  readonly [C in ErrorCode]: (typeof ErrorCatalog)[C]['status'];
};

/** Data a refusal carries besides its message and details, for the adapter to render. */
export interface ToolportErrorOptions {
  /** When the client may retry, in seconds; the HTTP adapter sends it as `Retry-After`. */
  retryAfterSeconds?: number;
}

/**
 * An error with a catalog code; its message is safe to show to a client and to a model. It says
 * nothing about any transport's headers: an adapter renders what it carries (`retryAfterSeconds`
 * becomes `Retry-After` over HTTP).
 */
export class ToolportError extends Error {
  override readonly name = 'ToolportError';
  readonly code: ErrorCode;
  /** The HTTP status of the code. */
  readonly statusCode: number;
  /** The JSON-RPC error code of the code. */
  readonly jsonRpcCode: number;
  readonly details: unknown;
  readonly retryAfterSeconds: number | undefined;

  constructor(code: ErrorCode, message: string, details?: unknown, options: ToolportErrorOptions = {}) {
    super(message);
    this.code = code;
    this.statusCode = ErrorCatalog[code].status;
    this.jsonRpcCode = ErrorCatalog[code].jsonRpc;
    this.details = details;
    this.retryAfterSeconds = options.retryAfterSeconds;
  }
}

/** The body of every error response: a ToolResult with `isError: true`, plus a machine-readable error. */
export type ErrorBody = Static<typeof ErrorBodySchema>;

export function errorBody(code: ErrorCode, message: string, details?: unknown): ErrorBody {
  const error: ErrorBody['error'] = { code, message };
  if (details !== undefined) error.details = details;
  return { content: [{ type: 'text', text: message }], isError: true, error };
}

/**
 * A refusal as a JSON-RPC error object: the catalog's JSON-RPC code, the message, and the
 * toolport code (with the details and retry delay, when there are any) as `data`.
 */
export function jsonRpcError(err: ToolportError): {
  code: number;
  message: string;
  data: { code: ErrorCode; details?: unknown; retryAfterSeconds?: number };
} {
  const data: { code: ErrorCode; details?: unknown; retryAfterSeconds?: number } = { code: err.code };
  if (err.details !== undefined) data.details = err.details;
  if (err.retryAfterSeconds !== undefined) data.retryAfterSeconds = err.retryAfterSeconds;
  return { code: err.jsonRpcCode, message: err.message, data };
}

/** The JSON-RPC code of a catalog code read from an error body; undefined for a code not in the catalog. */
export function jsonRpcCodeOf(code: string): number | undefined {
  return Object.hasOwn(ErrorCatalog, code) ? ErrorCatalog[code as ErrorCode].jsonRpc : undefined;
}

/** Raised by `ToolRegistry.register` for a tool that breaks a registration rule. */
export class ToolRegistrationError extends Error {
  override readonly name = 'ToolRegistrationError';
  readonly tool: string;

  constructor(tool: string, rule: string) {
    super(`Cannot register tool "${tool}": ${rule}`);
    this.tool = tool;
  }
}
