import { Worker } from 'node:worker_threads';
import type { CommandScan } from './bash-rules-scan.js';

/** A line for the parsing thread: walk it for at most `max` commands, giving up after `budgetMs`. */
export interface ParseJob {
  readonly source: string;
  readonly max: number;
  readonly budgetMs: number;
}

/** The parsing thread's answer: the line's commands, or why there are none; `ready` once, when its parser has loaded. */
export type ParseOutcome = CommandScan | { readonly kind: 'unparsable' } | { readonly kind: 'too-slow' } | { readonly kind: 'ready' };

// ../tools/ from here is this folder in src/ and in dist/, and dist/tools/ from the bundle in dist/main/.
const WORKER_URL = new URL('../tools/bash-rules-worker.js', import.meta.url);
// How long past its own deadline a thread that has not answered may run before it is stopped.
const GRACE_MS = 250;

interface Pending {
  readonly job: ParseJob;
  readonly resolve: (outcome: ParseOutcome) => void;
  readonly reject: (error: Error) => void;
}

/**
 * One worker thread, started on first use, parsing one line at a time. A parse past its budget is
 * cancelled by the thread itself, or, when the thread does not answer, by stopping the thread and
 * starting another for the next line: the event loop never waits on tree-sitter.
 */
class ParseThread {
  private worker: Worker | undefined;
  private ready = false;
  private readonly queue: Pending[] = [];
  private current: { readonly pending: Pending; readonly worker: Worker; readonly timer: NodeJS.Timeout } | undefined;

  parse(job: ParseJob): Promise<ParseOutcome> {
    return new Promise((resolve, reject) => {
      this.queue.push({ job, resolve, reject });
      this.pump();
    });
  }

  private pump(): void {
    if (this.current === undefined && this.queue.length > 0) {
      const worker = this.worker ?? this.spawn();
      const pending = this.ready ? this.queue.shift() : undefined;
      if (pending !== undefined) {
        const timer = setTimeout(() => this.stop(worker), pending.job.budgetMs + GRACE_MS);
        this.current = { pending, worker, timer };
        worker.postMessage(pending.job);
      }
    }
    // Held open only while a line waits for it.
    if (this.current !== undefined || this.queue.length > 0) this.worker?.ref();
    else this.worker?.unref();
  }

  private spawn(): Worker {
    const worker = new Worker(WORKER_URL);
    this.worker = worker;
    this.ready = false;
    worker.on('message', (outcome: ParseOutcome) => {
      if (outcome.kind !== 'ready') return this.settle(worker, outcome);
      if (this.worker === worker) this.ready = true;
      this.pump();
    });
    worker.on('error', (error) => {
      // A thread that never became ready cannot parse (the grammar did not load): the lines waiting get the error.
      if (this.worker === worker && !this.ready) for (const pending of this.queue.splice(0)) pending.reject(error);
    });
    worker.on('exit', () => {
      if (this.worker === worker) this.worker = undefined;
      this.settle(worker, { kind: 'unparsable' });
    });
    return worker;
  }

  private stop(worker: Worker): void {
    if (this.worker === worker) this.worker = undefined;
    this.settle(worker, { kind: 'too-slow' });
    void worker.terminate();
  }

  private settle(worker: Worker, outcome: ParseOutcome): void {
    const current = this.current;
    if (current?.worker !== worker) return;
    clearTimeout(current.timer);
    this.current = undefined;
    current.pending.resolve(outcome);
    this.pump();
  }
}

const thread = new ParseThread();

/**
 * Parses a line with tree-sitter's bash grammar in a worker thread and walks it for its simple
 * commands (see `collectCommands`). Rejects only when the parser cannot be loaded at all.
 */
export function parseCommands(source: string, max: number, budgetMs: number): Promise<ParseOutcome> {
  return thread.parse({ source, max, budgetMs });
}
