import type { RequestId } from '@modelcontextprotocol/client';

/**
 * Calls aborted before the upstream answered, by request id: each keeps its caller's slot until
 * the upstream answers it (the upstream need not heed the cancellation, so aborting calls must not
 * run more at once), or `graceMs` at most, or until the connection ends.
 */
export class AbandonedCalls {
  readonly #release: (caller: string | undefined) => void;
  readonly #graceMs: number;
  readonly #calls = new Map<RequestId, () => void>();

  /** `release` frees a caller's slot. */
  constructor(release: (caller: string | undefined) => void, graceMs: number) {
    this.#release = release;
    this.#graceMs = graceMs;
  }

  get size(): number {
    return this.#calls.size;
  }

  /** Keeps `caller`'s slot for request `id` until it is answered, or the grace ends. */
  keep(id: RequestId, caller: string | undefined): void {
    const release = (): void => {
      if (this.#calls.get(id) !== release) return;
      this.#calls.delete(id);
      clearTimeout(timer);
      this.#release(caller);
    };
    const timer = setTimeout(release, this.#graceMs);
    timer.unref();
    this.#calls.set(id, release);
  }

  /** The upstream answered request `id` (or its answer was dropped as late): its slot, if kept, is free. */
  answered(id: RequestId): void {
    this.#calls.get(id)?.();
  }

  /** The connection ended: what it had not answered it never will. */
  releaseAll(): void {
    for (const release of [...this.#calls.values()]) release();
  }
}
