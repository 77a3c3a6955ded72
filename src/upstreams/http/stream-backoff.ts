/** How an event stream that ends is opened again; see {@link StreamBackoff}. */
export interface ReconnectTiming {
  /** The least wait before a reopen, whatever `retry` the upstream asked for. */
  minMs: number;
  /** The wait when the upstream asked for none. */
  defaultMs: number;
  /** The most a wait grows to. */
  maxMs: number;
  /** A stream that lived this long ended normally: the next wait starts from the base again. */
  stableMs: number;
  /** Streams that end quickly, in a row, after which it is not opened again. */
  maxQuickEnds: number;
}

export const RECONNECT_TIMING: ReconnectTiming = { minMs: 500, defaultMs: 1_000, maxMs: 60_000, stableMs: 30_000, maxQuickEnds: 8 };

/**
 * The waits before an event stream that ended is opened again: the upstream's `retry` (or the
 * default), never under a floor, doubled for each stream in a row that ended within `stableMs`,
 * up to `maxMs`; after `maxQuickEnds` of them the stream is given up. An upstream that ends its
 * stream at once with `retry: 0` is asked again 8 times in about a minute, not 800 times a second.
 */
export class StreamBackoff {
  readonly #timing: ReconnectTiming;
  #quickEnds = 0;

  constructor(timing: Partial<ReconnectTiming> = {}) {
    this.#timing = { ...RECONNECT_TIMING, ...timing };
  }

  /** The wait before reopening a stream whose upstream asked for `retryMs` (undefined: none). */
  base(retryMs: number | undefined): number {
    return Math.max(retryMs ?? this.#timing.defaultMs, this.#timing.minMs);
  }

  /** The wait before reopening a stream that lived `livedMs`, or undefined when it is given up. */
  ended(livedMs: number, retryMs: number | undefined): number | undefined {
    this.#quickEnds = livedMs >= this.#timing.stableMs ? 0 : this.#quickEnds + 1;
    if (this.#quickEnds > this.#timing.maxQuickEnds) return undefined;
    const base = this.base(retryMs);
    return this.#quickEnds === 0 ? base : Math.min(base * 2 ** (this.#quickEnds - 1), this.#timing.maxMs);
  }

  /** Why it was given up, in words for the log. */
  get givenUp(): string {
    const { maxQuickEnds, stableMs } = this.#timing;
    return `the upstream ended its event stream ${maxQuickEnds + 1} times in a row, each within ${stableMs / 1000} s of opening it`;
  }
}
