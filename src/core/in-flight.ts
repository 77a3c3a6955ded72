import { ToolportError } from './errors.js';

/** What cancels one call: an AbortController, or the cheaper `CallAbort`. */
export interface Abortable {
  abort(reason?: unknown): void;
}

/**
 * The tool calls in flight, each with what cancels it, so shutdown can wait for them and then
 * abort the ones left, and an adapter can cancel one by the key it called with. (One canceller
 * per call, rather than AbortSignal.any over a shared shutdown signal: `any` costs a weak
 * reference and a listener per call on the hot path.)
 */
export class InFlight {
  readonly #calls = new Map<object, Abortable>();
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
   * Registers a call under `key`; its controller is aborted by `abort(key)` and `abortAll`. Throws
   * `SHUTTING_DOWN` once draining: a call that was on its way when shutdown began (a request whose
   * body was still arriving) must not start a call that shutdown would neither wait for nor abort.
   */
  enter(key: object, controller: Abortable): void {
    if (this.#draining) throw shuttingDown();
    this.#calls.set(key, controller);
  }

  leave(key: object): void {
    this.#calls.delete(key);
    if (this.#calls.size === 0 && this.#waiters.length > 0) for (const wake of this.#waiters.splice(0)) wake();
  }

  /** Aborts the call registered under `key`, if it is still in flight. */
  abort(key: object, reason: unknown): void {
    this.#calls.get(key)?.abort(reason);
  }

  /** Aborts every call in flight with this reason. */
  abortAll(reason: Error): void {
    for (const controller of this.#calls.values()) controller.abort(reason);
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

/** The refusal every call gets while the server drains. */
export function shuttingDown(): ToolportError {
  return new ToolportError('SHUTTING_DOWN', 'The server is shutting down; retry on another instance.');
}
