/** How long one turn of the queue may run before it lets the event loop (and I/O) in. */
const TURN_MS = 5;

/**
 * Runs synchronous jobs one at a time, taking turns between callers: each round runs the oldest job
 * of every caller waiting, in the order they came, so a caller with many jobs waiting delays
 * another's by at most one job of its own per round. A turn runs rounds for at most `TURN_MS`, then
 * yields to the event loop.
 */
export class FairQueue {
  private readonly waiting = new Map<string, Array<() => void>>();
  private scheduled = false;

  /** Runs `job` in its caller's turn; settles with what it returns or throws. */
  run<T>(caller: string, job: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      let jobs = this.waiting.get(caller);
      if (jobs === undefined) this.waiting.set(caller, (jobs = []));
      jobs.push(() => {
        try {
          resolve(job());
        } catch (err) {
          reject(err as Error);
        }
      });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => this.turn());
  }

  private turn(): void {
    this.scheduled = false;
    const end = performance.now() + TURN_MS;
    while (this.waiting.size > 0 && performance.now() < end) {
      for (const [caller, jobs] of [...this.waiting]) {
        const job = jobs.shift();
        if (jobs.length === 0) this.waiting.delete(caller);
        job?.();
      }
    }
    if (this.waiting.size > 0) this.schedule();
  }
}
