/**
 * What the pipeline needs of an abort signal. An `AbortSignal` has it, and so does `CallAbort`,
 * which costs far less when no one asks for a real signal.
 */
export interface AbortSource {
  readonly aborted: boolean;
  readonly reason: unknown;
  addEventListener(type: 'abort', listener: () => void, options?: { once?: boolean }): void;
  removeEventListener(type: 'abort', listener: () => void): void;
}

/**
 * One call's cancellation: whether it was aborted and why, a few listeners in an array, and an
 * `AbortSignal` made only when someone asks for it (a tool that reads `context.signal`). A trivial
 * call never touches an `AbortController`: with two per call (and their EventTarget listeners),
 * they took 10% of the CPU of a keyed `POST /tools/Echo`. Listeners run once, on the first abort.
 */
export class CallAbort implements AbortSource {
  #aborted = false;
  #reason: unknown = undefined;
  #controller: AbortController | undefined;
  #listeners: Array<() => void> | undefined;

  get aborted(): boolean {
    return this.#aborted;
  }

  /** What `abort` was given (undefined before; a real signal would say AbortError for undefined). */
  get reason(): unknown {
    return this.#reason;
  }

  /** An AbortSignal that aborts with this call, made on first use (aborted already if the call is). */
  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      if (this.#aborted) this.#controller.abort(this.#reason);
    }
    return this.#controller.signal;
  }

  /** Aborts the call: the signal, if one was made, and the listeners; nothing after the first time. */
  abort(reason?: unknown): void {
    if (this.#aborted) return;
    this.#aborted = true;
    this.#reason = reason;
    this.#controller?.abort(reason);
    const listeners = this.#listeners;
    this.#listeners = undefined;
    if (listeners !== undefined) for (const listener of listeners) listener();
  }

  /** Runs `listener` on abort (once; the type is always `abort`). Nothing once aborted, as for a signal. */
  addEventListener(_type: 'abort', listener: () => void): void {
    if (this.#aborted) return;
    (this.#listeners ??= []).push(listener);
  }

  removeEventListener(_type: 'abort', listener: () => void): void {
    const listeners = this.#listeners;
    if (listeners === undefined) return;
    const at = listeners.lastIndexOf(listener);
    if (at >= 0) listeners.splice(at, 1);
  }

  /**
   * Aborts this call when `source` aborts (at once if it has); returns what stops following it,
   * to call when the call is over, or undefined when there is nothing to stop.
   */
  follow(source: AbortSource): (() => void) | undefined {
    if (source.aborted) {
      this.abort(source.reason);
      return undefined;
    }
    const onAbort = (): void => this.abort(source.reason);
    source.addEventListener('abort', onAbort, { once: true });
    return () => source.removeEventListener('abort', onAbort);
  }
}
