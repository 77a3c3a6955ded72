import type { AbortSource } from './call-abort.js';
import type { ErrorBody } from './errors.js';
import type { CallRequest, CallResult } from './gateway.js';
import type { Progress } from './types.js';

/**
 * A task: one tool call run detached from the request that started it. It goes through the same
 * pipeline as any call (scope, validation, admission, deadline, abort signal, audit line,
 * metrics); the task only outlives the request, keeps the result, and answers who asks for it by
 * id. The adapters (REST's `Prefer: respond-async`, MCP's tasks) know it only through this contract.
 */

/**
 * Where a task is: `working` until the call answers; `completed` once the tool answered (its
 * result, `isError` or not); `failed` when the pipeline refused or lost the call after it was
 * accepted (its error body: the queue was full, the server shut down); `cancelled` once the
 * caller cancelled it, whatever the call then did. The last three are final.
 */
export type TaskStatus = 'working' | 'completed' | 'failed' | 'cancelled';

export const TASK_STATUSES: readonly TaskStatus[] = ['working', 'completed', 'failed', 'cancelled'];

/** A task as its caller sees it at one moment. Never changed once handed out. */
export interface TaskSnapshot {
  /** Unguessable (128 random bits), unique in the process. */
  readonly id: string;
  readonly tool: string;
  readonly status: TaskStatus;
  /** Epoch milliseconds. */
  readonly createdAt: number;
  /** Epoch milliseconds of the last change of status or progress. */
  readonly lastUpdatedAt: number;
  /** Milliseconds the task is kept after it ends, from its end (from now while it runs). */
  readonly ttlMs: number;
  /** How often a client should ask, in milliseconds. */
  readonly pollIntervalMs: number;
  /** The last progress the tool reported, while it runs. */
  readonly progress?: Progress | undefined;
  /** `completed`: what the tool answered. */
  readonly result?: CallResult | undefined;
  /** `failed`: the refusal's error body. */
  readonly error?: ErrorBody | undefined;
}

/** The bounds on tasks (TOOLPORT_TASKS_*). */
export interface CallTaskBounds {
  /** Tasks one caller may have working at once. */
  maxPerCaller: number;
  /** Tasks all callers together may have working at once. */
  maxTotal: number;
  /** Finished tasks (and their results) kept per caller; the oldest is forgotten first. */
  maxKeptPerCaller: number;
  /** Milliseconds a finished task is kept before it is forgotten. */
  ttlMs: number;
  /** What clients are told about how often to ask, in milliseconds. */
  pollIntervalMs: number;
  /** Event streams and waits (`GET /tasks/{id}` as events, MCP's `tasks/result`) one caller may hold open at once: each keeps a connection. */
  maxWaitsPerCaller: number;
}

/** A few slow calls per caller, and an hour to come back for their results. */
export const DEFAULT_CALL_TASK_BOUNDS: Readonly<CallTaskBounds> = {
  maxPerCaller: 8,
  maxTotal: 256,
  maxKeptPerCaller: 32,
  ttlMs: 3_600_000,
  pollIntervalMs: 1_000,
  maxWaitsPerCaller: 16,
};

/** What a task's request carries: a call, less what the task provides itself (its abort signal). */
export type TaskRequest = Omit<CallRequest, 'signal' | 'onProgress' | 'extra'>;

/**
 * The tasks of every caller. Each method takes the caller's owner name (`taskOwner`): a task of
 * another owner, an unknown id and a forgotten task are all the same `TASK_NOT_FOUND`.
 */
export interface CallTaskStore {
  /**
   * Starts the call as a task. Rejects with the call's refusal (`ToolportError`: scope, unknown
   * tool, invalid input, a full queue) exactly as a direct call would, so a refused call never
   * becomes a task; with `TOO_MANY_TASKS` or `TASKS_FULL` at a cap (no call is made then).
   */
  start(request: TaskRequest): Promise<TaskSnapshot>;
  /** The task now; throws `TASK_NOT_FOUND`. */
  get(owner: string, id: string): TaskSnapshot;
  /** The owner's tasks, oldest first. */
  list(owner: string): TaskSnapshot[];
  /** Cancels a working task through its call's abort signal (nothing for a finished one); throws `TASK_NOT_FOUND`. */
  cancel(owner: string, id: string): TaskSnapshot;
  /**
   * Calls `listener` with each new snapshot (status or progress) until the task is final (the
   * final snapshot included); returns what stops listening. Throws `TASK_NOT_FOUND`.
   */
  watch(owner: string, id: string, listener: (task: TaskSnapshot) => void): () => void;
  /** Forgets a finished task at once (one its caller got the result of another way); nothing for a working one. */
  forget(owner: string, id: string): void;
  /**
   * Counts one stream or wait the owner holds open on its tasks until the returned release is
   * called (more than once is once); throws `TOO_MANY_TASKS` when the owner holds
   * `maxWaitsPerCaller` already, so that no caller keeps the server's connections to itself.
   */
  hold(owner: string): () => void;
  /** Resolves with the task once final, or with its snapshot when `signal` aborts first. Throws `TASK_NOT_FOUND`. */
  settled(owner: string, id: string, signal?: AbortSource): Promise<TaskSnapshot>;
  /**
   * For the callers a key reload removed: their working tasks are cancelled after `graceMs` (as
   * their calls in flight would have run on), and every task of theirs is forgotten then, so a
   * later key given the same label never reads them.
   */
  endCallers(owners: readonly string[], graceMs: number): void;
  /** Tasks working now, of every caller. */
  readonly running: number;
}

/** Whether a status is final. */
export function isFinal(status: TaskStatus): boolean {
  return status !== 'working';
}
