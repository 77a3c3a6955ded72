import { getHeapStatistics } from 'node:v8';
import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction, onRequestHookHandler } from 'fastify';
import type { Redis } from 'ioredis';
import { ToolportError } from '../../core/errors.js';
import { LoadMonitor } from './load-monitor.js';
import type { RoundTrip } from '../../core/tracer.js';
import { localRateLimitStore, sharedRateLimitStore, type RateLimitStore } from './rate-limit-store.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** Counts one more request against the rate limit of `request`'s caller; see `countAnotherCall`. */
    countRateLimited?: (request: FastifyRequest) => Promise<ToolportError | undefined>;
  }
}

/** When the process counts as overloaded; a threshold of 0 switches that check off. */
export interface PressureOptions {
  /** Mean event-loop delay over the last sample, in ms (default 1000). */
  maxEventLoopDelayMs?: number;
  /** V8 heap in use, in bytes (default 90% of the heap limit: shed load before V8 runs out). */
  maxHeapUsedBytes?: number;
  /** Resident memory, in bytes (default 0: off; a container's limit is the operator's to know). */
  maxRssBytes?: number;
  /** An extra check, run every `healthCheckIntervalMs` (default 1000); false means overloaded. */
  healthCheck?: () => boolean | Promise<boolean>;
  healthCheckIntervalMs?: number;
}

export interface ProtectionOptions {
  /** Requests per minute per key (or client address without keys); 0 switches the limit off (TOOLPORT_RATE_LIMIT). */
  rateLimit: number;
  /**
   * Keep the counts in this Redis, shared by every replica, instead of in the process, in at most one
   * command per request (`sharedRateLimitStore`: from 1,000 calls a minute, a few calls per replica
   * may pass the limit, `callsAheadOfRedis`); when it cannot answer, a request is counted in the process.
   */
  redis?: Redis | undefined;
  /** Called for each request Redis could not count. */
  onStoreError?: () => void;
  /** Traces each Redis command as a client span, while tracing is on. */
  roundTrip?: RoundTrip | undefined;
  /** Load shedding thresholds; false switches shedding off. */
  pressure?: PressureOptions | false;
}

export const DEFAULT_MAX_EVENT_LOOP_DELAY_MS = 1000;
/** Seconds a client is asked to wait after a 503 OVERLOADED. */
export const OVERLOADED_RETRY_AFTER_S = 5;
const RATE_WINDOW_MS = 60_000;

// Probes and the scraper must answer when the service is busiest: that is when they are needed.
// /readyz is shed, though: an overloaded instance is not ready for more calls.
const UNLIMITED_ROUTES = new Set(['/healthz', '/readyz', '/metrics']);
const UNSHED_ROUTES = new Set(['/healthz', '/metrics']);

/**
 * Rate limits per key and load shedding, both answering in the error-body shape. Call it after
 * the authentication hook is installed and before any route is registered: the rate limit runs as
 * a route-level `onRequest` hook, which Fastify runs after every app-level one, so `request.principal`
 * is known when the key is chosen and a refused request's body is never read.
 *
 * The limit is a fixed window per key (`key:<label>`, or `ip:<address>` for requests without
 * one), counted by a callback hook: in this process a count is a Map lookup and an addition, with
 * no promise (@fastify/rate-limit, which did this before, awaited three promises per request).
 * A request under the limit gets its `x-ratelimit-limit`, `-remaining` and `-reset` headers; one
 * over it, the same and a 429 RATE_LIMITED with Retry-After.
 */
export async function installProtection(app: FastifyInstance, options: ProtectionOptions): Promise<void> {
  if (options.pressure !== false) await installLoadShedding(app, options.pressure ?? {});
  if (options.rateLimit > 0) await installRateLimit(app, options.rateLimit, options);
}

