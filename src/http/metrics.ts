import type { FastifyInstance } from 'fastify';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { CALL_OUTCOMES, type CallOutcome } from '../core/executor.js';
import type { GatewayObserver } from '../core/gateway.js';

/** Seconds; tools range from a file read (milliseconds) to a long command (minutes). */
const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];

/** The transport label of calls made on the executor itself, not through the gateway. */
export const DIRECT_TRANSPORT = 'direct';

interface ToolSeries {
  /** By transport, then outcome. */
  calls: Map<string, Map<CallOutcome, Counter.Internal>>;
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
    help: 'Tool calls that were admitted, by tool, outcome (ok, tool_error, threw, malformed, timeout, aborted) and transport (rest, mcp, ...).',
    labelNames: ['tool', 'outcome', 'transport'] as const,
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
    help: 'Tool calls refused before they ran, by error code in lower case (invalid_input, queue_full, rate_limited, ...) and transport (rest, mcp, ...).',
    labelNames: ['reason', 'transport'] as const,
    registers: [this.registry],
  });
  /** Requests whose rate-limit count Redis could not keep (down, unreachable, too slow), counted in the process instead. */
  readonly rateLimitStoreErrors = new Counter({
    name: 'toolport_rate_limit_store_errors_total',
    help: 'Requests whose rate-limit count could not be kept in Redis (TOOLPORT_REDIS_URL: down, unreachable or too slow) and was kept by this process alone.',
    registers: [this.registry],
  });
  readonly #tools = new Map<string, ToolSeries>();
  // By transport, then code.
  readonly #reasons = new Map<string, Map<string, Counter.Internal>>();
  readonly #transports: readonly string[];

  /**
   * Starts every series of these tools at zero, for each of these transports (the ones the server
   * serves), so rates and alerts work from the first scrape. Other transports get theirs when first seen.
   */
  constructor(tools: readonly string[] = [], transports: readonly string[] = ['rest']) {
    this.#transports = transports;
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

  /** The observer to hand to the `Gateway`. */
  readonly observer: GatewayObserver = {
    loadChanged: (tool, running, waiting) => {
      const series = this.#series(tool);
      // Usually only one of the two changed; a prom-client set hashes its labels, so skip the other.
      if (series.running !== running) series.inFlight.set((series.running = running));
      if (series.waiting !== waiting) series.queueDepth.set((series.waiting = waiting));
    },
    callFinished: (tool, outcome, seconds, transport = DIRECT_TRANSPORT) => {
      const series = this.#series(tool);
      (series.calls.get(transport) ?? this.#outcomes(tool, series, transport)).get(outcome)?.inc();
      if (seconds !== undefined) series.duration.observe(seconds);
    },
    callRefused: (code, transport) => this.rejected(code, transport),
  };

  /** Counts one refused tool call by its error code and transport. */
  rejected(code: string, transport: string = DIRECT_TRANSPORT): void {
    let byCode = this.#reasons.get(transport);
    if (byCode === undefined) this.#reasons.set(transport, (byCode = new Map()));
    let counter = byCode.get(code);
    if (counter === undefined) {
      counter = this.#rejected.labels(code.toLowerCase(), transport);
      byCode.set(code, counter);
    }
    counter.inc();
  }

  /** The call counters of a tool for a transport, made (at zero) the first time. */
  #outcomes(tool: string, series: ToolSeries, transport: string): Map<CallOutcome, Counter.Internal> {
    const counters = new Map(CALL_OUTCOMES.map((outcome) => [outcome, this.#calls.labels(tool, outcome, transport)]));
    // A labelled child is only written out once it has a value.
    for (const counter of counters.values()) counter.inc(0);
    series.calls.set(transport, counters);
    return counters;
  }

  #series(tool: string): ToolSeries {
    let series = this.#tools.get(tool);
    if (series === undefined) {
      series = {
        calls: new Map(),
        duration: this.#duration.labels(tool),
        inFlight: this.#inFlight.labels(tool),
        queueDepth: this.#queueDepth.labels(tool),
        running: 0,
        waiting: 0,
      };
      for (const transport of this.#transports) this.#outcomes(tool, series, transport);
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
 * document: it is for the operator's scraper, not for agents). The calls, run or refused, are
 * counted through the gateway's observer, whichever transport and stage they came through.
 */
export function installMetrics(app: FastifyInstance, metrics: ServiceMetrics): void {
  app.get('/metrics', { schema: { hide: true } }, async (_request, reply) => {
    const text = await metrics.registry.metrics();
    return reply.type(metrics.registry.contentType).send(text);
  });
}
