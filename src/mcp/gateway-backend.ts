import type { CallTaskStore, TaskSnapshot } from '../core/call-task.js';
import { taskOwner } from '../core/call-task-store.js';
import { errorBody, jsonRpcCodeOf, ToolportError } from '../core/errors.js';
import type { Caller, Gateway } from '../core/gateway.js';
import type { McpBackend, McpServerInfo, McpTaskBackend } from './backend.js';

export interface GatewayBackendOptions {
  /** The transport label of the calls' audit lines and metrics: `mcp` over HTTP, `stdio` over stdio. */
  transport: string;
  serverInfo: McpServerInfo;
  instructions?: string;
  /** Where tool calls run as tasks; without, MCP offers no tasks. */
  tasks?: CallTaskStore | undefined;
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
    ...(options.tasks === undefined ? {} : { tasks: taskBackend(gateway, options.tasks, transport) }),
  };
}

/** The task store as the MCP layer asks it: by caller, a missing task as `undefined`, a refusal as its error body. */
function taskBackend(gateway: Gateway, store: CallTaskStore, transport: string): McpTaskBackend<Caller> {
  // Only TASK_NOT_FOUND is expected of the store's lookups; anything else is a bug and goes on up.
  const found = <T>(look: () => T): T | undefined => {
    try {
      return look();
    } catch (err) {
      if (err instanceof ToolportError && err.code === 'TASK_NOT_FOUND') return undefined;
      throw err;
    }
  };
  return {
    start: async (caller, name, args, { requestId, rpcId, protocolVersion, meta }) => {
      try {
        return await store.start({
          caller,
          tool: name,
          input: args,
          requestId,
          transport,
          ...(gateway.traced ? { mcp: { method: 'tools/call', protocolVersion: protocolVersion ?? '', rpcId: rpcId ?? null, meta } } : {}),
        });
      } catch (err) {
        if (err instanceof ToolportError) return errorBody(err.code, err.message, err.details) as ReturnType<typeof errorBody> & { isError: true };
        throw err;
      }
    },
    get: (caller, id) => found(() => store.get(taskOwner(caller), id)),
    list: (caller) => store.list(taskOwner(caller)),
    cancel: (caller, id) => found(() => store.cancel(taskOwner(caller), id)),
    forget: (caller, id) => store.forget(taskOwner(caller), id),
    settled: (caller, id, signal) => found(() => store.settled(taskOwner(caller), id, signal)) ?? Promise.resolve(undefined),
    watch: (caller, id, listener: (task: TaskSnapshot) => void) => found(() => store.watch(taskOwner(caller), id, listener)),
    hold: (caller) => {
      try {
        return store.hold(taskOwner(caller));
      } catch (err) {
        if (err instanceof ToolportError) return errorBody(err.code, err.message, err.details) as ReturnType<typeof errorBody> & { isError: true };
        throw err;
      }
    },
  };
}
