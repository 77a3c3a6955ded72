import type { DispatchOutcome } from './dispatcher.js';
import { errorResponse, RpcCodes, type JsonRpcRequest } from '../core/json-rpc.js';

/**
 * How a refused call is answered over MCP, by the gateway's catalog code, until the gateway's
 * catalog says it itself (`McpBackend.rpcCodeOf`). The tools pages of every revision make an
 * unknown tool a protocol error, -32602; a tool outside the caller's scope is not in that
 * caller's `tools/list`, so to the client it is unknown too. Input that fails the schema is
 * -32602 up to 2025-06-18 and a tool error result from 2025-11-25 (the dispatcher decides that
 * per revision). What the service refuses for its own reasons (rate limit, full queue, overload,
 * shutdown) is a server error: -32603, with the catalog code in `data` so clients and tests can
 * tell them apart. Codes in -32000..-32099 are avoided: 2026-07-28 reserves -32020 and up for the
 * spec and tells new implementations not to use the legacy range below it.
 */
const DEFAULT_RPC_CODES: Readonly<Record<string, number>> = {
  TOOL_NOT_FOUND: RpcCodes.INVALID_PARAMS,
  FORBIDDEN: RpcCodes.INVALID_PARAMS,
  INVALID_INPUT: RpcCodes.INVALID_PARAMS,
  INVALID_JSON: RpcCodes.INVALID_PARAMS,
  INVALID_QUERY: RpcCodes.INVALID_PARAMS,
  BAD_REQUEST: RpcCodes.INVALID_PARAMS,
};

function defaultRpcCode(code: string): number {
  return Object.hasOwn(DEFAULT_RPC_CODES, code) ? DEFAULT_RPC_CODES[code]! : RpcCodes.INTERNAL_ERROR;
}

/**
 * The code a refused call may be answered with. 2026-07-28 reserves -32020 to -32099 for codes
 * the spec defines, and they mean things no refusal means (-32022: "use another protocol
 * version", on which a client retries with another revision); -32000 to -32019 is the legacy
 * range, which new implementations should not use and receivers must not read meaning into.
 * Such a code, or one that is not an integer, becomes -32603 here, whatever the catalog says
 * (the gateway's catalog uses codes outside both).
 */
export function refusalRpcCode(mapped: number | undefined, code: string): number {
  const rpcCode = mapped ?? defaultRpcCode(code);
  if (!Number.isInteger(rpcCode) || (rpcCode <= -32000 && rpcCode >= -32099)) return RpcCodes.INTERNAL_ERROR;
  return rpcCode;
}

/**
 * The HTTP status a Streamable HTTP transport answers an error with, by where it came from.
 * Errors the dispatcher raises before a method runs (the spec's "server validation") have fixed
 * statuses; -32601 is 404 only for the stateless revisions (2026-07-28 requires it, earlier ones
 * answered it in a 200). Errors a method answers (unknown tool, a refused call) stay in a 200.
 */
export function httpStatusOf(code: number, before: 'before-method' | 'in-method', modern: boolean): number {
  if (before === 'in-method') return code === RpcCodes.MISSING_REQUIRED_CLIENT_CAPABILITY ? 400 : 200;
  if (code === RpcCodes.METHOD_NOT_FOUND) return modern ? 404 : 200;
  return 400;
}

/** An error a method answers (unknown tool, bad params, a refused call): in a 200 on HTTP. */
export function methodError(request: JsonRpcRequest, code: number, message: string, data?: unknown): DispatchOutcome {
  return { reply: errorResponse(request.id, code, message, data), status: httpStatusOf(code, 'in-method', false) };
}
