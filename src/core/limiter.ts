import type { AbortSource } from './call-abort.js';
import { ToolportError } from './errors.js';

/** Most calls of one tool that run at once when the server sets no cap of its own. */
export const DEFAULT_MAX_CONCURRENCY = 16;
/** Most calls of one tool that may wait for a slot when the server sets no size of its own. */
export const DEFAULT_QUEUE_SIZE = 64;

/** A caller's share of a tool's slots when the server sets none: half of them, rounded up. */
export function defaultShareOfSlots(limit: number): number {
  return Math.ceil(limit / 2);
}

/** A caller's share of a tool's queue when the server sets none: a quarter of it, rounded up. */
export function defaultShareOfQueue(queueSize: number): number {
  return Math.ceil(queueSize / 4);
}

export interface LimiterOptions {
  /** The tool, for the QUEUE_FULL message. */
  tool: string;
  /** What the QUEUE_FULL message calls it; default `Tool "<tool>"`. */
  label?: string;
  /** Most calls that run at once; a positive integer. */
  limit: number;
  /** Most calls that wait for a slot; 0 refuses a call at once when every slot is taken. */
  queueSize: number;
  /** Most calls of one named caller that run at once (at most `limit`); default: `limit`, no share. */
  limitPerCaller?: number;
  /** Most calls of one named caller that wait (at most `queueSize`); default: `queueSize`, no share. */
  queuePerCaller?: number;
  /** Told the new counts whenever a call takes or gives back a slot, or joins or leaves the queue. */
  onChange?: (running: number, waiting: number) => void;
}

/** One caller's calls of the tool: those holding a slot, and those waiting for one in arrival order. */
interface Share {
  readonly caller: string | undefined;
  running: number;
  // A Set keeps insertion order and deletes in O(1): FIFO with cheap removal of aborted waiters.
  readonly waiting: Set<() => void>;
}

/**
 * Admission for one tool, fair between callers. At most `limit` calls run at once and at most
 * `queueSize` more wait; a named caller (an API key, a token subject, a client address) holds at
 * most `limitPerCaller` of the slots and `queuePerCaller` of the queue, so one caller that floods
 * the tool leaves slots and queue room to the others. A freed slot goes to the waiting caller with
 * the fewest calls running, callers taking turns among equals (round-robin), each caller's own
 * calls in arrival order. Calls without a caller share the
 * tool's limits only (in-process callers, stdio: one client). A waiting call whose signal aborts
 * leaves the queue at once.
 */
export class ConcurrencyLimiter {
  readonly tool: string;
  readonly #label: string;
  readonly limit: number;
  readonly queueSize: number;
  readonly limitPerCaller: number;
  readonly queuePerCaller: number;
  readonly #onChange: ((running: number, waiting: number) => void) | undefined;
  #running = 0;
  #waiting = 0;
  readonly #shares = new Map<string | undefined, Share>();
  /** The shares with calls waiting, in the order they get their next turn among equals. */
  readonly #turns = new Set<Share>();

  constructor(options: LimiterOptions) {
    if (!(Number.isInteger(options.limit) && options.limit > 0)) throw new RangeError(`limit must be a positive integer, got ${options.limit}`);
    if (!(Number.isInteger(options.queueSize) && options.queueSize >= 0)) {
      throw new RangeError(`queueSize must be a non-negative integer, got ${options.queueSize}`);
    }
    const limitPerCaller = options.limitPerCaller ?? options.limit;
    const queuePerCaller = options.queuePerCaller ?? options.queueSize;
    if (!(Number.isInteger(limitPerCaller) && limitPerCaller > 0)) throw new RangeError(`limitPerCaller must be a positive integer, got ${limitPerCaller}`);
    if (!(Number.isInteger(queuePerCaller) && queuePerCaller >= 0))
      throw new RangeError(`queuePerCaller must be a non-negative integer, got ${queuePerCaller}`);
    this.tool = options.tool;
    this.#label = options.label ?? `Tool "${options.tool}"`;
    this.limit = options.limit;
    this.queueSize = options.queueSize;
    this.limitPerCaller = Math.min(limitPerCaller, this.limit);
    this.queuePerCaller = Math.min(queuePerCaller, this.queueSize);
    this.#onChange = options.onChange;
  }

  /** Calls holding a slot. */
  get running(): number {
    return this.#running;
  }

  /** Calls waiting for a slot. */
  get waiting(): number {
    return this.#waiting;
  }

  /** How many calls of one caller hold a slot and wait for one. */
  loadOf(caller: string | undefined): { running: number; waiting: number } {
    const share = this.#shares.get(caller);
    return { running: share?.running ?? 0, waiting: share?.waiting.size ?? 0 };
  }

