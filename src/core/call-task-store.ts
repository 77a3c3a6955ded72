import { randomBytes } from 'node:crypto';
import { CallAbort, type AbortSource } from './call-abort.js';
import { errorBody, ToolportError } from './errors.js';
import type { Caller, CallRequest, CallResult, Gateway } from './gateway.js';
import { shuttingDown } from './in-flight.js';
import {
  DEFAULT_CALL_TASK_BOUNDS,
  isFinal,
  type CallTaskBounds,
  type CallTaskStore,
  type TaskRequest,
  type TaskSnapshot,
  type TaskStatus,
} from './call-task.js';
import type { Progress } from './types.js';

/** The name a caller's tasks are kept under: its key's (or token's) label; one shared name without keys. */
export function taskOwner(caller: Caller): string {
  return caller.label ?? '';
}

/** The reason a cancelled task's call is aborted with. */
export class TaskCancelled extends Error {
  override readonly name = 'TaskCancelled';
  constructor() {
    super('The task was cancelled by its caller.');
  }
}

/** The one answer for an id that is unknown, forgotten or another caller's: never says which. */
export const TASK_NOT_FOUND_MESSAGE = 'No such task: it does not exist, was forgotten after its retention, or is not yours.';

function notFound(): ToolportError {
  return new ToolportError('TASK_NOT_FOUND', TASK_NOT_FOUND_MESSAGE);
}

interface Entry {
  readonly id: string;
  readonly owner: string;
  readonly tool: string;
  readonly abort: CallAbort;
  readonly createdAt: number;
  status: TaskStatus;
  lastUpdatedAt: number;
  progress?: Progress | undefined;
  result?: CallResult | undefined;
  error?: TaskSnapshot['error'];
  /** Whether its call still runs (a cancelled task's call may run on until it honours the signal). */
  running: boolean;
  listeners: Set<(task: TaskSnapshot) => void>;
  forget?: NodeJS.Timeout | undefined;
}

/**
 * The tasks of every caller, held in memory: a task lives on the replica that started it. Its
 * call is `gateway.call` with a signal of the task's own, so it is a call in flight like any
 * other: shutdown waits for it, then aborts it; `/metrics` counts it by tool and outcome.
 */
export class CallTasks implements CallTaskStore {
  readonly #gateway: Gateway;
  readonly #bounds: CallTaskBounds;
  readonly #tasks = new Map<string, Entry>();
  /** Working tasks per owner, and each owner's finished ones in the order they finished. */
  readonly #working = new Map<string, number>();
  readonly #finished = new Map<string, string[]>();
  /** Streams and waits each owner holds open (`hold`). */
  readonly #held = new Map<string, number>();
  #running = 0;

  constructor(gateway: Gateway, bounds: Partial<CallTaskBounds> = {}) {
    this.#gateway = gateway;
    this.#bounds = { ...DEFAULT_CALL_TASK_BOUNDS, ...bounds };
  }

  get running(): number {
    return this.#running;
  }

  get bounds(): Readonly<CallTaskBounds> {
    return this.#bounds;
  }

