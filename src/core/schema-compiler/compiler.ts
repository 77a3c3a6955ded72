import { compileListing, type ToolSchemas } from './compile.js';
import { CompileThread, ThreadUnavailable, type ListingOutcome } from './thread.js';

export type { ListingOutcome } from './thread.js';

/**
 * Most CPU time one listing may take in the thread; past it the thread is stopped and restarted,
 * and the listing's new schemas are refused. A 64 KiB schema of a thousand patterns takes about
 * 1.1 s there (both forms, their code and its cache; one form took 0.3 to 0.5 s on the event
 * loop), so nine such fit; 16 tools of 420 patterns each (a listing that held the event loop back
 * to back) take about 4 s.
 */
export const MAX_LISTING_COMPILE_MS = 10_000;

/** A listing waiting for its turn: `prepare` says, when the turn comes, what to compile; `commit` takes the outcome. */
export interface ListingJob<T> {
  /** The schemas to compile, read when the listing's turn comes; none: `commit` is called at once, and the thread not used. */
  prepare(): readonly ToolSchemas[];
  /** Called with the outcome before any later listing of the same lane is prepared. */
  commit(outcome: ListingOutcome): T;
}

interface Waiting {
  job: ListingJob<unknown>;
  resolve(value: unknown): void;
  reject(reason: unknown): void;
}

/** One source's listings: at most one prepared and waiting for the thread, or one compiling and one waiting behind it. */
interface Lane {
  key: string;
  ready: { waiting: Waiting; listing: readonly ToolSchemas[] } | undefined;
  running: boolean;
  next: Waiting | undefined;
  inTurn: boolean;
}

/**
 * Compiles sources' schemas in a worker thread, off the event loop: on it, Ajv held everything for
 * 0.3 to 0.7 s per 64 KiB schema, and a source that changes its schemas at every listing held the
 * server back to back. The thread starts on the first listing that needs it and never keeps the process
 * alive. Each lane (a registry's source) has one listing compiling at a time, and a newer listing
 * replaces the one still waiting (which resolves 'superseded'). Lanes take turns, so one churning
 * source cannot starve another. Where no thread can start (Node.js 20 running TypeScript through a
 * loader), listings compile on the event loop, one lane's turn at a time still.
 */
export class SchemaCompiler {
  readonly #maxListingMs: number;
  readonly #lanes = new Map<string, Lane>();
  // Lanes whose prepared listing waits for the thread, in turn order.
  readonly #turns: Lane[] = [];
  #thread: CompileThread | undefined;
  #threadStarts = 0;
  #inProcess = false;
  #busy = false;
  #closed = false;

  constructor(options: { maxListingMs?: number } = {}) {
    this.#maxListingMs = options.maxListingMs ?? MAX_LISTING_COMPILE_MS;
  }

  /** Queues `job` in `lane`; resolves with what its `commit` returns, or 'superseded' when a newer job of the lane replaced it first. */
  submit<T>(lane: string, job: ListingJob<T>): Promise<T | 'superseded'> {
    return new Promise<T | 'superseded'>((resolve, reject) => {
      const waiting: Waiting = { job, resolve: resolve as (value: unknown) => void, reject };
      let found = this.#lanes.get(lane);
      if (found === undefined) this.#lanes.set(lane, (found = { key: lane, ready: undefined, running: false, next: undefined, inTurn: false }));
      if (found.running) {
        found.next?.resolve('superseded');
        found.next = waiting;
        return;
      }
      found.ready?.waiting.resolve('superseded');
      found.ready = undefined;
      this.#prepare(found, waiting);
      this.#pump();
    });
  }

  /** How many times the thread was started: 0 until a listing needs compiling, one more after each stopped listing. */
  get threadStarts(): number {
    return this.#threadStarts;
  }

  /** Stops the thread: what compiles and what waits is refused (each job's commit says why), as is anything submitted later. */
  async close(): Promise<void> {
    this.#closed = true;
    await this.#thread?.stop('the schema compiler was closed');
  }

  /** Prepares a lane's job, which is not compiling: commits it at once when nothing needs compiling, else gives it a turn. */
  #prepare(lane: Lane, waiting: Waiting): void {
    let listing: readonly ToolSchemas[];
    try {
      listing = waiting.job.prepare();
    } catch (err) {
      waiting.reject(err);
      this.#leave(lane);
      return;
    }
    if (listing.length === 0) {
      this.#commit(waiting, { compilations: [] });
      this.#leave(lane);
      return;
    }
    lane.ready = { waiting, listing };
    if (!lane.inTurn) {
      lane.inTurn = true;
      this.#turns.push(lane);
    }
  }

  #commit(waiting: Waiting, outcome: ListingOutcome): void {
    try {
      waiting.resolve(waiting.job.commit(outcome));
    } catch (err) {
      waiting.reject(err);
    }
  }

  /** Forgets a lane with nothing left in it. */
  #leave(lane: Lane): void {
    if (lane.ready === undefined && !lane.running && lane.next === undefined && !lane.inTurn) this.#lanes.delete(lane.key);
  }

  /** Gives the thread to the next lane in turn, if it is free. */
  #pump(): void {
    if (this.#busy) return;
    let lane: Lane | undefined;
    while ((lane = this.#turns.shift()) !== undefined) {
      lane.inTurn = false;
      if (lane.ready !== undefined) break;
      this.#leave(lane);
    }
    if (lane?.ready === undefined) return;
    const current = lane;
    const { waiting, listing } = current.ready!;
    current.ready = undefined;
    current.running = true;
    this.#busy = true;
    void this.#compile(listing).then((outcome) => {
      this.#busy = false;
      current.running = false;
      this.#commit(waiting, outcome);
      const next = current.next;
      current.next = undefined;
      // Behind every lane that waited meanwhile: turns go round.
      if (next !== undefined) this.#prepare(current, next);
      else this.#leave(current);
      this.#pump();
    });
  }

  async #compile(listing: readonly ToolSchemas[]): Promise<ListingOutcome> {
    if (this.#closed) return { failed: 'the schema compiler was closed' };
    try {
      if (!this.#inProcess) {
        if (!this.#thread?.alive) {
          this.#thread = new CompileThread();
          this.#threadStarts++;
        }
        try {
          return await this.#thread.compile(listing, this.#maxListingMs);
        } catch (err) {
          if (!(err instanceof ThreadUnavailable)) throw err;
          if (this.#closed) return { failed: 'the schema compiler was closed' };
          // Only a first thread that cannot start means there are none here; a restart that fails refuses.
          if (this.#threadStarts > 1) return { failed: `the schema compiler's thread did not start again (${err.message})` };
          this.#inProcess = true;
        }
      }
      return { compilations: compileListing(listing) };
    } catch (err) {
      return { failed: `the schema compiler failed: ${err instanceof Error ? err.message : String(err)}` };
    }
  }
}

let shared: SchemaCompiler | undefined;

/** The process's one compiler, made on first use: what registries use unless given their own. */
export function sharedSchemaCompiler(): SchemaCompiler {
  return (shared ??= new SchemaCompiler());
}
