import type { FastifyInstance } from 'fastify';
import { Counter, Gauge, Registry, type Metric } from 'prom-client';
import { CALL_OUTCOMES, type CallOutcome } from '../core/executor.js';
import type { BackgroundWork } from '../core/background.js';
import type { GatewayObserver } from '../core/gateway.js';
import type { UpstreamStates } from './routes/health.js';

/** Seconds; tools range from a file read (milliseconds) to a long command (minutes). */
const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];

/**
 * The transport label of calls made on the executor itself, not through the gateway. The others
 * are the adapters': `rest` (`POST /tools/<name>`), `calls` (`POST /calls`), `mcp` (`POST /mcp`)
 * and `stdio` (`toolport mcp`).
 */
const DIRECT_TRANSPORT = 'direct';

/** The call metrics of one tool, as plain numbers: prom-client reads them only when scraped. */
interface ToolSeries {
  /** Calls by transport, then outcome. */
  calls: Map<string, Map<CallOutcome, { count: number }>>;
  /** Calls per duration bucket (not cumulative; the last one past the largest bound), their sum and count. */
  buckets: number[];
  seconds: number;
  finished: number;
  running: number;
  waiting: number;
}

/**
 * The service's Prometheus metrics, in a registry of its own (so many apps in one process never
 * collide), and the observer that feeds the call metrics from the pipeline. A call's metrics are
 * a few additions to plain numbers, turned into prom-client's series when `/metrics` is scraped:
 * prom-client hashes the labels of every update, which took 0.55 us per call (2% of a call).
 */
