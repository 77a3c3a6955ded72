import { EventEmitter } from 'node:events';
import { writeSync } from 'node:fs';
import { pino } from 'pino';

// What may wait for a slow or failing destination; past it, new lines are dropped.
const MAX_BUFFERED_BYTES = 16 * 1024 * 1024;
/** Lines are handed to the writer in batches of about this many bytes (some 75 audit lines)... */
export const LOG_BATCH_BYTES = 16 * 1024;
/** ...or this often, whichever comes first; and at exit, synchronously. */
export const LOG_FLUSH_INTERVAL_MS = 250;

type Writer = ReturnType<typeof pino.destination>;

// The destinations alive, written out synchronously when the process exits (one listener for all).
const open = new Set<BatchedDestination>();
let exitHooked = false;

/**
 * Log lines gathered into batches before they reach pino's asynchronous writer (sonic-boom).
 * sonic-boom measures its whole pending buffer (`Buffer.byteLength` of a growing string) on
 * every write, so a line cost 1.3 us there even with `minLength`; a batch of `LOG_BATCH_BYTES`
 * costs it once, and a line costs an array push. The writer keeps what it does well: writes
 * off the event loop, retries on EAGAIN, partial writes, the bound on what waits, and 'error'
 * events (re-emitted here). A batch is handed over when full, every `LOG_FLUSH_INTERVAL_MS`, on
 * `flush`, and written synchronously (after the writer's own flush) when the process exits.
 */
export class BatchedDestination extends EventEmitter {
  readonly #writer: Writer;
  readonly #fd: number;
  readonly #timer: NodeJS.Timeout;
  #lines: string[] = [];
  #length = 0;

  constructor(writer: Writer, fd: number) {
    super();
    this.#writer = writer;
    this.#fd = fd;
    writer.on('error', (err: unknown) => this.emit('error', err));
    this.#timer = setInterval(() => this.#handOver(), LOG_FLUSH_INTERVAL_MS).unref();
    open.add(this);
    if (!exitHooked) {
      exitHooked = true;
      // pino's own exit hook, added before this one, has written what the writer held by then.
      process.once('exit', () => {
        for (const destination of open) destination.#writeSync();
      });
    }
  }

  write(line: string): boolean {
    this.#lines.push(line);
    this.#length += line.length;
    if (this.#length >= LOG_BATCH_BYTES) this.#handOver();
    return true;
  }

  /** Hands what waits to the writer, which writes it (and calls `callback`) asynchronously. */
  flush(callback?: (err?: Error) => void): void {
    this.#handOver();
    if (callback === undefined) this.#writer.flush();
    else this.#writer.flush(callback);
  }

  /** Writes everything that waits, here and in the writer, before returning. */
  flushSync(): void {
    this.#handOver();
    this.#writer.flushSync();
  }

  /** Stops the timer and closes the writer; lines still waiting are lost. */
  destroy(): void {
    clearInterval(this.#timer);
    open.delete(this);
    this.#lines = [];
    this.#length = 0;
    this.#writer.destroy();
  }

  #handOver(): void {
    if (this.#length === 0) return;
    const batch = this.#lines.join('');
    this.#lines = [];
    this.#length = 0;
    this.#writer.write(batch);
  }

  // At exit the writer cannot write asynchronously any more: the lines still here go straight to the descriptor.
  #writeSync(): void {
    if (this.#length === 0) return;
    let rest = Buffer.from(this.#lines.join(''));
    this.#lines = [];
    this.#length = 0;
    for (let attempts = 0; rest.length > 0 && attempts < 100; attempts++) {
      try {
        rest = rest.subarray(writeSync(this.#fd, rest));
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') return;
      }
    }
  }
}

/**
 * A file descriptor (standard output by default) as a buffered log destination whose failures
 * cannot end the process: lines are written in batches, off the event loop, and what is left is
 * written when the process exits (see `BatchedDestination`). pino's own destination swallows
 * EPIPE (the reader went away) and re-emits any other write error (ENOSPC, EIO...) as an
 * 'error' event, which with no listener throws. Here a line that cannot be written is lost, the
 * next line tries again, and what waits meanwhile is bounded.
 */
export function logDestination(fd = 1): BatchedDestination {
  // minLength 1 writes as soon as anything waits, as 0 would, but makes flush(callback) wait for the writes.
  const writer = pino.destination({ dest: fd, sync: false, minLength: 1, maxLength: MAX_BUFFERED_BYTES });
  const destination = new BatchedDestination(writer, fd);
  destination.on('error', () => {});
  return destination;
}
