import { Worker } from 'node:worker_threads';
import { FairQueue } from './fair-queue.js';
import { judgeLine, refused, type CommandRules, type LineJudgement } from './line-check.js';

/** Threads reading lines at once; each caller uses at most one of them at a time. */
export const CHECK_THREADS = 2;
/** Most time one line may take to read (it takes milliseconds): past it the thread is stopped and the line refused. */
export const MAX_CHECK_MS = 2_000;

// Beside this module in src/ and dist/permissions/bash/; from the bundles in dist/main/, tsc's copy there.
const WORKER_URL = import.meta.url.includes('/permissions/bash/')
  ? new URL('./worker.js', import.meta.url)
  : new URL('../permissions/bash/worker.js', import.meta.url);

class ThreadUnavailable extends Error {}

/** One worker thread running `judgeLine`, one line at a time; unusable once it stops. */
class CheckThread {
  alive = true;
  private readonly worker = new Worker(WORKER_URL);
  private readonly ready: Promise<void>;
  private pending: ((judgement: LineJudgement) => void) | undefined;

  constructor() {
    this.worker.unref();
    let failure: Error | undefined;
    // Without a listener an error would be thrown in the server; the exit that follows settles what waits.
    this.worker.on('error', (error) => (failure = error));
    this.ready = new Promise((resolve, reject) => {
      this.worker.once('message', () => resolve());
      this.worker.once('exit', () => reject(new ThreadUnavailable(failure?.message ?? 'the thread stopped before it was ready')));
    });
    this.worker.on('exit', () => {
      this.alive = false;
      this.settle({ verdict: refused('the command line could not be read (the thread reading it stopped)'), opened: [] });
    });
  }

  async judge(line: string, rules: CommandRules): Promise<LineJudgement> {
    // Held open only while a line waits for it.
    this.worker.ref();
    try {
      await this.ready;
    } finally {
      this.worker.unref();
    }
    this.worker.ref();
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.settle({ verdict: refused(`the command line took more than ${MAX_CHECK_MS} ms to read`), opened: [] });
        this.alive = false;
        void this.worker.terminate();
      }, MAX_CHECK_MS);
      this.pending = (judgement) => {
        clearTimeout(timer);
        this.worker.unref();
        resolve(judgement);
      };
      this.worker.once('message', (judgement: LineJudgement) => this.settle(judgement));
      this.worker.postMessage({ line, rules });
    });
  }

  private settle(judgement: LineJudgement): void {
    const pending = this.pending;
    this.pending = undefined;
    pending?.(judgement);
  }
}

/**
 * Reads lines for the Bash rules on `CHECK_THREADS` worker threads, started on first use, taking
 * turns between callers (`FairQueue`): a caller sending many long lines holds at most one thread,
 * and never the event loop. Where a thread cannot start (Node.js 20 running TypeScript through a
 * loader), lines are read on the event loop instead, still one caller's turn at a time.
 */
export class CheckPool {
  private readonly queue = new FairQueue(CHECK_THREADS);
  private readonly idle: CheckThread[] = [];
  private inProcess = false;

  judge(caller: string, line: string, rules: CommandRules): Promise<LineJudgement> {
    return this.queue.run(caller, () => this.onThread(line, rules));
  }

  private async onThread(line: string, rules: CommandRules): Promise<LineJudgement> {
    if (this.inProcess) return judgeLine(line, rules);
    const thread = this.idle.pop() ?? new CheckThread();
    try {
      return await thread.judge(line, rules);
    } catch (err) {
      if (!(err instanceof ThreadUnavailable)) throw err;
      this.inProcess = true;
      return judgeLine(line, rules);
    } finally {
      if (thread.alive && !this.inProcess) this.idle.push(thread);
    }
  }
}
