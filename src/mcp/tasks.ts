import { isFinal, type TaskSnapshot } from '../core/call-task.js';
import { TASK_NOT_FOUND_MESSAGE } from '../core/call-task-store.js';
import { isRecord } from '../core/json.js';
import { resultResponse, RpcCodes, type JsonRpcNotification, type JsonRpcRequest } from '../core/json-rpc.js';
import { isErrorBody, type McpErrorBody, type McpTaskBackend } from './backend.js';
import { callToolResult, refusal } from './call-result.js';
import type { DispatchContext, DispatchOutcome } from './dispatcher.js';
import { CLIENT_CAPABILITIES_KEY } from './era.js';
import { hasTaskUtility } from './protocol-versions.js';
import { methodError, refusalRpcCode } from './rpc-errors.js';
import type { ToolsCallDeps } from './tools-call.js';

/** The tasks extension of 2026-07-28, as clients declare it in their capabilities and the server in `server/discover`. */
export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';
/** The `_meta` key that ties a `tasks/result` to its task (2025-11-25). */
export const RELATED_TASK_KEY = 'io.modelcontextprotocol/related-task';

/** What `initialize` declares for the 2025-11-25 tasks utility: tool calls may be tasks, listed and cancelled. */
export const TASKS_CAPABILITY = { list: {}, cancel: {}, requests: { tools: { call: {} } } };

/**
 * How long a 2026-07-28 call that may become a task is waited for before it does: a call done by
 * then is answered directly (the server decides, and a quick call gains nothing from a task).
 */
export const DIRECT_ANSWER_MS = 500;

/** The methods of the tasks utility and extension. */
export const TASK_METHODS: ReadonlySet<string> = new Set(['tasks/get', 'tasks/result', 'tasks/list', 'tasks/cancel', 'tasks/update']);

/** Whether a 2026-07-28 request declares the tasks extension in its client capabilities. */
export function clientTakesTasks(meta: unknown): boolean {
  const capabilities = isRecord(meta) ? meta[CLIENT_CAPABILITIES_KEY] : undefined;
  const extensions = isRecord(capabilities) ? capabilities['extensions'] : undefined;
  return isRecord(extensions) && isRecord(extensions[TASKS_EXTENSION]);
}

/**
 * Whether a `tools/call` runs as a task: in 2025-11-25 when it carries `params.task` (any tool
 * may, as its `execution.taskSupport: "optional"` says); in 2026-07-28, where the server decides,
 * whenever the client declares the extension.
 */
export function asksForTask(params: Record<string, unknown>, version: string, modern: boolean): boolean {
  return modern ? clientTakesTasks(params['_meta']) : hasTaskUtility(version) && params['task'] !== undefined && params['task'] !== null;
}

/**
 * `tools/call` as a task: the CreateTaskResult of its revision, the refusal of a call that never
 * became one, or undefined when a 2026-07-28 call should run as an ordinary one (a task cap is
 * reached: the server decides, and a direct answer is always allowed).
 */
export async function startTask<Caller>(
  deps: ToolsCallDeps<Caller>,
  tasks: McpTaskBackend<Caller>,
  request: JsonRpcRequest,
  call: { name: string; args: Record<string, unknown>; meta: Record<string, unknown> | undefined },
  version: string,
  modern: boolean,
  context: DispatchContext<Caller>,
): Promise<DispatchOutcome | undefined> {
  const started = await tasks.start(context.caller, call.name, call.args, {
    requestId: context.requestId ?? String(request.id),
    rpcId: request.id,
    protocolVersion: version,
    meta: call.meta,
  });
  if (isErrorBody(started)) {
    if (modern && (started.error.code === 'TOO_MANY_TASKS' || started.error.code === 'TASKS_FULL')) return undefined;
    return refusal(deps, request, started, version, modern);
  }
  if (modern) {
    // The server decides: a call done within a moment is answered as a call, and its task forgotten.
    const done = await settledWithin(tasks, context.caller, started.id, DIRECT_ANSWER_MS);
    if (done !== undefined && (done.status === 'completed' || done.status === 'failed')) {
      tasks.forget(context.caller, done.id);
      if (done.status === 'failed') return refusal(deps, request, done.error as McpErrorBody, version, modern);
      const result = callToolResult(done.result!, version);
      return { reply: resultResponse(request.id, { ...result, resultType: 'complete', _meta: deps.resultMeta }), status: 200 };
    }
    return { reply: resultResponse(request.id, { resultType: 'task', ...modernTask(deps, done ?? started, version), _meta: deps.resultMeta }), status: 200 };
  }
  // Over stdio a notification may go out at any time: each change of status is told as it comes.
  const notify = context.notifyAnytime;
  if (notify !== undefined) tasks.watch(context.caller, started.id, (task) => notify(statusNotification(task)));
  const result = { task: legacyTask(started) };
  return { reply: resultResponse(request.id, result), status: 200 };
}

