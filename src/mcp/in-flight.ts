import type { RequestId } from './jsonrpc.js';

/**
 * The calls `notifications/cancelled` can reach, by JSON-RPC id: one set per stdio process, or
 * per caller when an HTTP transport chooses to honour cancellations sent in a separate POST.
 * Request ids are only unique per client, so a set must never be shared between clients.
 */
export class InFlightCalls {
  readonly #calls = new Map<string, AbortController>();

  /** Calls registered now. */
  get size(): number {
    return this.#calls.size;
  }

  /**
   * Registers a call and returns the controller whose signal the call gets, or `undefined` when a
   * call with the same id is still running (a client error; the second call then cannot be
   * cancelled by id, and must not take over the first one's entry).
   */
  add(id: RequestId): AbortController | undefined {
    const key = keyOf(id);
    if (this.#calls.has(key)) return undefined;
    const controller = new AbortController();
    this.#calls.set(key, controller);
    return controller;
  }

  delete(id: RequestId, controller: AbortController): void {
    const key = keyOf(id);
    if (this.#calls.get(key) === controller) this.#calls.delete(key);
  }

  /** Aborts the call with this id, if one runs; unknown and finished ids are ignored, as the spec asks. */
  cancel(id: unknown, reason: string): boolean {
    if (typeof id !== 'string' && typeof id !== 'number') return false;
    const controller = this.#calls.get(keyOf(id));
    if (!controller) return false;
    controller.abort(new CancelledByClient(reason));
    return true;
  }

  /** Aborts every call (the channel closed, or the server is shutting down). */
  abortAll(reason: unknown): void {
    for (const controller of this.#calls.values()) controller.abort(reason);
  }
}

/** The abort reason of a call the client cancelled: its message is what the model would read. */
export class CancelledByClient extends Error {
  override readonly name = 'CancelledByClient';
}

// The number 1 and the string "1" are different ids.
function keyOf(id: RequestId): string {
  return typeof id === 'number' ? `n:${id}` : `s:${id}`;
}
