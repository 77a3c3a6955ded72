/** One reader's share of a {@link ByteBudget}: what it holds now. */
export interface BudgetShare {
  /** Undefined when `more` bytes may be held now; else a promise that resolves once they may. Either way they are counted as held then. */
  room(more: number): Promise<void> | undefined;
  /** Says the reader holds `bytes` now (more after a chunk, fewer once a message is parsed). */
  hold(bytes: number): void;
  /** The reader is done: what it held is free. */
  done(): void;
}

/**
 * The bytes one upstream's answers may hold unparsed at once, shared by the readers of its
 * answers (HTTP bodies, event streams read concurrently): a reader that would take the total past
 * `limit` waits (its body paused, so the upstream waits too) until others free enough. The oldest
 * reader that holds anything never waits, so one always goes on: the total stays within `limit`
 * plus one reader's own bound.
 */
export class ByteBudget {
  readonly #limit: number;
  readonly #onHeld: (total: number) => void;
  readonly #shares = new Map<number, number>();
  readonly #waiting: Array<{ id: number; more: number; wake: () => void }> = [];
  #next = 0;
  #total = 0;

  /** `onHeld` hears the total each time it grows (the counters' peak). */
  constructor(limit: number, onHeld: (total: number) => void = () => undefined) {
    this.#limit = limit;
    this.#onHeld = onHeld;
  }

  get held(): number {
    return this.#total;
  }

  share(): BudgetShare {
    const id = this.#next++;
    this.#shares.set(id, 0);
    return {
      room: (more) => {
        if (this.#fits(id, more)) {
          this.#hold(id, this.#shares.get(id)! + more);
          return undefined;
        }
        return new Promise((wake) => this.#waiting.push({ id, more, wake }));
      },
      hold: (bytes) => this.#hold(id, bytes),
      done: () => {
        this.#hold(id, 0);
        this.#shares.delete(id);
        this.#wake();
      },
    };
  }

  #fits(id: number, more: number): boolean {
    if (this.#total + more <= this.#limit) return true;
    // The oldest share holding bytes goes on whatever the total (Map keeps insertion order).
    for (const [other, held] of this.#shares) if (held > 0 || other === id) return other === id;
    return false;
  }

  #hold(id: number, bytes: number): void {
    const before = this.#shares.get(id);
    if (before === undefined) return;
    this.#shares.set(id, bytes);
    this.#total += bytes - before;
    if (bytes > before) this.#onHeld(this.#total);
    else this.#wake();
  }

  /** Wakes, in the order they came, the waiting readers that fit now (the oldest holder always does), counting what each may hold. */
  #wake(): void {
    for (let i = 0; i < this.#waiting.length;) {
      const waiter = this.#waiting[i]!;
      const held = this.#shares.get(waiter.id);
      if (held !== undefined && !this.#fits(waiter.id, waiter.more)) {
        i++;
        continue;
      }
      this.#waiting.splice(i, 1);
      if (held !== undefined) this.#hold(waiter.id, held + waiter.more);
      waiter.wake();
    }
  }
}
