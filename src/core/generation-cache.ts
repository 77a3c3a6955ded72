/**
 * A bounded cache in two generations, for what callers present again and again (API keys that
 * matched, verified access tokens). A lookup tries the recent generation, then the older one
 * (moving the entry back into the recent one); when the recent one holds half of `max`, it becomes
 * the older one and what was not seen since is forgotten. Each operation is a Map lookup or two,
 * with no list to keep in order as an LRU would, and the memory is bounded by `max` entries
 * whatever callers send.
 */
export class GenerationCache<V> {
  readonly #half: number;
  #recent = new Map<string, V>();
  #older = new Map<string, V>();

  constructor(max: number) {
    this.#half = Math.max(1, Math.floor(max / 2));
  }

  get(key: string): V | undefined {
    const recent = this.#recent.get(key);
    if (recent !== undefined) return recent;
    const older = this.#older.get(key);
    if (older === undefined) return undefined;
    this.#older.delete(key);
    this.set(key, older);
    return older;
  }

  set(key: string, value: V): void {
    if (this.#recent.size >= this.#half) {
      this.#older = this.#recent;
      this.#recent = new Map();
    }
    this.#recent.set(key, value);
  }

  delete(key: string): void {
    this.#recent.delete(key);
    this.#older.delete(key);
  }

  /** Forgets everything (what the keys map to changed). */
  clear(): void {
    this.#recent = new Map();
    this.#older = new Map();
  }

  /** Entries held, over both generations (at most `max`). */
  get size(): number {
    return this.#recent.size + this.#older.size;
  }
}
