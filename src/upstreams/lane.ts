/**
 * The listings of one upstream on their way into the registry, where applying one takes a while
 * (its schemas compile): one is applied at a time, in the order given, and a listing given while
 * another is applied waits, superseded by any newer one, so a burst of listings is one more
 * application, of the newest. `apply` settles a listing (applied, or held back); a failure it
 * throws goes to `failed` and settles it too, so waiters never hang on it.
 */
export class ListingLane<L> {
  readonly #apply: (listing: L) => Promise<void>;
  readonly #failed: (err: unknown) => void;
  // Listings are numbered as given; `settled` is the number of the newest one settled.
  #given = 0;
  #settled = 0;
  #next: L | undefined;
  #running = false;
  #waiters: Array<{ generation: number; resolve: () => void }> = [];

  constructor(apply: (listing: L) => Promise<void>, failed: (err: unknown) => void) {
    this.#apply = apply;
    this.#failed = failed;
  }

  /** Whether every listing given so far is settled. */
  get settled(): boolean {
    return this.#settled === this.#given;
  }

  /** Gives a listing; resolves once it, or a newer one, is settled. */
  give(listing: L): Promise<void> {
    this.#next = listing;
    const generation = ++this.#given;
    if (!this.#running) {
      this.#running = true;
      void this.#run();
    }
    return this.#settledThrough(generation);
  }

  /** Resolves once every listing given so far is settled (at once when they are). */
  settle(): Promise<void> {
    return this.#settledThrough(this.#given);
  }

  #settledThrough(generation: number): Promise<void> {
    if (this.#settled >= generation) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push({ generation, resolve }));
  }

  async #run(): Promise<void> {
    // `#running` goes false in the same turn that finds nothing next, so a listing given later starts a run of its own.
    while (this.#next !== undefined) {
      const listing = this.#next;
      const generation = this.#given;
      this.#next = undefined;
      try {
        await this.#apply(listing);
      } catch (err) {
        this.#failed(err);
      }
      this.#settled = generation;
      const waiting = this.#waiters;
      this.#waiters = waiting.filter((w) => w.generation > generation);
      for (const w of waiting) if (w.generation <= generation) w.resolve();
    }
    this.#running = false;
  }
}
