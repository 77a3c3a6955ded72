import { Worker } from 'node:worker_threads';
import type { ToolCompilation, ToolSchemas } from './compile.js';

// Beside this module in src/core/schema-compiler/ and dist/core/schema-compiler/; from the bundles
// in dist/main/, tsc's copy in dist/core/schema-compiler/.
const WORKER_URL = /\/core\/schema-compiler\/thread\.[jt]s$/.test(import.meta.url)
  ? new URL('./worker.js', import.meta.url)
  : new URL('../core/schema-compiler/worker.js', import.meta.url);

/**
 * The thread's heap: a listing of 16 schemas of 64 KiB (the 1 MiB a source may list, a thousand
 * patterns each) compiles within it; past it the thread ends and the listing is refused, rather
 * than the server's memory spent (each schema's code and caches alone are about 17 MiB).
 */
const MAX_THREAD_HEAP_MB = 512;

/** What compiling one listing came to: its compilations in the order asked, or why there are none. */
export type ListingOutcome = { compilations: ToolCompilation[] } | { failed: string };

/** The thread stopped before it was ready: where the first one does (Node.js 20 running TypeScript), there are none. */
export class ThreadUnavailable extends Error {}

/** One worker thread running `compileListing`, one listing at a time; unusable once it stops. */
export class CompileThread {
  alive = true;
  readonly #worker = new Worker(WORKER_URL, { resourceLimits: { maxOldGenerationSizeMb: MAX_THREAD_HEAP_MB } });
  readonly #ready: Promise<void>;
  #pending: ((outcome: ListingOutcome) => void) | undefined;
  #stopping: string | undefined;

  constructor() {
    // Held open only while a listing waits for it: an idle compiler never keeps the process alive.
    this.#worker.unref();
    let failure: Error | undefined;
    // Without a listener an error would be thrown in the server; the exit that follows settles what waits.
    this.#worker.on('error', (error) => (failure = error));
    this.#ready = new Promise((resolve, reject) => {
      // The first message says the thread is ready; each after it answers a listing.
      this.#worker.once('message', () => {
        resolve();
        this.#worker.on('message', (compilations: ToolCompilation[]) => this.#settle({ compilations }));
      });
      this.#worker.once('exit', () => reject(new ThreadUnavailable(failure?.message ?? 'the thread stopped before it was ready')));
    });
    this.#ready.catch(() => undefined);
    this.#worker.on('exit', (code) => {
      this.alive = false;
      this.#settle({ failed: this.#stopping ?? `the schema compiler's thread stopped (${failure?.message ?? `exit code ${code}`})` });
    });
  }

  /**
   * Compiles `listing`; once the thread has spent `maxMs` of CPU time on it, the thread is stopped
   * and the outcome says so. CPU time, not time on the clock: on a busy machine a listing takes
   * longer without costing more. Throws `ThreadUnavailable`.
   */
  async compile(listing: readonly ToolSchemas[], maxMs: number): Promise<ListingOutcome> {
    this.#worker.ref();
    try {
      await this.#ready;
    } catch (err) {
      this.#worker.unref();
      throw err;
    }
    const start = await this.#cpuMs();
    // Stopped meanwhile (closed, or it failed while idle): its exit settled nothing, and a message would go nowhere.
    if (!this.alive) {
      this.#worker.unref();
      return { failed: this.#stopping ?? "the schema compiler's thread stopped" };
    }
    return new Promise((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      // The clock first: the thread cannot have spent more CPU time than the time gone by.
      const check = async (): Promise<void> => {
        const spent = start === undefined ? maxMs : ((await this.#cpuMs()) ?? Infinity) - start;
        if (this.#pending !== settle) return;
        if (spent >= maxMs) void this.stop(`compiling them took more than ${maxMs} ms of the schema compiler's time, and was stopped`);
        else timer = setTimeout(() => void check(), maxMs - spent);
      };
      const settle = (outcome: ListingOutcome): void => {
        clearTimeout(timer);
        this.#worker.unref();
        resolve(outcome);
      };
      this.#pending = settle;
      timer = setTimeout(() => void check(), maxMs);
      try {
        this.#worker.postMessage(listing);
      } catch (err) {
        this.#settle({ failed: `they could not be sent to the schema compiler: ${err instanceof Error ? err.message : String(err)}` });
      }
    });
  }

  /** The CPU time the thread has spent, in ms; undefined where Node.js cannot tell (releases before `worker.cpuUsage`). */
  async #cpuMs(): Promise<number | undefined> {
    if (typeof this.#worker.cpuUsage !== 'function') return undefined;
    try {
      const { user, system } = await this.#worker.cpuUsage();
      return (user + system) / 1000;
    } catch {
      // The thread has stopped: its exit settles what waits.
      return undefined;
    }
  }

  /** Ends the thread; what it was compiling fails with `reason`. */
  async stop(reason: string): Promise<void> {
    this.#stopping ??= reason;
    this.alive = false;
    await this.#worker.terminate();
  }

  #settle(outcome: ListingOutcome): void {
    const pending = this.#pending;
    this.#pending = undefined;
    pending?.(outcome);
  }
}
