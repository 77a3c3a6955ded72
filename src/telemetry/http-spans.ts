import { FastifyOtelInstrumentation } from '@fastify/otel';
import type { TracerProvider } from '@opentelemetry/api';
import type { FastifyInstance, FastifyPluginAsync } from 'fastify';

const UNTRACED: ReadonlySet<string> = new Set(['/healthz', '/readyz', '/metrics']);

function pathOf(url: string): string {
  const query = url.indexOf('?');
  return query === -1 ? url : url.slice(0, query);
}

/**
 * The HTTP side of tracing: @fastify/otel's server span per request, continued from the request's
 * traceparent, tracestate and baggage, inside which the call spans open. Its spans per hook and
 * for the handler are left off (six spans a request would cost more than the call's own), so
 * the guards are told as one event instead: `credentials checked`, once the key or token check,
 * the rate limit (its Redis round trip included) and the overload guard let the request through,
 * with the caller's label. Refusals by the guards are spans of their own (the gateway's `refused`).
 */
export function httpTracing(provider: TracerProvider): () => FastifyPluginAsync {
  const instrumentation = new FastifyOtelInstrumentation({
    instrumentHooks: false,
    // The call's own span is the handler's work; a handler span between it and the request's is one more span a call pays for.
    instrumentHandler: false,
    // Probes and the scraper ask every few seconds: a trace each would bury the calls.
    ignorePaths: ({ url }) => UNTRACED.has(pathOf(url)),
    // The HTTP conventions' name, `{method} {route}`, rather than the instrumentation's `request`.
    requestHook: (span, request) => span.updateName(request.routeOptions.url === undefined ? request.method : `${request.method} ${request.routeOptions.url}`),
  });
  instrumentation.setTracerProvider(provider);
  return () => {
    const otel = instrumentation.plugin();
    const plugin: FastifyPluginAsync = async (app: FastifyInstance) => {
      // The instrumentation wraps every hook added after it, to make its span, in a function that
      // asks five questions of each request before it sees that hook spans are off: the app's
      // hooks are added as they were.
      const addHook = app.addHook;
      await app.register(otel);
      app.addHook = addHook;
      app.addHook('preHandler', (request, _reply, done) => {
        const span = request.opentelemetry().span ?? undefined;
        if (span?.isRecording() === true) {
          const label = (request as { principal?: { label?: string } }).principal?.label;
          span.addEvent('credentials checked', label === undefined ? {} : { 'toolport.caller': label });
        }
        done();
      });
    };
    // Its hooks apply to the whole app, not to a context of its own.
    Object.assign(plugin, { [Symbol.for('skip-override')]: true });
    return plugin;
  };
}
