import { getHeapStatistics } from 'node:v8';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import rateLimit from '@fastify/rate-limit';
import type { Redis } from 'ioredis';
import { ToolportError } from '../core/errors.js';
import { LoadMonitor } from './load-monitor.js';
import { localRateLimitStore, sharedRateLimitStore } from './rate-limit-store.js';

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
  /** Calls per minute per key (or client address without keys); 0 switches the limit off. */
  rateLimit: number;
  /**
   * Keep the counts in this Redis, shared by every replica, instead of in the process; when it
   * cannot answer, a request is counted in the process (see `sharedRateLimitStore`).
   */
  redis?: Redis | undefined;
  /** Called for each request Redis could not count. */
  onStoreError?: () => void;
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
 * a route-level `onRequest` hook, which Fastify runs after every app-level one, so `request.apiKey`
 * is known when the key is chosen and a refused request's body is never read.
 */
export async function installProtection(app: FastifyInstance, options: ProtectionOptions): Promise<void> {
  if (options.pressure !== false) await installLoadShedding(app, options.pressure ?? {});
  if (options.rateLimit > 0) await installRateLimit(app, options.rateLimit, options);
}

async function installRateLimit(app: FastifyInstance, max: number, { redis, onStoreError }: Pick<ProtectionOptions, 'redis' | 'onStoreError'>): Promise<void> {
  // Runs before the plugin's own onRoute hook (hooks run in the order they were added).
  app.addHook('onRoute', (route) => {
    if (UNLIMITED_ROUTES.has(route.url)) route.config = { ...route.config, rateLimit: false };
  });
  await app.register(rateLimit, {
    max,
    timeWindow: RATE_WINDOW_MS,
    hook: 'onRequest',
    store: redis ? sharedRateLimitStore({ redis, windowMs: RATE_WINDOW_MS, log: app.log, onStoreError }) : localRateLimitStore(RATE_WINDOW_MS),
    // Every request counts (tool calls, lists, docs), by key, or by address for requests without one.
    keyGenerator: (request) => (request.apiKey ? `key:${request.apiKey.label}` : `ip:${request.ip}`),
    // The plugin throws what this returns, with its x-ratelimit-* and retry-after headers already
    // set; the error handler answers it in the error-body shape (and sets Retry-After from it too).
    errorResponseBuilder: (request, context) => rateLimited(request, context.max, context.ttl),
  });
}

/**
 * Counts one more call against the request's rate limit, for the calls of a batch beyond the
 * first (the request itself counted one): the same store, key and window as every request.
 * Resolves to the RATE_LIMITED refusal when the limit is spent, else undefined; always undefined
 * on a server without a rate limit.
 */
export async function countAnotherCall(request: FastifyRequest): Promise<ToolportError | undefined> {
  const server = request.server;
  if (!server.hasDecorator('createRateLimit')) return undefined;
  let check = limiters.get(server);
  if (check === undefined) limiters.set(server, (check = server.createRateLimit()));
  const verdict = await check(request);
  return !verdict.isAllowed && verdict.isExceeded ? rateLimited(request, verdict.max, verdict.ttl) : undefined;
}

const limiters = new WeakMap<FastifyInstance, ReturnType<FastifyInstance['createRateLimit']>>();

function rateLimited(request: FastifyRequest, max: number, ttlMs: number): ToolportError {
  const retryAfter = Math.ceil(ttlMs / 1000);
  const who = request.apiKey ? `key "${request.apiKey.label}"` : 'this client address';
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