async function installRateLimit(
  app: FastifyInstance,
  max: number,
  { redis, onStoreError, roundTrip }: Pick<ProtectionOptions, 'redis' | 'onStoreError' | 'roundTrip'>,
): Promise<void> {
  const store: RateLimitStore = redis
    ? sharedRateLimitStore({ redis, windowMs: RATE_WINDOW_MS, limit: max, log: app.log, onStoreError, roundTrip })
    : localRateLimitStore(RATE_WINDOW_MS);
  // Calls answered ahead of Redis reach it before the app (and the connection, closed after it) goes.
  app.addHook('onClose', async () => store.close?.());
  // Every request counts (tool calls, lists, docs), by key, or by address for requests without one.
  const count = (request: FastifyRequest, reply: FastifyReply | undefined, done: (refusal: ToolportError | undefined) => void): void => {
    store.incr(request.principal ? `key:${request.principal.label}` : `ip:${request.ip}`, (err, counted) => {
      // The stores never fail (Redis falls back to this process); a count that did is not held against the caller.
      if (err !== null || counted === undefined) return done(undefined);
      const over = counted.current > max;
      if (reply !== undefined) {
        reply
          .header('x-ratelimit-limit', max)
          .header('x-ratelimit-remaining', over ? 0 : max - counted.current)
          .header('x-ratelimit-reset', Math.ceil(counted.ttl / 1000));
      }
      done(over ? rateLimited(request, max, counted.ttl) : undefined);
    });
  };
  const limit = (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void => count(request, reply, (refusal) => done(refusal));
  // Route-level, so that it runs after the app-level hooks (authentication among them).
  app.addHook('onRoute', (route) => {
    if (UNLIMITED_ROUTES.has(route.url)) return;
    const own = route.onRequest;
    route.onRequest = own === undefined ? [limit] : [...(Array.isArray(own) ? own : [own]), limit as onRequestHookHandler];
  });
  app.decorate('countRateLimited', (request: FastifyRequest) => new Promise<ToolportError | undefined>((resolve) => count(request, undefined, resolve)));
}

/**
 * Counts one more call against the request's rate limit, for the calls of a batch beyond the
 * first (the request itself counted one): the same store, key and window as every request.
 * Resolves to the RATE_LIMITED refusal when the limit is spent, else undefined; always undefined
 * on a server without a rate limit.
 */
export async function countAnotherCall(request: FastifyRequest): Promise<ToolportError | undefined> {
  return request.server.countRateLimited?.(request);
}

function rateLimited(request: FastifyRequest, max: number, ttlMs: number): ToolportError {
  const retryAfter = Math.ceil(ttlMs / 1000);
  const who = request.principal ? `key "${request.principal.label}"` : 'this client address';
  return new ToolportError(
    'RATE_LIMITED',
    `Rate limit exceeded: ${who} may make ${max} ${max === 1 ? 'request' : 'requests'} per minute; retry in ${retryAfter} s.`,
    { limit: max, windowSeconds: RATE_WINDOW_MS / 1000, retryAfterSeconds: retryAfter },
    { retryAfterSeconds: retryAfter },
  );
}

async function installLoadShedding(app: FastifyInstance, pressure: PressureOptions): Promise<void> {
  const monitor = await LoadMonitor.start(
    {
      maxEventLoopDelayMs: pressure.maxEventLoopDelayMs ?? DEFAULT_MAX_EVENT_LOOP_DELAY_MS,
      maxHeapUsedBytes: pressure.maxHeapUsedBytes ?? Math.floor(getHeapStatistics().heap_size_limit * 0.9),
      maxRssBytes: pressure.maxRssBytes ?? 0,
      healthCheck: pressure.healthCheck,
      healthCheckIntervalMs: pressure.healthCheckIntervalMs ?? 1000,
    },
    app.log,
  );
  app.addHook('onClose', async () => monitor.stop());
  // A callback hook: no promise per request on the hot path.
  app.addHook('onRequest', (request: FastifyRequest, _reply, done) => {
    if (!monitor.overloaded || UNSHED_ROUTES.has(request.routeOptions.url ?? '')) return done();
    done(
      new ToolportError('OVERLOADED', `The server is overloaded; retry in ${OVERLOADED_RETRY_AFTER_S} s.`, undefined, {
        retryAfterSeconds: OVERLOADED_RETRY_AFTER_S,
      }),
    );
  });
}
