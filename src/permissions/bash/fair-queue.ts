/**
 * Runs jobs on `slots` slots, taking turns between callers: a caller runs at most one job at a
 * time, and when a slot frees it goes to the caller that has waited longest since its last turn.
 * So a caller with many jobs waiting delays another's by at most the jobs already running, and
 * with more than one slot, not at all while a slot is free.
 */
export class FairQueue {
  // Callers with jobs waiting, in turn order: taking a job moves its caller to the back.
  private readonly waiting = new Map<string, Array<() => Promise<void>>>();
  private readonly running = new Set<string>();

  constructor(private readonly slots: number) {}

  /** Runs `job` in its caller's turn; settles with what it returns or throws. */
  run<T>(caller: string, job: () => T | Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      let jobs = this.waiting.get(caller);
      if (jobs === undefined) this.waiting.set(caller, (jobs = []));
      jobs.push(async () => {
        try {
          resolve(await job());
        } catch (err) {
          reject(err as Error);
        }
      });
      this.pump();
    });
  }

  private pump(): void {
    while (this.running.size < this.slots) {
      const next = [...this.waiting].find(([caller]) => !this.running.has(caller));
      if (next === undefined) return;
      const [caller, jobs] = next;
      const job = jobs.shift() as () => Promise<void>;
      this.waiting.delete(caller);
      if (jobs.length > 0) this.waiting.set(caller, jobs);
      this.running.add(caller);
      void job().finally(() => {
        this.running.delete(caller);
        this.pump();
      });
    }
  }
}
