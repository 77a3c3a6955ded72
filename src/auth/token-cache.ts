/** Entries a cache holds at most, over its two generations. */
export const TOKEN_CACHE_MAX = 4096;

interface Entry<T> {
  value: T;
  /** Epoch ms after which the entry is no longer answered. */
  until: number;
}

/**
 * Verified tokens by their text, each until its own expiry, bounded: two generations, as the
 * keyring keeps its known keys. A token is looked up in the recent one, then the older one (and
 * moved back); when the recent one is full it becomes the older one, and what was not seen since
 * is forgotten. A hit costs a Map lookup and a comparison with the clock, so a token checked once
 * costs no more than a key afterwards.
 */
export class TokenCache<T> {
  readonly #max: number;
  #recent = new Map<string, Entry<T>>();
  #older = new Map<string, Entry<T>>();

  constructor(max = TOKEN_CACHE_MAX) {
    this.#max = max;
  }

  /** The value remembered for `token`, unless it expired by `now` (epoch ms). */
  get(token: string, now: number): T | undefined {
    let entry = this.#recent.get(token);
    if (entry === undefined) {
      entry = this.#older.get(token);
      if (entry === undefined) return undefined;
      this.#older.delete(token);
      this.#put(token, entry);
    }
    if (now < entry.until) return entry.value;
    this.#recent.delete(token);
    return undefined;
  }

  /** Remembers `value` for `token` until `until` (epoch ms). */
  set(token: string, value: T, until: number): void {
    this.#put(token, { value, until });
  }

  /** Forgets every token (a change of what tokens map to). */
  clear(): void {
    this.#recent = new Map();
    this.#older = new Map();
  }

  #put(token: string, entry: Entry<T>): void {
    if (this.#recent.size >= this.#max / 2) {
      this.#older = this.#recent;
      this.#recent = new Map();
    }
    this.#recent.set(token, entry);
  }
}
