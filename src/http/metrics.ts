import type { FastifyInstance } from 'fastify';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { CALL_OUTCOMES, type CallObserver, type CallOutcome } from '../core/executor.js';
import { sentErrorCode } from './error-handler.js';

/** Seconds; tools range from a file read (milliseconds) to a long command (minutes). */
const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];

interface ToolSeries {
  calls: Map<CallOutcome, Counter.Internal>;
  duration: Histogram.Internal<'tool'>;
  inFlight: Gauge.Internal<'tool'>;
  queueDepth: Gauge.Internal<'tool'>;
  /** The values last written to the two gauges. */
  running: number;
  waiting: number;
}

/**
 * The service's Prometheus metrics, in a registry of its own (so many apps in one process never
 * collide), and the observer that feeds the call metrics from the pipeline. Per-call work is a
 * map lookup and a few additions: the labelled series of every tool are made once and cached.
 */
export class ServiceMetrics {
  readonly registry = new Registry();
  readonly #calls = new Counter({
    name: 'toolport_tool_calls_total',
    help: 'Tool calls that were admitted, by tool and outcome (ok, tool_error, threw, malformed, timeout, aborted).',
    labelNames: ['tool', 'outcome'] as const,
    registers: [this.registry],
  });
  readonly #duration = new Histogram({
    name: 'toolport_tool_call_duration_seconds',
    help: 'How long tools ran, from start to answer (time spent waiting for a slot excluded).',
    labelNames: ['tool'] as const,
    buckets: DURATION_BUCKETS,
    registers: [this.registry],
  });
  readonly #inFlight = new Gauge({
    name: 'toolport_tool_calls_in_flight',
    help: 'Calls of a tool holding a concurrency slot.',
    labelNames: ['tool'] as const,
    registers: [this.registry],
  });
  readonly #queueDepth = new Gauge({
    name: 'toolport_tool_queue_depth',
    help: 'Calls of a tool waiting for a concurrency slot.',
    labelNames: ['tool'] as const,
    registers: [this.registry],
  });
  readonly #rejected = new Counter({
    name: 'toolport_rejected_calls_total',
    help: 'Tool call requests answered with an error response, by error code in lower case (invalid_input, queue_full, rate_limited, ...).',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });
  readonly #tools = new Map<string, ToolSeries>();
  readonly #reasons = new Map<string, Counter.Internal>();

  /** Starts every series of these tools at zero, so rates and alerts work from the first scrape. */
  constructor(tools: readonly string[] = []) {
    for (const tool of tools) this.#series(tool);
    new Gauge({
      name: 'process_resident_memory_bytes',
      help: 'Resident memory size in bytes.',
      registers: [this.registry],
      collect() {
        this.set(process.memoryUsage.rss());
      },
    });
    new Gauge({
      name: 'nodejs_heap_size_used_bytes',
      help: 'V8 heap used in bytes.',
      registers: [this.registry],
      collect() {
        this.set(process.memoryUsage().heapUsed);
      },
    });
    new Counter({
      name: 'process_cpu_seconds_total',
      help: 'User and system CPU time spent, in seconds.',
      registers: [this.registry],
      collect() {
        const { user, system } = process.cpuUsage();
        this.reset();
        this.inc((user + system) / 1e6);
      },
    });
  }

  /** The observer to hand to the `ToolExecutor`. */
  readonly observer: CallObserver = {
    loadChanged: (tool, running, waiting) => {
      const series = this.#series(tool);
      // Usually only one of the two changed; a prom-client set hashes its labels, so skip the other.
      if (series.running !== running) series.inFlight.set((series.running = running));
      if (series.waiting !== waiting) series.queueDepth.set((series.waiting = waiting));
    },
    callFinished: (tool, outcome, seconds) => {
      const series = this.#series(tool);
      series.calls.get(outcome)?.inc();
      if (seconds !== undefined) series.duration.observe(seconds);
    },
  };

  /** Counts one refused tool call request by its error code. */
  rejected(code: string): void {
    let counter = this.#reasons.get(code);
    if (counter === undefined) {
      counter = this.#rejected.labels(code.toLowerCase());
      this.#reasons.set(code, counter);
    }
    counter.inc();
  }

  #series(tool: string): ToolSeries {
    let series = this.#tools.get(tool);
    if (series === undefined) {
      series = {
        calls: new Map(CALL_OUTCOMES.map((outcome) => [outcome, this.#calls.labels(tool, outcome)])),
        duration: this.#duration.labels(tool),
        inFlight: this.#inFlight.labels(tool),
        queueDepth: this.#queueDepth.labels(tool),
        running: 0,
        waiting: 0,
      };
      // A labelled child is only written out once it has a value.
      for (const counter of series.calls.values()) counter.inc(0);
      this.#duration.zero({ tool });
      series.inFlight.set(0);
      series.queueDepth.set(0);
      this.#tools.set(tool, series);
    }
    return series;
  }
}

/**
 * Serves the metrics at `GET /metrics` in the Prometheus text format (left out of the OpenAPI
 * document: it is for the operator's scraper, not for agents), and counts every error response to
 * a tool call (`POST /tools/...`) by its error code, whichever stage refused it.
 */
export function installMetrics(app: FastifyInstance, metrics: ServiceMetrics): void {
  // A callback hook, not an async one: it runs on every request and should not cost a promise.
  app.addHook('onResponse', (request, reply, done) => {
    if (reply.statusCode >= 400 && request.method === 'POST' && request.url.startsWith('/tools/')) {
      metrics.rejected(sentErrorCode(reply) ?? `http_${reply.statusCode}`);
    }
    done();
  });

  app.get('/metrics', { schema: { hide: true } }, async (_request, reply) => {
    const text = await metrics.registry.metrics();
    return reply.type(metrics.registry.contentType).send(text);
  });
}
