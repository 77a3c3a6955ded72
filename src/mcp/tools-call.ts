import { isRecord } from '../core/json.js';
import type { AbortSource } from '../core/call-abort.js';
import type { DispatchContext, DispatchOutcome } from './dispatcher.js';
import { isErrorBody, type McpBackend } from './backend.js';
import { methodError } from './rpc-errors.js';
import { callToolResult, refusal } from './call-result.js';
import { asksForTask, startTask } from './tasks.js';
import { CancelledByClient } from './cancellable.js';
import { resultResponse, RpcCodes, type JsonRpcRequest } from '../core/json-rpc.js';
import { ProgressReporter } from './progress.js';

/** What `tools/call` needs from the dispatcher that runs it. */
export interface ToolsCallDeps<Caller> {
  backend: McpBackend<Caller>;
  /** The `_meta` of stateless-revision results (the server's identity). */
  resultMeta: Record<string, unknown>;
  progressIntervalMs: number;
}

const NEVER_ABORTED: AbortSource = { aborted: false, reason: undefined, addEventListener: () => {}, removeEventListener: () => {} };

/**
 * Longest progress token taken, in bytes (UTF-8). Every progress notification repeats the token,
 * so a long one multiplies what each report costs the server and the connection.
 */
const MAX_PROGRESS_TOKEN_BYTES = 256;

/**
 * One `tools/call`: checks the params, runs the call through the backend with a signal that
 * `notifications/cancelled` and the transport can abort and, when the client sent a progress
 * token, a progress reporter; renders the result or the refusal for the revision.
 */
export async function toolsCall<Caller>(
  deps: ToolsCallDeps<Caller>,
  request: JsonRpcRequest,
  version: string,
  modern: boolean,
  context: DispatchContext<Caller>,
): Promise<DispatchOutcome> {
  const params = request.params ?? {};
  const name = params['name'];
  const malformed = (message: string): DispatchOutcome => {
    deps.backend.refused?.(context.caller, typeof name === 'string' ? name : undefined, message, context.requestId ?? String(request.id), 'params');
    return methodError(request, RpcCodes.INVALID_PARAMS, message);
  };
  if (typeof name !== 'string') return malformed('Invalid params: name must be a string');
  const args = params['arguments'] ?? {};
  if (!isRecord(args)) return malformed('Invalid params: arguments must be an object');
  const meta = params['_meta'];
  const token = progressTokenOf(isRecord(meta) ? meta['progressToken'] : undefined);
  if (typeof token === 'object') return malformed(token.problem);

  const tasks = deps.backend.tasks;
  if (tasks !== undefined && asksForTask(params, version, modern)) {
    if (!modern && !isRecord(params['task'])) return malformed('Invalid params: task must be an object');
    const asTask = await startTask(deps, tasks, request, { name, args, meta: isRecord(meta) ? meta : undefined }, version, modern, context);
    if (asTask !== undefined) return asTask;
  }

  // A controller of its own only when cancellation by id is possible: the transport's signal is
  // handed over as it is otherwise (AbortControllers are not free on the hot path).
  const controller = context.calls?.add(request.id);
  const outer = context.signal;
  const abortFromOuter = controller && outer ? () => controller.abort(outer.reason) : undefined;
  if (abortFromOuter && outer) {
    if (outer.aborted) abortFromOuter();
    else outer.addEventListener('abort', abortFromOuter, { once: true });
  }
  const signal = controller?.signal ?? outer ?? NEVER_ABORTED;
  const progress = context.notify && token !== undefined ? new ProgressReporter(token, context.notify, deps.progressIntervalMs, signal) : undefined;

  let outcome;
  try {
    outcome = await deps.backend.call(context.caller, name, args, {
      requestId: context.requestId ?? String(request.id),
      signal,
      ...(progress ? { onProgress: progress.report } : {}),
      ...(context.extra ? { extra: true } : {}),
      rpcId: request.id,
      protocolVersion: version,
      meta: isRecord(meta) ? meta : undefined,
    });
  } catch {
    outcome = undefined;
  } finally {
    if (abortFromOuter && outer) outer.removeEventListener('abort', abortFromOuter);
    if (controller) context.calls?.delete(request.id, controller);
  }
  if (signal.aborted && signal.reason instanceof CancelledByClient) {
    // The client said it will not read the answer; the spec asks for none.
    progress?.drop();
    return { reply: undefined, status: 202 };
  }
  progress?.finish();
  if (outcome === undefined) return methodError(request, RpcCodes.INTERNAL_ERROR, 'Internal error');
  if (isErrorBody(outcome)) return refusal(deps, request, outcome, version, modern);
  const result = callToolResult(outcome, version);
  if (modern) {
    result['resultType'] = 'complete';
    result['_meta'] = deps.resultMeta;
  }
  return { reply: resultResponse(request.id, result), status: 200 };
}

/**
 * The progress token, `undefined` when there is none (`null` counts as none), or why it is
 * refused. A token is a string of at most `MAX_PROGRESS_TOKEN_BYTES`, or an integer that a JSON
 * number carries exactly, so that every notification names the very token the client sent.
 */
function progressTokenOf(token: unknown): string | number | undefined | { problem: string } {
  if (token === undefined || token === null) return undefined;
  if (typeof token === 'string') {
    const bytes = Buffer.byteLength(token);
    if (bytes <= MAX_PROGRESS_TOKEN_BYTES) return token;
    return { problem: `Invalid params: _meta.progressToken is a string of ${bytes} bytes; at most ${MAX_PROGRESS_TOKEN_BYTES} are taken` };
  }
  if (typeof token === 'number' && Number.isSafeInteger(token)) return token;
  return {
    problem: `Invalid params: _meta.progressToken must be a string of at most ${MAX_PROGRESS_TOKEN_BYTES} bytes or an integer from -(2^53 - 1) to 2^53 - 1`,
  };
}
