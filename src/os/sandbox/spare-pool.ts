/** Something started ahead of demand for one use: a sandbox waiting for its command. */
export interface Spare {
  /** False once it ended by itself while waiting (it is then dropped, never handed out). */
  readonly alive: boolean;
  /** Ends it without using it; it calls `onEnd` when it ends by itself. */
  discard(): void;
}

export interface SparePoolOptions<T extends Spare> {
  /** Starts one spare; `onEnd` is to be called if it ends before it is used. */
  start(onEnd: () => void): Promise<T>;
  /** At most this many spares wait at once: the concurrency of what uses them. */
  size: number;
  /** With no use for this long, the spares are ended; the next use starts them again. */
  idleMs: number;
}

/**
 * Spares started ahead of demand, each used once and replaced in the background, so what it
 * costs to start one is off the path of the use. Demand sizes the pool: after each use it tops up
 * to one more than the most uses that ran at once since it was last idle, at most `size`. Nothing
 * is started but after a use, so a spare that cannot start (or ends at once) costs one attempt
 * per use, never a loop; an idle pool ends its spares, so a pool per workspace costs nothing
 * where no one calls.
 */
export class SparePool<T extends Spare> {
  readonly #options: SparePoolOptions<T>;
  // Oldest first: the one that has waited longest is the furthest along.
  readonly #ready: T[] = [];
  readonly #waiting: Array<(spare: T | undefined) => void> = [];
  #starting = 0;
  #inFlight = 0;
  #peak = 0;
  #idleTimer: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(options: SparePoolOptions<T>) {
    this.#options = options;
  }

  /** How many spares wait now, and how many are being started. */
  get counts(): { ready: number; starting: number } {
    return { ready: this.#ready.length, starting: this.#starting };
  }

  /**
   * Runs `use` with a spare of its own: one that waits, else the next one to finish starting,
   * else one started now (whose failure to start rejects). Then tops the pool up.
   */
  async use<R>(use: (spare: T) => Promise<R>): Promise<R> {
    this.#inFlight++;
    this.#peak = Math.max(this.#peak, this.#inFlight);
    clearTimeout(this.#idleTimer);
    try {
      // Waits for one that is starting only if no other use waits for it already.
      const spare = this.#ready.shift() ?? (this.#starting > this.#waiting.length ? await this.#next() : undefined) ?? (await this.#options.start(() => {}));
      return await use(spare);
    } finally {
      // After the use, not beside it: starting a spare takes CPU that the use would wait for.
      this.#topUp();
      this.#inFlight--;
      if (this.#inFlight === 0 && !this.#closed) {
        this.#idleTimer = setTimeout(() => this.#trim(), this.#options.idleMs).unref();
      }
    }
  }

  /** Ends the waiting spares and starts no more. */
  close(): void {
    this.#closed = true;
    clearTimeout(this.#idleTimer);
    this.#trim();
  }

  #next(): Promise<T | undefined> {
    return new Promise((resolve) => this.#waiting.push(resolve));
  }

  #topUp(): void {
    if (this.#closed) return;
    const wanted = Math.min(this.#options.size, this.#peak + 1);
    while (this.#ready.length + this.#starting < wanted) {
      this.#starting++;
      let spare: T | undefined;
      const onEnd = (): void => {
        const at = spare === undefined ? -1 : this.#ready.indexOf(spare);
        if (at >= 0) this.#ready.splice(at, 1);
      };
      this.#options.start(onEnd).then(
        (started) => {
          spare = started;
          this.#starting--;
          this.#arrived(started);
        },
        () => {
          this.#starting--;
          // The one waiting for it starts its own, whose failure it then sees.
          this.#waiting.shift()?.(undefined);
        },
      );
    }
  }

  #arrived(spare: T): void {
    if (!spare.alive || this.#closed) {
      spare.discard();
      // The one waiting for it starts its own.
      this.#waiting.shift()?.(undefined);
      return;
    }
    const waiter = this.#waiting.shift();
    if (waiter !== undefined) waiter(spare);
    else this.#ready.push(spare);
  }

  /** Ends the waiting spares; the pool grows again from the next use. */
  #trim(): void {
    this.#peak = 0;
    for (const spare of this.#ready.splice(0)) spare.discard();
  }
}
