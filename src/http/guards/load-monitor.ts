import { monitorEventLoopDelay } from 'node:perf_hooks';
import { getHeapStatistics } from 'node:v8';
import type { BaseLogger } from 'pino';

type Log = Pick<BaseLogger, 'warn' | 'error'>;

/** When the process counts as overloaded; a threshold of 0 switches that check off. */
export interface LoadThresholds {
  /** Mean event-loop delay over the last sample, in ms. */
  maxEventLoopDelayMs: number;
  /** V8 heap in use, in bytes. */
  maxHeapUsedBytes: number;
  /** Resident memory, in bytes. */
  maxRssBytes: number;
  /** An extra check, run every `healthCheckIntervalMs`; false (or a throw) means overloaded. */
  healthCheck?: () => boolean | Promise<boolean>;
  healthCheckIntervalMs: number;
  /** How often to sample (default 1000 ms). */
  sampleIntervalMs?: number;
}

const DEFAULT_SAMPLE_INTERVAL_MS = 1_000;
// The delay histogram's resolution, taken off its mean: a sample is late by up to this much anyway.
const RESOLUTION_MS = 10;

/**
 * Samples event-loop delay, heap and resident memory (once a second), in a timer that never throws.
 * (`@fastify/under-pressure`, which did this before, calls `process.memoryUsage()`, which opens
 * /proc/self/stat and throws EMFILE when descriptors run out, from a timer: the process died.)
 * The heap comes from V8, which needs no descriptor; resident memory is read only when it has a
 * threshold, and a failed read keeps the last value. A failed sample is logged once per run of failures.
 */
export class LoadMonitor {
  readonly #thresholds: LoadThresholds;
  readonly #log: Log;
  readonly #histogram = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
  readonly #timers: NodeJS.Timeout[] = [];
  #eventLoopDelayMs = 0;
  #heapUsed = 0;
  #rss = 0;
  #healthy = true;
  #failing = false;
  #stopped = false;

  private constructor(thresholds: LoadThresholds, log: Log) {
    this.#thresholds = thresholds;
    this.#log = log;
  }

  /** Starts sampling; resolves after the first health check, so the first request already knows its answer. */
  static async start(thresholds: LoadThresholds, log: Log): Promise<LoadMonitor> {
    const monitor = new LoadMonitor(thresholds, log);
    monitor.#histogram.enable();
    monitor.#every(thresholds.sampleIntervalMs ?? DEFAULT_SAMPLE_INTERVAL_MS, () => monitor.#sample());
    const { healthCheck } = thresholds;
    if (healthCheck) {
      await monitor.#check(healthCheck);
      monitor.#every(thresholds.healthCheckIntervalMs, () => monitor.#check(healthCheck));
    }
    return monitor;
  }

  get overloaded(): boolean {
    const t = this.#thresholds;
    return (
      !this.#healthy ||
      (t.maxEventLoopDelayMs > 0 && this.#eventLoopDelayMs > t.maxEventLoopDelayMs) ||
      (t.maxHeapUsedBytes > 0 && this.#heapUsed > t.maxHeapUsedBytes) ||
      (t.maxRssBytes > 0 && this.#rss > t.maxRssBytes)
    );
  }

  stop(): void {
    this.#stopped = true;
    for (const timer of this.#timers) clearTimeout(timer);
    this.#histogram.disable();
  }

  /** Runs `task` every `ms`, the next run timed from the end of the last; never keeps the process alive. */
  #every(ms: number, task: () => void | Promise<void>): void {
    const timer = setTimeout(async () => {
      await task();
      if (!this.#stopped) timer.refresh();
    }, ms).unref();
    this.#timers.push(timer);
  }

  #sample(): void {
    try {
      const mean = this.#histogram.mean / 1e6;
      // No sample in the whole interval (NaN) means the loop never got to run: as late as can be.
      this.#eventLoopDelayMs = Number.isNaN(mean) ? Infinity : Math.max(0, mean - RESOLUTION_MS);
      this.#histogram.reset();
      this.#heapUsed = getHeapStatistics().used_heap_size;
      if (this.#thresholds.maxRssBytes > 0) this.#rss = process.memoryUsage.rss();
      this.#failing = false;
    } catch (err) {
      if (!this.#failing) this.#log.warn({ err }, 'load sample failed; keeping the last values');
      this.#failing = true;
    }
  }

  async #check(healthCheck: () => boolean | Promise<boolean>): Promise<void> {
    try {
      this.#healthy = (await healthCheck()) === true;
    } catch (err) {
      this.#healthy = false;
      this.#log.error({ err }, 'health check threw; counting the server as overloaded');
    }
  }
}
