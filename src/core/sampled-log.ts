import type { BaseLogger } from 'pino';

/** The interval over which lines are sampled, by default. */
export const SAMPLE_INTERVAL_MS = 10_000;

export interface SampledOptions {
  /** Lines written per key and interval before the rest are only counted (default 100). */
  perInterval?: number;
  /** The interval, ms (default 10 s). */
  intervalMs?: number;
  /** The clock, epoch ms (tests move it). */
  now?: () => number;
}

/**
 * Log lines of one kind (the audit line of a refused call), sampled under a flood: per key (an
 * error code) the first `perInterval` lines of each interval are written as they are, the rest
 * only counted, and one warning per interval says how many of each key were left out. A flood of
 * refused requests then costs the log a bounded amount (100 s of 401s had written 81 MB), while
 * the lines of other keys (a real caller's 403) are not crowded out. What is counted elsewhere
 * (the metrics) still counts every line.
 */
export class SampledLog {
  readonly #log: Pick<BaseLogger, 'info' | 'warn'>;
  readonly #summary: string;
  readonly #perInterval: number;
  readonly #intervalMs: number;
  readonly #now: () => number;
  #started = -Infinity;
  #written = new Map<string, number>();
  #leftOut = new Map<string, number>();
  #timer: NodeJS.Timeout | undefined;

  /** `summary`: the message of the line that says how many were left out. */
  constructor(log: Pick<BaseLogger, 'info' | 'warn'>, summary: string, options: SampledOptions = {}) {
    this.#log = log;
    this.#summary = summary;
    this.#perInterval = options.perInterval ?? 100;
    this.#intervalMs = options.intervalMs ?? SAMPLE_INTERVAL_MS;
    this.#now = options.now ?? Date.now;
  }

  /** Writes `fields` and `msg` at info level, unless this key's lines of the interval are spent. */
  info(key: string, fields: Record<string, unknown>, msg: string): void {
    const now = this.#now();
    if (now - this.#started >= this.#intervalMs) {
      this.flush();
      this.#started = now;
    }
    const written = this.#written.get(key) ?? 0;
    if (written < this.#perInterval) {
      this.#written.set(key, written + 1);
      this.#log.info(fields, msg);
      return;
    }
    this.#leftOut.set(key, (this.#leftOut.get(key) ?? 0) + 1);
    // Said at the end of the interval even when nothing comes after the flood; never keeps the process alive.
    if (this.#timer === undefined) {
      this.#timer = setTimeout(() => this.flush(), Math.max(0, this.#started + this.#intervalMs - now));
      this.#timer.unref();
    }
  }

  /** Writes the count of the lines left out since the last one, if any, and starts counting anew. */
  flush(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#leftOut.size > 0) {
      this.#log.warn({ leftOut: Object.fromEntries(this.#leftOut), intervalMs: this.#intervalMs, perInterval: this.#perInterval }, this.#summary);
    }
    this.#written = new Map();
    this.#leftOut = new Map();
    this.#started = this.#now();
  }
}