  /**
   * Takes a slot for `caller`: `true` at once when one is free within the caller's share;
   * otherwise a promise that resolves to `true` when its turn comes, or to `false` when `signal`
   * aborts first (the call has then left the queue and holds nothing). Throws `QUEUE_FULL` when
   * the whole queue or the caller's share of it is full. Whoever gets `true` must call
   * `release(caller)` exactly once, with the same caller.
   */
  acquire(signal?: AbortSource, caller?: string): true | Promise<boolean> {
    const share = this.#shares.get(caller) ?? this.#newShare(caller);
    // Every release hands free slots to the waiters that may take them, so a caller that may run
    // now has nobody of its own waiting, and nobody else is owed this slot.
    if (this.#running < this.limit && share.running < this.#capOf(share)) {
      this.#running++;
      share.running++;
      this.#onChange?.(this.#running, this.#waiting);
      return true;
    }
    if (signal?.aborted) {
      this.#forgetIfIdle(share);
      return Promise.resolve(false);
    }
    if (this.#waiting >= this.queueSize) {
      this.#forgetIfIdle(share);
      throw this.#queueFull();
    }
    if (share.caller !== undefined && share.waiting.size >= this.queuePerCaller) {
      this.#forgetIfIdle(share);
      throw this.#callerQueueFull(share);
    }
    return new Promise<boolean>((resolve) => {
      const admit = (): void => {
        signal?.removeEventListener('abort', leave);
        resolve(true);
      };
      const leave = (): void => {
        share.waiting.delete(admit);
        this.#waiting--;
        if (share.waiting.size === 0) this.#turns.delete(share);
        this.#forgetIfIdle(share);
        this.#onChange?.(this.#running, this.#waiting);
        resolve(false);
      };
      share.waiting.add(admit);
      this.#waiting++;
      this.#turns.add(share);
      signal?.addEventListener('abort', leave, { once: true });
      this.#onChange?.(this.#running, this.#waiting);
    });
  }

  /** Gives back a slot `caller` holds; waiting calls that may now run get slots, callers taking turns. */
  release(caller?: string): void {
    const share = this.#shares.get(caller);
    if (share === undefined || share.running === 0) throw new Error(`release() of tool "${this.tool}" for a caller that holds no slot`);
    share.running--;
    this.#running--;
    this.#admitWaiters();
    this.#forgetIfIdle(share);
    this.#onChange?.(this.#running, this.#waiting);
  }

  /** Hands free slots to waiting calls, skipping callers at their share. */
  #admitWaiters(): void {
    while (this.#running < this.limit) {
      // The caller with the fewest calls running goes first; among equals, the one whose turn it is.
      let next: Share | undefined;
      for (const share of this.#turns) {
        if (share.running < this.#capOf(share) && (next === undefined || share.running < next.running)) {
          next = share;
          if (share.running === 0) break;
        }
      }
      if (next === undefined) return;
      const admit = next.waiting.values().next().value!;
      next.waiting.delete(admit);
      this.#waiting--;
      next.running++;
      this.#running++;
      // To the back of the line: the other callers waiting go first next time.
      this.#turns.delete(next);
      if (next.waiting.size > 0) this.#turns.add(next);
      admit();
    }
  }

  #capOf(share: Share): number {
    return share.caller === undefined ? this.limit : this.limitPerCaller;
  }

  #newShare(caller: string | undefined): Share {
    const share: Share = { caller, running: 0, waiting: new Set() };
    this.#shares.set(caller, share);
    return share;
  }

  #forgetIfIdle(share: Share): void {
    if (share.running === 0 && share.waiting.size === 0) this.#shares.delete(share.caller);
  }

  #queueFull(): ToolportError {
    const running = this.#running;
    const waiting = this.#waiting;
    return new ToolportError(
      'QUEUE_FULL',
      `${this.#label} is busy: ${running} ${running === 1 ? 'call' : 'calls'} running and ${waiting} waiting; retry later.`,
      { tool: this.tool, running, waiting, maxConcurrency: this.limit, queueSize: this.queueSize },
      { retryAfterSeconds: 1 },
    );
  }

  #callerQueueFull(share: Share): ToolportError {
    const { running } = share;
    const waiting = share.waiting.size;
    return new ToolportError(
      'QUEUE_FULL',
      `${this.#label} is busy with this caller's calls: ${running} running and ${waiting} waiting, ` +
        `the most one caller may have (${this.limitPerCaller} running, ${this.queuePerCaller} waiting); retry later.`,
      { tool: this.tool, running, waiting, maxConcurrencyPerCaller: this.limitPerCaller, queuePerCaller: this.queuePerCaller },
      { retryAfterSeconds: 1 },
    );
  }
}
