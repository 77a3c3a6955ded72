import type { AbortSource } from '../core/call-abort.js';
import type { TaskSnapshot } from '../core/call-task.js';
import type { ObjectSchema, Progress, ToolAnnotations, ToolResult } from '../core/types.js';

/**
 * What the MCP layer needs from the call gateway: the caller's tools, one call, and the server's
 * name. The gateway (`src/core/gateway.ts`) is one implementation; tests use a fake. `Caller` is
 * whatever the gateway takes as the caller (key label and tool scope); the MCP layer only passes
 * it through.
 */
export interface McpBackend<Caller> {
  /**
   * The tools this caller may use, in registry order. Return the same array for the same scope:
   * the formatted `tools/list` result is computed once per array and revision, and reused.
   */
  tools(caller: Caller): readonly McpToolSource[];
  /**
   * Runs one call through the gateway's whole path (scope, lookup, validation, admission,
   * deadline, audit line, metrics). Resolves with the tool's result, or with the error body of a
   * call that was refused; should not reject (a rejection is answered as an internal error).
   */
  call(caller: Caller, name: string, args: Record<string, unknown>, options: McpCallOptions): Promise<ToolResult | McpErrorBody>;
  /**
   * Hears a `tools/call` the MCP layer refused before `call`, so it gets the audit line and metric
   * of any refused call: `params` when its params are malformed, `request` when the message or
   * its batch is (an invalid envelope, an unsupported revision, a batch refused whole). `name` is
   * the tool, when it is a string.
   */
  refused?(caller: Caller, name: string | undefined, message: string, requestId: string, kind: 'params' | 'request'): void;
  /** `serverInfo` in `initialize`, and `io.modelcontextprotocol/serverInfo` in modern results. */
  readonly serverInfo: McpServerInfo;
  /** Guidance for the model about the server as a whole, sent by `initialize` and `server/discover`. */
  readonly instructions?: string;
  /**
   * The JSON-RPC code a refused call is answered with, by the error's catalog code; `undefined`
   * falls back to the MCP layer's own table (`errors.ts`). Wire the gateway's catalog here.
   */
  rpcCodeOf?(code: string): number | undefined;
  /**
   * Tool calls run as tasks (MCP's tasks: the `tasks` capability of 2025-11-25, the
   * `io.modelcontextprotocol/tasks` extension of 2026-07-28). Without it, no task is offered.
   */
  readonly tasks?: McpTaskBackend<Caller> | undefined;
}

/**
 * The caller's tasks, as the gateway's task store (`CallTaskStore`) keeps them. A task of another
 * caller is `undefined`, exactly as an unknown one.
 */
export interface McpTaskBackend<Caller> {
  /** Starts the call as a task: its first snapshot, or the error body of a refused call (a cap included), which never became a task. */
  start(
    caller: Caller,
    name: string,
    args: Record<string, unknown>,
    options: Omit<McpCallOptions, 'signal' | 'onProgress' | 'extra'>,
  ): Promise<TaskSnapshot | McpErrorBody>;
  get(caller: Caller, id: string): TaskSnapshot | undefined;
  list(caller: Caller): TaskSnapshot[];
  cancel(caller: Caller, id: string): TaskSnapshot | undefined;
  /** Forgets a finished task (its result was answered directly). */
  forget(caller: Caller, id: string): void;
  /** The task once final, or as it is when `signal` aborts first. */
  settled(caller: Caller, id: string, signal?: AbortSource): Promise<TaskSnapshot | undefined>;
  /** Hears each new snapshot until the task is final; returns what stops it (undefined: no such task). */
  watch(caller: Caller, id: string, listener: (task: TaskSnapshot) => void): (() => void) | undefined;
  /** Counts a wait the caller holds open (`tasks/result`): its release, or the error body when the caller holds as many as it may. */
  hold(caller: Caller): (() => void) | McpErrorBody;
}

/** The fields of a tool definition MCP publishes. `ToolDef` fits. */
export interface McpToolSource {
  name: string;
  description: string;
  inputSchema: ObjectSchema;
  annotations?: ToolAnnotations;
  /** A display name; falls back to `annotations.title`. */
  title?: string;
  /** JSON Schema of the tool's `structuredContent`, when it returns any. */
  outputSchema?: ObjectSchema;
}

export interface McpServerInfo {
  name: string;
  version: string;
  title?: string;
}

export interface McpCallOptions {
  /** The id to log the call with: the transport's request id, or the JSON-RPC id. */
  requestId: string;
  /** Aborts on `notifications/cancelled`, a closed connection or shutdown (an AbortSignal, or a cheaper `CallAbort`). */
  signal: AbortSource;
  /**
   * Present when the client asked for progress (`_meta.progressToken`). Reports come as the
   * gateway gives them (`Progress`: `progress` grows with each one); the MCP layer bounds the rate.
   */
  onProgress?: (progress: Progress) => void;
  /** A call after the first of a batch, which the transport's per-request rate limit did not count. */
  extra?: boolean;
  /** The JSON-RPC id, the revision and the `_meta` of the request: what a call's span records, and the trace context it continues. */
  rpcId?: string | number | null;
  protocolVersion?: string;
  meta?: Record<string, unknown> | undefined;
}

/**
 * The error body of a refused call, as the gateway's `callSafe` returns it: itself a ToolResult
 * with `isError: true`, plus the catalog code. Declared by shape so the two sides can change
 * independently.
 */
export interface McpErrorBody {
  content: readonly { type: 'text'; text: string }[];
  isError: true;
  error: { code: string; message: string; details?: unknown };
}

export function isErrorBody(value: ToolResult | TaskSnapshot | McpErrorBody): value is McpErrorBody {
  const error = (value as { error?: { code?: unknown } }).error;
  return (value as { isError?: unknown }).isError === true && typeof error === 'object' && error !== null && typeof error.code === 'string';
}
