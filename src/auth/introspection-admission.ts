import { ConcurrencyLimiter } from '../core/limiter.js';
import { ToolportError } from '../core/errors.js';

/** Most introspections asked of the issuer at once, from every client together. */
export const MAX_INTROSPECTIONS = 16;
/** Most introspections of one client address at once: a quarter of them, so three more clients always find room. */
export const MAX_INTROSPECTIONS_PER_ADDRESS = 4;
/** Most introspections waiting for a slot, together and per address; past them, 503 QUEUE_FULL. */
export const INTROSPECTION_QUEUE = 64;
export const INTROSPECTION_QUEUE_PER_ADDRESS = 8;
/** New tokens one client address may have introspected per minute; past it, 429 RATE_LIMITED. */
export const INTROSPECTIONS_PER_ADDRESS_PER_MINUTE = 60;

const WINDOW_MS = 60_000;
// Addresses counted at most; past it, windows that ended are dropped, then the oldest.
const MAX_ADDRESSES = 10_000;

/**
 * Who may have an opaque token introspected, and when. Anyone may send made-up opaque tokens and
 * each new one is a request to the identity provider, so each client address has a budget of new
 * tokens per minute and a share of the slots: at most `MAX_INTROSPECTIONS` at once in all, at
 * most `MAX_INTROSPECTIONS_PER_ADDRESS` of them for one address, and a freed slot goes to the
 * waiting address with the fewest running (see `ConcurrencyLimiter`). One client's made-up tokens
 * then take at most its own share, and other clients' real tokens still find slots. Counted in this
 * process (each replica asks the provider on its own account).
 */
export class IntrospectionAdmission {
  readonly #slots = new ConcurrencyLimiter({
    tool: 'introspection',
    label: 'Checking access tokens with the identity provider',
    limit: MAX_INTROSPECTIONS,
    queueSize: INTROSPECTION_QUEUE,
    limitPerCaller: MAX_INTROSPECTIONS_PER_ADDRESS,
    queuePerCaller: INTROSPECTION_QUEUE_PER_ADDRESS,
  });
  readonly #windows = new Map<string, { count: number; endsAt: number }>();
  readonly #now: () => number;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  /**
   * Runs `introspect` once `from` (a client address; undefined: an in-process caller, unbudgeted)
   * is within its budget and holds a slot. Rejects with RATE_LIMITED (429) past the budget and
   * QUEUE_FULL (503) when the queue, or the address's share of it, is full, without calling it.
   */
  async run<T>(from: string | undefined, introspect: () => Promise<T>): Promise<T> {
    if (from !== undefined) this.#count(from);
    const admitted = this.#slots.acquire(undefined, from);
    if (admitted !== true) await admitted;
    try {
      return await introspect();
    } finally {
      this.#slots.release(from);
    }
  }

  #count(from: string): void {
    const now = this.#now();
    let window = this.#windows.get(from);
    if (window === undefined || window.endsAt <= now) {
      if (window === undefined && this.#windows.size >= MAX_ADDRESSES) this.#prune(now);
      window = { count: 0, endsAt: now + WINDOW_MS };
      this.#windows.set(from, window);
    }
    if (window.count >= INTROSPECTIONS_PER_ADDRESS_PER_MINUTE) {
      const retryAfter = Math.max(1, Math.ceil((window.endsAt - now) / 1000));
      throw new ToolportError(
        'RATE_LIMITED',
        `Too many new access tokens from this client address: at most ${INTROSPECTIONS_PER_ADDRESS_PER_MINUTE} a minute are checked with the identity provider; retry in ${retryAfter} s.`,
        { limit: INTROSPECTIONS_PER_ADDRESS_PER_MINUTE, windowSeconds: WINDOW_MS / 1000, retryAfterSeconds: retryAfter },
        { retryAfterSeconds: retryAfter },
      );
    }
    window.count += 1;
  }

  #prune(now: number): void {
    for (const [address, window] of this.#windows) if (window.endsAt <= now) this.#windows.delete(address);
    for (const address of this.#windows.keys()) {
      if (this.#windows.size < MAX_ADDRESSES) break;
      this.#windows.delete(address);
    }
  }
}