/**
 * `tasks/get`, `tasks/cancel`, in 2026-07-28 `tasks/update`, and in 2025-11-25 `tasks/result` and `tasks/list`; undefined for a
 * method the revision does not have (the dispatcher answers it as unknown).
 */
export async function taskMethod<Caller>(
  deps: ToolsCallDeps<Caller>,
  request: JsonRpcRequest,
  version: string,
  modern: boolean,
  context: DispatchContext<Caller>,
): Promise<DispatchOutcome | undefined> {
  const tasks = deps.backend.tasks;
  const { method } = request;
  const exists = modern ? method !== 'tasks/result' && method !== 'tasks/list' : hasTaskUtility(version) && method !== 'tasks/update';
  if (tasks === undefined || !exists) return undefined;
  const params = request.params ?? {};
  // 2026-07-28: the task methods are the extension's, for a request that declares it.
  if (modern && !clientTakesTasks(params['_meta'])) {
    return methodError(request, RpcCodes.MISSING_REQUIRED_CLIENT_CAPABILITY, 'Missing required client capability', {
      requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } },
    });
  }
  if (method === 'tasks/list') {
    // Every task of a caller fits one page (a few dozen at most, by the caps): no cursor is handed out.
    if (params['cursor'] !== undefined && params['cursor'] !== null)
      return methodError(request, RpcCodes.INVALID_PARAMS, 'Invalid params: invalid cursor (tasks/list has one page)');
    return { reply: resultResponse(request.id, { tasks: tasks.list(context.caller).map(legacyTask) }), status: 200 };
  }
  const id = params['taskId'];
  if (typeof id !== 'string') return methodError(request, RpcCodes.INVALID_PARAMS, 'Invalid params: taskId must be a string');
  const task = tasks.get(context.caller, id);
  // Unknown, forgotten and another caller's are one answer (the catalog's TASK_NOT_FOUND).
  if (task === undefined) return methodError(request, RpcCodes.INVALID_PARAMS, TASK_NOT_FOUND_MESSAGE, { code: 'TASK_NOT_FOUND' });
  const answer = (result: Record<string, unknown>): DispatchOutcome => ({ reply: resultResponse(request.id, result), status: 200 });
  switch (method) {
    case 'tasks/get':
      return answer(modern ? { resultType: 'complete', ...modernTask(deps, task, version), _meta: deps.resultMeta } : legacyTask(task));
    case 'tasks/update':
      // No task here ever waits for input (no tool asks the client for any), so every response is
      // one for a request not outstanding, which the extension says to ignore: an acknowledgement.
      return answer({ resultType: 'complete', _meta: deps.resultMeta });
    case 'tasks/cancel': {
      if (modern) {
        tasks.cancel(context.caller, id);
        return answer({ resultType: 'complete', _meta: deps.resultMeta });
      }
      // 2025-11-25: a task already final cannot be cancelled.
      const status = legacyStatus(task);
      if (status !== 'working') return methodError(request, RpcCodes.INVALID_PARAMS, `Invalid params: the task is already ${status}`, { status });
      return answer(legacyTask(tasks.cancel(context.caller, id) ?? task));
    }
    default:
      return taskResult(deps, tasks, request, task, version, context);
  }
}

