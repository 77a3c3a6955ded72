import { jsonRpcCodeOf, ToolportError } from '../core/errors.js';
import type { Caller, Gateway } from '../core/gateway.js';
import type { McpBackend, McpServerInfo } from './backend.js';

export interface GatewayBackendOptions {
  /** The transport label of the calls' audit lines and metrics: `mcp` over HTTP, `stdio` over stdio. */
  transport: string;
  serverInfo: McpServerInfo;
  instructions?: string;
}

/**
 * The MCP layer's backend over the gateway: `tools/list` is the caller's scoped tool array (one
 * per scope, so the dispatcher formats each list once), `tools/call` is `gateway.callSafe`, which
 * applies every rule of a call (scope, lookup, validation, admission, deadline, the audit line and
 * the metric) and answers a refusal as its error body, and a refusal's JSON-RPC code is the
 * catalog's.
 */
export function gatewayBackend(gateway: Gateway, options: GatewayBackendOptions): McpBackend<Caller> {
  const { transport } = options;
  return {
    serverInfo: options.serverInfo,
    ...(options.instructions !== undefined ? { instructions: options.instructions } : {}),
    tools: (caller) => gateway.tools(caller),
    call: (caller, name, args, { requestId, signal, onProgress, extra, rpcId, protocolVersion, meta }) =>
      gateway.callSafe({
        caller,
        tool: name,
        input: args,
        requestId,
        transport,
        signal,
        ...(onProgress ? { onProgress } : {}),
        ...(extra ? { extra } : {}),
        // What the call's span records, gathered only while tracing is on.
        ...(gateway.traced ? { mcp: { method: 'tools/call', protocolVersion: protocolVersion ?? '', rpcId: rpcId ?? null, meta } } : {}),
      }),
    refused: (caller, name, message, requestId, kind) =>
      gateway.refused({ caller, tool: name, requestId, transport }, new ToolportError(kind === 'params' ? 'INVALID_INPUT' : 'BAD_REQUEST', message)),
    rpcCodeOf: jsonRpcCodeOf,
  };
}
