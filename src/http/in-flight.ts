/**
 * The tool calls in flight, each with the controller that cancels it, so shutdown can wait for
 * them and then abort the ones left. (One controller per call, rather than AbortSignal.any over a
 * shared shutdown signal: `any` costs a weak reference and a listener per call on the hot path.)
 */
export class InFlight {
  readonly #calls = new Set<AbortController>();
  #waiters: Array<() => void> = [];

  get count(): number {
    return this.#calls.size;
  }

  /** Registers a call; its controller is aborted by `abortAll`. */
  enter(controller: AbortController): void {
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