export class ServiceMetrics {
  readonly registry = new Registry();
  readonly #tools = new Map<string, ToolSeries>();
  readonly #rejected = new Counter({
    name: 'toolport_rejected_calls_total',
    help: 'Tool calls refused before they ran, by error code in lower case (invalid_input, queue_full, rate_limited, ...) and transport (rest, calls, mcp, stdio, direct).',
    labelNames: ['reason', 'transport'] as const,
    registers: [this.registry],
  });
  /** Requests whose rate-limit count Redis could not keep (down, unreachable, too slow), counted in the process instead. */
  readonly rateLimitStoreErrors = new Counter({
    name: 'toolport_rate_limit_store_errors_total',
    help: 'Requests whose rate-limit count could not be kept in Redis (TOOLPORT_REDIS_URL: down, unreachable or too slow) and was kept by this process alone.',
    registers: [this.registry],
  });
  // By transport, then code.
  readonly #reasons = new Map<string, Map<string, Counter.Internal>>();
  readonly #transports: string[];

  /**
   * Starts every series of these tools at zero, for each of these transports (the ones the server
   * serves), so rates and alerts work from the first scrape. Other transports get theirs when first seen.
   */
  constructor(tools: readonly string[] = [], transports: readonly string[] = ['rest']) {
    this.#transports = [...transports];
    for (const tool of tools) this.#series(tool);
    const series = this.#tools;
    new Counter({
      name: 'toolport_tool_calls_total',
      help: 'Tool calls that were admitted, by tool, outcome (ok, tool_error, threw, malformed, timeout, aborted) and transport (rest, calls, mcp, stdio, direct).',
      labelNames: ['tool', 'outcome', 'transport'] as const,
      registers: [this.registry],
      collect() {
        this.reset();
        for (const [tool, { calls }] of series) {
          for (const [transport, outcomes] of calls) for (const [outcome, { count }] of outcomes) this.inc({ tool, outcome, transport }, count);
        }
      },
    });
    this.registry.registerMetric(durationHistogram(series) as unknown as Metric);
    new Gauge({
      name: 'toolport_tool_calls_in_flight',
      help: 'Calls of a tool holding a concurrency slot.',
      labelNames: ['tool'] as const,
      registers: [this.registry],
      collect() {
        for (const [tool, { running }] of series) this.set({ tool }, running);
      },
    });
    new Gauge({
      name: 'toolport_tool_queue_depth',
      help: 'Calls of a tool waiting for a concurrency slot.',
      labelNames: ['tool'] as const,
      registers: [this.registry],
      collect() {
        for (const [tool, { waiting }] of series) this.set({ tool }, waiting);
      },
    });
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

  /**
   * Starts every tool's series at zero for these transports too: an adapter names the transports
   * it serves when it is installed, so rates and alerts work from the first scrape.
   */
  serveTransports(transports: readonly string[]): void {
    for (const transport of transports) {
      if (this.#transports.includes(transport)) continue;
      this.#transports.push(transport);
      for (const series of this.#tools.values()) if (!series.calls.has(transport)) this.#outcomes(series, transport);
    }
  }

  /** How many background tasks (Bash's `run_in_background`) run, read at each scrape. */
  watchTasks(tasks: Pick<BackgroundWork, 'running'>): void {
    new Gauge({
      name: 'toolport_background_tasks_running',
      help: "Bash's background tasks running now, of every caller.",
      registers: [this.registry],
      collect() {
        this.set(tasks.running);
      },
    });
  }

  /** How many tool calls run as tasks (`Prefer: respond-async`, MCP's tasks) are working, read at each scrape. */
  watchCallTasks(tasks: { readonly running: number }): void {
    new Gauge({
      name: 'toolport_call_tasks_working',
      help: 'Tool calls run as tasks (REST respond-async, MCP tasks) working now, of every caller.',
      registers: [this.registry],
      collect() {
        this.set(tasks.running);
      },
    });
  }

  /**
   * The upstream MCP servers' metrics: each one's state, restarts and tools, and the calls of its
   * tools by outcome (summed from the tools' own series at each scrape, so the call path pays nothing).
   */
  watchUpstreams(upstreams: UpstreamStates, sourceOf: (tool: string) => string | undefined): void {
    const series = this.#tools;
    // Remembered: a tool the upstream no longer lists keeps its calls in the count, which never goes down.
    const upstreamOf = new Map<string, string>();
    new Gauge({
      name: 'toolport_upstream_up',
      help: 'Whether an upstream MCP server is connected and serving (1) or not (0: starting, down and being restarted, not started yet, stopped).',
      labelNames: ['upstream', 'state'] as const,
      registers: [this.registry],
      collect() {
        this.reset();
        for (const [upstream, { state }] of Object.entries(upstreams.status())) this.set({ upstream, state }, state === 'ready' ? 1 : 0);
      },
    });
    new Counter({
      name: 'toolport_upstream_restarts_total',
      help: 'Restarts of an upstream MCP server after it exited, its connection dropped or it could not be reached.',
      labelNames: ['upstream'] as const,
      registers: [this.registry],
      collect() {
        this.reset();
        for (const [upstream, { restarts }] of Object.entries(upstreams.status())) this.inc({ upstream }, restarts);
      },
    });
    new Gauge({
      name: 'toolport_upstream_tools',
      help: 'Tools of an upstream MCP server: served, or held (changed or new under the lock file, or refused by a rule).',
      labelNames: ['upstream', 'status'] as const,
      registers: [this.registry],
      collect() {
        for (const [upstream, { tools, held }] of Object.entries(upstreams.status())) {
          this.set({ upstream, status: 'served' }, tools);
          this.set({ upstream, status: 'held' }, held);
        }
      },
    });
    new Counter({
      name: 'toolport_upstream_calls_total',
      help: "Calls of an upstream MCP server's tools that were admitted, by upstream and outcome (ok, tool_error, threw, malformed, timeout, aborted).",
      labelNames: ['upstream', 'outcome'] as const,
      registers: [this.registry],
      collect() {
        this.reset();
        for (const upstream of Object.keys(upstreams.status())) for (const outcome of CALL_OUTCOMES) this.inc({ upstream, outcome }, 0);
        for (const [tool, { calls }] of series) {
          const source = sourceOf(tool);
          if (source !== undefined && source !== '') upstreamOf.set(tool, source);
          const upstream = upstreamOf.get(tool);
          if (upstream === undefined) continue;
          for (const outcomes of calls.values()) for (const [outcome, { count }] of outcomes) this.inc({ upstream, outcome }, count);
        }
      },
    });
  }

  /** The observer to hand to the `Gateway`. */
  readonly observer: GatewayObserver = {
    loadChanged: (tool, running, waiting) => {
      const series = this.#series(tool);
      series.running = running;
      series.waiting = waiting;
    },
    callFinished: (tool, outcome, seconds, transport = DIRECT_TRANSPORT) => {
      const series = this.#series(tool);
      const cell = (series.calls.get(transport) ?? this.#outcomes(series, transport)).get(outcome);
      if (cell !== undefined) cell.count++;
      if (seconds !== undefined) {
        let bucket = 0;
        while (bucket < DURATION_BUCKETS.length && seconds > DURATION_BUCKETS[bucket]!) bucket++;
        series.buckets[bucket]!++;
        series.seconds += seconds;
        series.finished++;
      }
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

  /** The call counts of a tool for a transport, made (at zero) the first time. */
  #outcomes(series: ToolSeries, transport: string): Map<CallOutcome, { count: number }> {
    const counts = new Map(CALL_OUTCOMES.map((outcome) => [outcome, { count: 0 }]));
    series.calls.set(transport, counts);
    return counts;
  }

  #series(tool: string): ToolSeries {
    let series = this.#tools.get(tool);
    if (series === undefined) {
      series = { calls: new Map(), buckets: new Array<number>(DURATION_BUCKETS.length + 1).fill(0), seconds: 0, finished: 0, running: 0, waiting: 0 };
      for (const transport of this.#transports) this.#outcomes(series, transport);
      this.#tools.set(tool, series);
    }
    return series;
  }
}

/**
 * `toolport_tool_call_duration_seconds` by tool, as prom-client's registry reads a metric: its
 * series made from the counts when scraped, in the shape prom-client's own Histogram gives them.
 */
function durationHistogram(series: ReadonlyMap<string, ToolSeries>) {
  const name = 'toolport_tool_call_duration_seconds';
  const help = 'How long tools ran, from start to answer (time spent waiting for a slot excluded).';
  const metric = {
    name,
    help,
    type: 'histogram',
    aggregator: 'sum',
    get: () => {
      const values: { labels: Record<string, string | number>; value: number; metricName: string }[] = [];
      for (const [tool, { buckets, seconds, finished }] of series) {
        let cumulative = 0;
        DURATION_BUCKETS.forEach((le, i) => {
          cumulative += buckets[i]!;
          values.push({ labels: { le, tool }, value: cumulative, metricName: `${name}_bucket` });
        });
        values.push({ labels: { le: '+Inf', tool }, value: finished, metricName: `${name}_bucket` });
        values.push({ labels: { tool }, value: seconds, metricName: `${name}_sum` });
        values.push({ labels: { tool }, value: finished, metricName: `${name}_count` });
      }
      return Promise.resolve({ name, help, type: metric.type, values, aggregator: metric.aggregator });
    },
    reset: () => {},
  };
  return metric;
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