/** `tasks/result` (2025-11-25): waits for the end, then answers what the call would have answered. */
async function taskResult<Caller>(
  deps: ToolsCallDeps<Caller>,
  tasks: McpTaskBackend<Caller>,
  request: JsonRpcRequest,
  task: TaskSnapshot,
  version: string,
  context: DispatchContext<Caller>,
): Promise<DispatchOutcome> {
  // A wait holds the request open: counted against the caller's bound on them.
  const release = tasks.hold(context.caller);
  if (typeof release !== 'function') return refusal(deps, request, release, version, false);
  // While it waits, the request's own stream (if the transport has one) hears the changes.
  const notify = context.notifyAnytime === undefined ? context.notify : undefined;
  const stop = notify === undefined ? undefined : tasks.watch(context.caller, task.id, (changed) => notify(statusNotification(changed)));
  let final: TaskSnapshot | undefined;
  try {
    final = await tasks.settled(context.caller, task.id, context.signal);
  } finally {
    stop?.();
    release();
  }
  // The client went away (or the server is shutting down): nothing to answer.
  if (final === undefined || !isFinal(final.status)) return { reply: undefined, status: 202 };
  const related = { [RELATED_TASK_KEY]: { taskId: final.id } };
  if (final.status === 'failed' && final.error !== undefined) return refusal(deps, request, final.error as McpErrorBody, version, false);
  const result =
    final.status === 'completed' && final.result !== undefined
      ? callToolResult(final.result, version)
      : { content: [{ type: 'text', text: 'The task was cancelled before it finished.' }], isError: true };
  return { reply: resultResponse(request.id, { ...result, _meta: related }), status: 200 };
}

/** The task once final, or as it is after `ms` (undefined once forgotten). */
async function settledWithin<Caller>(tasks: McpTaskBackend<Caller>, caller: Caller, id: string, ms: number): Promise<TaskSnapshot | undefined> {
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(), ms);
  try {
    return await tasks.settled(caller, id, deadline.signal);
  } finally {
    clearTimeout(timer);
  }
}

/** 2025-11-25 counts a tool's error result as a failed task. */
function legacyStatus(task: TaskSnapshot): string {
  return task.status === 'completed' && task.result?.isError === true ? 'failed' : task.status;
}

function statusMessage(task: TaskSnapshot): string | undefined {
  switch (task.status) {
    case 'working':
      return task.progress?.message;
    case 'failed':
      return task.error?.error.message;
    case 'cancelled':
      return 'Cancelled by the client.';
    default:
      return task.result?.isError === true ? 'The tool answered with an error result.' : undefined;
  }
}

/** A task as the 2025-11-25 utility shows it. */
function legacyTask(task: TaskSnapshot): Record<string, unknown> {
  const message = statusMessage(task);
  return {
    taskId: task.id,
    status: legacyStatus(task),
    ...(message === undefined ? {} : { statusMessage: message }),
    createdAt: new Date(task.createdAt).toISOString(),
    lastUpdatedAt: new Date(task.lastUpdatedAt).toISOString(),
    ttl: task.ttlMs,
    pollInterval: task.pollIntervalMs,
  };
}

/** A task as the 2026-07-28 extension shows it (a DetailedTask): once final, the result or the JSON-RPC error inline. */
function modernTask<Caller>(deps: ToolsCallDeps<Caller>, task: TaskSnapshot, version: string): Record<string, unknown> {
  const message = statusMessage(task);
  const shown: Record<string, unknown> = {
    taskId: task.id,
    status: task.status,
    ...(message === undefined ? {} : { statusMessage: message }),
    createdAt: new Date(task.createdAt).toISOString(),
    lastUpdatedAt: new Date(task.lastUpdatedAt).toISOString(),
    ttlMs: task.ttlMs,
    pollIntervalMs: task.pollIntervalMs,
  };
  if (task.status === 'completed' && task.result !== undefined) shown['result'] = { resultType: 'complete', ...callToolResult(task.result, version) };
  if (task.status === 'failed' && task.error !== undefined) {
    const { code, message: text, details } = task.error.error;
    shown['error'] = { code: refusalRpcCode(deps.backend.rpcCodeOf?.(code), code), message: text, data: details === undefined ? { code } : { code, details } };
  }
  return shown;
}

/** `notifications/tasks/status` (2025-11-25): the task as `tasks/get` would show it. */
function statusNotification(task: TaskSnapshot): JsonRpcNotification {
  return { jsonrpc: '2.0', method: 'notifications/tasks/status', params: legacyTask(task) };
}
