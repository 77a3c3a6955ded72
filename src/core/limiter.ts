import type { AbortSource } from './call-abort.js';
import { ToolportError } from './errors.js';

/** Most calls of one tool that run at once when the server sets no cap of its own. */
export const DEFAULT_MAX_CONCURRENCY = 16;
/** Most calls of one tool that may wait for a slot when the server sets no size of its own. */
export const DEFAULT_QUEUE_SIZE = 64;

export interface LimiterOptions {
  /** The tool, for the QUEUE_FULL message. */
  tool: string;
  /** Most calls that run at once; a positive integer. */
  limit: number;
  /** Most calls that wait for a slot; 0 refuses a call at once when every slot is taken. */
  queueSize: number;
  /** Told the new counts whenever a call takes or gives back a slot, or joins or leaves the queue. */
  onChange?: (running: number, waiting: number) => void;
}

/**
 * Admission for one tool: at most `limit` calls run at once, at most `queueSize` more wait for a
 * slot in arrival order, and the rest are refused at once with `QUEUE_FULL`. A waiting call whose
 * signal aborts leaves the queue at once. Every operation is O(1).
 */
export class ConcurrencyLimiter {
  readonly tool: string;
  readonly limit: number;
  readonly queueSize: number;
  readonly #onChange: ((running: number, waiting: number) => void) | undefined;
  #running = 0;
  // A Set keeps insertion order and deletes in O(1): FIFO with cheap removal of aborted waiters.
  readonly #waiting = new Set<() => void>();

  constructor(options: LimiterOptions) {
    if (!(Number.isInteger(options.limit) && options.limit > 0)) throw new RangeError(`limit must be a positive integer, got ${options.limit}`);
    if (!(Number.isInteger(options.queueSize) && options.queueSize >= 0)) {
      throw new RangeError(`queueSize must be a non-negative integer, got ${options.queueSize}`);
    }
    this.tool = options.tool;
    this.limit = options.limit;
    this.queueSize = options.queueSize;
    this.#onChange = options.onChange;
  }

  /** Calls holding a slot. */
  get running(): number {
    return this.#running;
  }

  /** Calls waiting for a slot. */
  get waiting(): number {
    return this.#waiting.size;
  }

  /**
   * Takes a slot: `true` at once when one is free; otherwise a promise that resolves to `true` when
   * the calls ahead have made room, or to `false` when `signal` aborts first (the call has then left
   * the queue and holds nothing). Throws `QUEUE_FULL` when the queue is full. Whoever gets `true`
   * must call `release()` exactly once.
   */
  acquire(signal?: AbortSource): true | Promise<boolean> {
    // Slots pass straight from a finishing call to the first waiter, so a free slot means nobody waits.
    if (this.#running < this.limit) {
      this.#running++;
      this.#onChange?.(this.#running, this.#waiting.size);
      return true;
    }
    if (signal?.aborted) return Promise.resolve(false);
    if (this.#waiting.size >= this.queueSize) {
      const running = this.#running;
      const waiting = this.#waiting.size;
      throw new ToolportError(
        'QUEUE_FULL',
        `Tool "${this.tool}" is busy: ${running} ${running === 1 ? 'call' : 'calls'} running and ${waiting} waiting; retry later.`,
        { tool: this.tool, running, waiting, maxConcurrency: this.limit, queueSize: this.queueSize },
        { retryAfterSeconds: 1 },
      );
    }
    return new Promise<boolean>((resolve) => {
      const admit = (): void => {
        signal?.removeEventListener('abort', leave);
        resolve(true);
      };
      const leave = (): void => {
        this.#waiting.delete(admit);
        this.#onChange?.(this.#running, this.#waiting.size);
        resolve(false);
      };
      this.#waiting.add(admit);
      signal?.addEventListener('abort', leave, { once: true });
      this.#onChange?.(this.#running, this.#waiting.size);
    });
  }

  /** Gives a slot back; the first waiting call, if any, gets it (the running count stays the same). */
  release(): void {
    const next = this.#waiting.values().next();
    if (next.done) {
      this.#running--;
    } else {
      this.#waiting.delete(next.value);
      next.value();
    }
    this.#onChange?.(this.#running, this.#waiting.size);
  }
}