  async start(request: TaskRequest): Promise<TaskSnapshot> {
    const owner = taskOwner(request.caller);
    const refusal = this.#gateway.draining ? shuttingDown() : this.#capRefusal(owner);
    if (refusal !== undefined) {
      this.#gateway.refused(request, refusal);
      throw refusal;
    }
    const now = Date.now();
    const entry: Entry = {
      id: `task_${randomBytes(16).toString('base64url')}`,
      owner,
      tool: request.tool,
      abort: new CallAbort(),
      createdAt: now,
      lastUpdatedAt: now,
      status: 'working',
      running: true,
      listeners: new Set(),
    };
    // Counted before the call starts, so that starts racing each other cannot pass the caps.
    this.#running++;
    this.#working.set(owner, (this.#working.get(owner) ?? 0) + 1);
    // Field by field: an adapter's request may be a class whose fields are getters (a spread would lose them).
    const call: CallRequest = {
      caller: request.caller,
      tool: request.tool,
      input: request.input,
      requestId: request.requestId,
      transport: request.transport,
      ...(request.callId === undefined ? {} : { callId: request.callId }),
      ...(request.inputBytes === undefined ? {} : { inputBytes: request.inputBytes }),
      ...(request.mcp === undefined ? {} : { mcp: request.mcp }),
      signal: entry.abort,
      onProgress: (progress) => {
        if (entry.status !== 'working') return;
        entry.progress = progress;
        this.#changed(entry);
      },
    };
    const settled = this.#gateway.call(call).then(
      (result) => this.#finish(entry, 'completed', result),
      (err: unknown) => {
        const error = err instanceof ToolportError ? err : new ToolportError('INTERNAL_ERROR', `Internal server error (request id ${request.requestId}).`);
        return { refusal: error, accepted: this.#finish(entry, 'failed', undefined, error) };
      },
    );
    // A refusal comes before the call's first turn of the event loop (scope, lookup, validation
    // and admission are synchronous or settle in microtasks); a call still unsettled by then was
    // accepted. A refused call is answered as a refusal and never becomes a task.
    const first = await Promise.race([settled, new Promise<'pending'>((resolve) => setImmediate(resolve, 'pending'))]);
    if (typeof first === 'object' && first !== null && 'refusal' in first) throw first.refusal;
    this.#tasks.set(entry.id, entry);
    if (entry.status !== 'working') this.#retain(entry);
    return snapshot(entry, this.#bounds);
  }

  get(owner: string, id: string): TaskSnapshot {
    return snapshot(this.#entry(owner, id), this.#bounds);
  }

  list(owner: string): TaskSnapshot[] {
    const tasks: TaskSnapshot[] = [];
    for (const entry of this.#tasks.values()) if (entry.owner === owner) tasks.push(snapshot(entry, this.#bounds));
    return tasks;
  }

  cancel(owner: string, id: string): TaskSnapshot {
    const entry = this.#entry(owner, id);
    if (entry.status === 'working') {
      entry.status = 'cancelled';
      entry.progress = undefined;
      entry.lastUpdatedAt = Date.now();
      entry.abort.abort(new TaskCancelled());
      this.#retain(entry);
      this.#changed(entry);
    }
    return snapshot(entry, this.#bounds);
  }

  watch(owner: string, id: string, listener: (task: TaskSnapshot) => void): () => void {
    const entry = this.#entry(owner, id);
    if (isFinal(entry.status)) return () => {};
    entry.listeners.add(listener);
    return () => entry.listeners.delete(listener);
  }

  hold(owner: string): () => void {
    const { maxWaitsPerCaller } = this.#bounds;
    const held = this.#held.get(owner) ?? 0;
    if (held >= maxWaitsPerCaller) {
      throw new ToolportError(
        'TOO_MANY_TASKS',
        `You hold ${maxWaitsPerCaller} ${maxWaitsPerCaller === 1 ? 'stream or wait' : 'streams and waits'} on tasks open, the most you may; close one, or poll the task instead.`,
        { limit: maxWaitsPerCaller, counted: 'streams and waits' },
      );
    }
    this.#held.set(owner, held + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.#held.get(owner) ?? 1) - 1;
      if (left === 0) this.#held.delete(owner);
      else this.#held.set(owner, left);
    };
  }

  forget(owner: string, id: string): void {
    const entry = this.#tasks.get(id);
    if (entry !== undefined && entry.owner === owner && isFinal(entry.status)) this.#forget(id);
  }

  settled(owner: string, id: string, signal?: AbortSource): Promise<TaskSnapshot> {
    const entry = this.#entry(owner, id);
    if (isFinal(entry.status) || signal?.aborted === true) return Promise.resolve(snapshot(entry, this.#bounds));
    return new Promise((resolve) => {
      const onAbort = (): void => {
        stop();
        resolve(snapshot(entry, this.#bounds));
      };
      const stop = this.watch(owner, id, (task) => {
        if (!isFinal(task.status)) return;
        signal?.removeEventListener('abort', onAbort);
        resolve(task);
      });
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  endCallers(owners: readonly string[], graceMs: number): void {
    if (owners.length === 0) return;
    const end = (): void => {
      for (const entry of [...this.#tasks.values()]) {
        if (!owners.includes(entry.owner)) continue;
        if (entry.status === 'working') this.cancel(entry.owner, entry.id);
        this.#forget(entry.id);
      }
    };
    if (graceMs <= 0) return end();
    setTimeout(end, graceMs).unref();
  }

  /** The refusal for a caller at its cap or a server at its total, or undefined. */
  #capRefusal(owner: string): ToolportError | undefined {
    const { maxPerCaller, maxTotal } = this.#bounds;
    if ((this.#working.get(owner) ?? 0) >= maxPerCaller) {
      return new ToolportError(
        'TOO_MANY_TASKS',
        `You have ${maxPerCaller} tasks working, the most you may; wait for one to finish or cancel one, or call without a task.`,
        { limit: maxPerCaller },
      );
    }
    if (this.#running >= maxTotal) {
      return new ToolportError('TASKS_FULL', 'The server runs as many tasks as it takes; retry later, or call without a task.', undefined, {
        retryAfterSeconds: 5,
      });
    }
    return undefined;
  }

  #entry(owner: string, id: string): Entry {
    const entry = typeof id === 'string' ? this.#tasks.get(id) : undefined;
    if (entry === undefined || entry.owner !== owner) throw notFound();
    return entry;
  }

  /** The call ended: frees its place under the caps and, unless it was cancelled first, records how. Returns whether it was still working. */
  #finish(entry: Entry, status: TaskStatus, result: CallResult | undefined, error?: ToolportError): boolean {
    entry.running = false;
    this.#running--;
    const working = (this.#working.get(entry.owner) ?? 1) - 1;
    if (working === 0) this.#working.delete(entry.owner);
    else this.#working.set(entry.owner, working);
    if (entry.status !== 'working') return false;
    entry.status = status;
    entry.result = result;
    entry.error = error && errorBody(error.code, error.message, error.details);
    entry.progress = undefined;
    entry.lastUpdatedAt = Date.now();
    // A task refused before it was handed out is never stored.
    if (this.#tasks.has(entry.id)) this.#retain(entry);
    this.#changed(entry);
    return true;
  }

  /** Keeps a finished task for its TTL, and at most `maxKeptPerCaller` of its owner's: the oldest goes first. */
  #retain(entry: Entry): void {
    const kept = this.#finished.get(entry.owner) ?? [];
    kept.push(entry.id);
    this.#finished.set(entry.owner, kept);
    while (kept.length > this.#bounds.maxKeptPerCaller) this.#forget(kept[0]!);
    entry.forget = setTimeout(() => this.#forget(entry.id), this.#bounds.ttlMs);
    entry.forget.unref();
  }

  #forget(id: string): void {
    const entry = this.#tasks.get(id);
    if (entry === undefined) return;
    clearTimeout(entry.forget);
    this.#tasks.delete(id);
    const kept = this.#finished.get(entry.owner);
    if (kept === undefined) return;
    const at = kept.indexOf(id);
    if (at >= 0) kept.splice(at, 1);
    if (kept.length === 0) this.#finished.delete(entry.owner);
  }

  #changed(entry: Entry): void {
    if (entry.listeners.size === 0) return;
    const task = snapshot(entry, this.#bounds);
    const listeners = [...entry.listeners];
    if (isFinal(entry.status)) entry.listeners.clear();
    for (const listener of listeners) listener(task);
  }
}

function snapshot(entry: Entry, bounds: CallTaskBounds): TaskSnapshot {
  return {
    id: entry.id,
    tool: entry.tool,
    status: entry.status,
    createdAt: entry.createdAt,
    lastUpdatedAt: entry.lastUpdatedAt,
    ttlMs: bounds.ttlMs,
    pollIntervalMs: bounds.pollIntervalMs,
    ...(entry.progress === undefined ? {} : { progress: entry.progress }),
    ...(entry.result === undefined ? {} : { result: entry.result }),
    ...(entry.error === undefined ? {} : { error: entry.error }),
  };
}
