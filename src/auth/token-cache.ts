import { GenerationCache } from '../core/generation-cache.js';

/** Entries a cache holds at most, over its two generations. */
export const TOKEN_CACHE_MAX = 4096;

interface Entry<T> {
  value: T;
  /** Epoch ms after which the entry is no longer answered. */
  until: number;
}

/**
 * Verified tokens by their text, each until its own expiry, bounded: the keyring's two-generation
 * cache (`GenerationCache`), each entry with its expiry. A hit costs a Map lookup and a comparison
 * with the clock, so a token checked once costs no more than a key afterwards.
 */
export class TokenCache<T> {
  readonly #entries: GenerationCache<Entry<T>>;

  constructor(max = TOKEN_CACHE_MAX) {
    this.#entries = new GenerationCache(max);
  }

  /** The value remembered for `token`, unless it expired by `now` (epoch ms). */
  get(token: string, now: number): T | undefined {
    const entry = this.#entries.get(token);
    if (entry === undefined) return undefined;
    if (now < entry.until) return entry.value;
    this.#entries.delete(token);
    return undefined;
  }

  /** Remembers `value` for `token` until `until` (epoch ms). */
  set(token: string, value: T, until: number): void {
    this.#entries.set(token, { value, until });
  }

  /** Forgets every token (a change of what tokens map to). */
  clear(): void {
    this.#entries.clear();
  }
}
