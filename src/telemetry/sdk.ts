import { context, propagation, SpanKind, SpanStatusCode, trace, TraceFlags, type Span, type Tracer } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from '@opentelemetry/core';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ConsoleSpanExporter,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  TracerProvider,
  type Sampler,
  type SpanExporter,
} from '@opentelemetry/sdk-trace';
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from '@opentelemetry/semantic-conventions';
import { UndiciInstrumentation } from '@opentelemetry/instrumentation-undici';
import type { FastifyPluginAsync } from 'fastify';
import type { Logger } from 'pino';
import type { TracingSettings, TraceSampler } from '../config/sections/traces.js';
import type { RoundTrip } from '../core/tracer.js';
import { setTraceFields } from '../infra/log-trace.js';
import { VERSION } from '../infra/version.js';
import { OpenTelemetryCallTracer } from './call-spans.js';
import { httpTracing } from './http-spans.js';

// Loaded only when tracing is on (openRuntime imports it then): a server without tracing loads no
// OpenTelemetry module at all.

/** Tracing as a process runs it: the gateway's tracer, the HTTP app's plugin, and the exporter to flush at exit. */
export interface Tracing {
  readonly tracer: OpenTelemetryCallTracer;
  /** The Fastify instrumentation (@fastify/otel): a server span per request, continued from its traceparent. */
  fastifyPlugin(): FastifyPluginAsync;
  /** A client span around a round trip to another service (Redis), in the current trace. */
  readonly roundTrip: RoundTrip;
  /** Sends the spans still buffered. */
  flush(): Promise<void>;
  /** Flushes, then stops exporting. */
  shutdown(): Promise<void>;
}

let globalsSet = false;

/** The context manager and propagators are the process's; set once, whatever number of runtimes it opens. */
function setGlobals(): void {
  if (globalsSet) return;
  globalsSet = true;
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new CompositePropagator({ propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()] }));
}

function samplerOf(name: TraceSampler, ratio: number): Sampler {
  switch (name) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(ratio);
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio) });
  }
}

async function exporterOf(settings: TracingSettings): Promise<SpanExporter> {
  if (settings.exporter === 'console') return new ConsoleSpanExporter();
  const options = { url: settings.endpoint, headers: settings.headers };
  if (settings.protocol === 'http/json') return new (await import('@opentelemetry/exporter-trace-otlp-http')).OTLPTraceExporter(options);
  return new (await import('@opentelemetry/exporter-trace-otlp-proto')).OTLPTraceExporter(options);
}

/** Undici's requests that already carry a trace context (an upstream call's, sent from its client span) get no second span. */
function carriesTraceparent(headers: string | (string | string[])[]): boolean {
  if (typeof headers === 'string') return /(^|\r\n)traceparent:/i.test(headers);
  for (let i = 0; i < headers.length; i += 2) if (String(headers[i]).toLowerCase() === 'traceparent') return true;
  return false;
}

/** Round trips as client spans of the active trace; a rejection records its error's name as `error.type`. */
function clientSpans(tracer: Tracer): RoundTrip {
  return async (name, attributes, run) => {
    const span = tracer.startSpan(name, { kind: SpanKind.CLIENT, attributes });
    try {
      return await context.with(trace.setSpan(context.active(), span), run);
    } catch (err) {
      span.setAttribute('error.type', err instanceof Error ? err.name : 'error');
      span.setStatus({ code: SpanStatusCode.ERROR });
      throw err;
    } finally {
      span.end();
    }
  };
}

/**
 * Starts tracing from its settings: the tracer provider with its sampler, resource and batching
 * exporter, W3C trace context and baggage propagation, the log lines' trace_id and span_id, client
 * spans for the identity providers' HTTP round trips (undici), and the Fastify instrumentation.
 */
export async function openTracing(settings: TracingSettings, logger: Logger): Promise<Tracing> {
  setGlobals();
  const resource = resourceFromAttributes({ ...settings.resourceAttributes, [ATTR_SERVICE_NAME]: settings.serviceName, [ATTR_SERVICE_VERSION]: VERSION });
  const exporter = await exporterOf(settings);
  const provider = new TracerProvider({
    resource,
    sampler: samplerOf(settings.sampler, settings.ratio),
    spanProcessors: [new BatchSpanProcessor({ exporter, scheduledDelayMillis: settings.batchDelayMs })],
  });
  const undici = new UndiciInstrumentation({ ignoreRequestHook: (request) => carriesTraceparent(request.headers) });
  undici.setTracerProvider(provider);
  const fastifyPlugin = httpTracing(provider);
  setTraceFields(() => {
    const span: Span | undefined = trace.getActiveSpan();
    const ids = span?.spanContext();
    // A sampled trace's only: the ids of one that was not lead to no trace, and each line would carry them.
    return ids === undefined || (ids.traceFlags & TraceFlags.SAMPLED) === 0 ? undefined : { trace_id: ids.traceId, span_id: ids.spanId };
  });
  logger.info({ exporter: settings.exporter, protocol: settings.protocol, sampler: settings.sampler, serviceName: settings.serviceName }, 'tracing on');
  return {
    tracer: new OpenTelemetryCallTracer(provider.getTracer('toolport', VERSION), { followsUnsampled: settings.sampler !== 'always_on' }),
    fastifyPlugin,
    roundTrip: clientSpans(provider.getTracer('toolport', VERSION)),
    flush: () => provider.forceFlush().catch((err: unknown) => logger.warn({ err }, 'spans left unsent')),
    async shutdown() {
      undici.disable();
      setTraceFields(undefined);
      // A collector that cannot be reached must not stop the process from closing.
      await provider.shutdown().catch((err: unknown) => logger.warn({ err }, 'spans left unsent at shutdown'));
    },
  };
}
