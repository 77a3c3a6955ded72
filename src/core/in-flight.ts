import { ToolportError } from '../core/errors.js';

/**
 * The tool calls in flight, each with the controller that cancels it, so shutdown can wait for
 * them and then abort the ones left. (One controller per call, rather than AbortSignal.any over a
 * shared shutdown signal: `any` costs a weak reference and a listener per call on the hot path.)
 */
export class InFlight {
  readonly #calls = new Set<AbortController>();
  #waiters: Array<() => void> = [];
  #draining = false;

  /** True once shutdown began: no call may enter any more. */
  get draining(): boolean {
    return this.#draining;
  }

  /** Refuses new calls from now on. */
  drain(): void {
    this.#draining = true;
  }

  get count(): number {
    return this.#calls.size;
  }

  /**
   * Registers a call; its controller is aborted by `abortAll`. Throws `SHUTTING_DOWN` once draining:
   * a request that passed the draining check before shutdown began (its body still arriving) must
   * not start a call that shutdown would neither wait for nor abort.
   */
  enter(controller: AbortController): void {
    if (this.#draining) throw shuttingDown();
    this.#calls.add(controller);
  }

  leave(controller: AbortController): void {
    this.#calls.delete(controller);
    if (this.#calls.size === 0) for (const wake of this.#waiters.splice(0)) wake();
  }

  /** Aborts every call in flight with this reason. */
  abortAll(reason: Error): void {
    for (const controller of this.#calls) controller.abort(reason);
  }

  /** Resolves when no call is in flight, or after `timeoutMs`; resolves to whether it drained. */
  drained(timeoutMs: number): Promise<boolean> {
    if (this.#calls.size === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#waiters = this.#waiters.filter((w) => w !== wake);
        resolve(false);
      }, timeoutMs);
      const wake = (): void => {
        clearTimeout(timer);
        resolve(true);
      };
      this.#waiters.push(wake);
    });
  }
}

/** The refusal every request gets while the server drains. */
export function shuttingDown(): ToolportError {
  return new ToolportError('SHUTTING_DOWN', 'The server is shutting down; retry on another instance.');
}
