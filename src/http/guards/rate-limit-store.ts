import type { Redis } from 'ioredis';
import type { BaseLogger } from 'pino';
import { throttled } from '../../infra/throttled.js';

/** Where the counts live in Redis: `toolport:ratelimit:key:<label>` or `toolport:ratelimit:ip:<address>`. */
export const REDIS_KEY_PREFIX = 'toolport:ratelimit:';
/** After a failed Redis command, this long goes by before the next is tried (a hung Redis costs every request its timeout). */
export const REDIS_RETRY_AFTER_FAILURE_MS = 1_000;
// Keys counted in this process while Redis is away; past it, expired windows are dropped, then the oldest.
const MAX_LOCAL_KEYS = 10_000;

// One fixed window per key, as the plugin's own stores keep it: the first request sets its expiry.
// A key found without one (its PEXPIRE lost) gets it again, so it can never count forever.
const INCREMENT = `
local current = redis.call('INCR', KEYS[1])
if current == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {current, ttl}
`;

interface RateLimitRedis extends Redis {
  toolportRateLimit(key: string, windowMs: number): Promise<[number, number]>;
}

/** How a count ended: the requests counted in the key's window so far, this one included, and the ms left of it. */
export type Counted = (error: Error | null, result?: { current: number; ttl: number }) => void;

/**
 * Where the rate limit counts: one more request of `key` in its fixed window of `windowMs`. The
 * callback may run before `incr` returns (the counts of this process) or later (Redis).
 */
export interface RateLimitStore {
  incr(key: string, callback: Counted, windowMs: number): void;
}

export interface SharedStoreOptions {
  /** A connection made with `connectRedis` (no offline queue, a command timeout); the caller owns it. */
  redis: Redis;
  /** The window every count runs over, in ms. */
  windowMs: number;
  log: Pick<BaseLogger, 'warn' | 'error' | 'info'>;
  /** Called for each request counted in this process because Redis could not count it (for a metric). */
  onStoreError?: () => void;
}

/**
 * A store that keeps the counts in Redis, so that every replica sharing
 * it counts a key's requests together. When Redis cannot answer (down, unreachable, too slow), the
 * request is counted in this process instead, with the same window and limit: the service stays
 * up, and a key still gets at most the limit per replica until Redis is back. Each such request is
 * reported to `onStoreError`; a warning says so at most once every 10 s, with a count, and a line
 * says when Redis counts again. Never fails a request.
 */
export function sharedRateLimitStore(options: SharedStoreOptions): RateLimitStore {
  const redis = options.redis as RateLimitRedis;
  if (typeof redis.toolportRateLimit !== 'function') redis.defineCommand('toolportRateLimit', { numberOfKeys: 1, lua: INCREMENT });
  const local = new LocalWindows();
  const warn = throttled(
    options.log,
    'warn',
    'rate-limit counts cannot be shared through Redis (TOOLPORT_REDIS_URL); counting in this process until it is back',
  );
  let retryAt = 0;
  let failing = false;

  const fallBack = (key: string, windowMs: number, callback: Counted, err: unknown): void => {
    failing = true;
    options.onStoreError?.();
    warn({ err: err instanceof Error ? err.message : String(err) });
    callback(null, local.incr(key, windowMs));
  };

  return {
    incr(key: string, callback: Counted, windowMs: number = options.windowMs): void {
      // Without a connection the command would fail at once anyway; after a failure, give it a moment.
      if (redis.status !== 'ready') return fallBack(key, windowMs, callback, new Error(`the connection is ${redis.status}`));
      if (performance.now() < retryAt) return fallBack(key, windowMs, callback, new Error('a recent command failed'));
      redis.toolportRateLimit(REDIS_KEY_PREFIX + key, windowMs).then(
        ([current, ttl]) => {
          if (failing) {
            failing = false;
            options.log.info('rate-limit counts are shared through Redis again');
          }
          callback(null, { current, ttl });
        },
        (err: unknown) => {
          retryAt = performance.now() + REDIS_RETRY_AFTER_FAILURE_MS;
          fallBack(key, windowMs, callback, err);
        },
      );
    },
  };
}

/**
 * A store that counts in this process, for a server without Redis. (The in-memory store of
 * @fastify/rate-limit handed every count of a key the same object, so requests counted at the
 * same moment all read the last count: 21 requests at once under a limit of 20 were all refused.)
 * Each count here is its own answer.
 */
export function localRateLimitStore(windowMs: number): RateLimitStore {
  const local = new LocalWindows();
  return {
    incr(key: string, callback: Counted, timeWindow: number = windowMs): void {
      callback(null, local.incr(key, timeWindow));
    },
  };
}

/** Fixed windows counted in this process (without Redis, or while it is away); bounded in size. */
class LocalWindows {
  readonly #windows = new Map<string, { count: number; endsAt: number }>();

  incr(key: string, windowMs: number): { current: number; ttl: number } {
    const now = Date.now();
    let window = this.#windows.get(key);
    if (window === undefined || window.endsAt <= now) {
      if (window === undefined && this.#windows.size >= MAX_LOCAL_KEYS) this.#prune(now);
      window = { count: 0, endsAt: now + windowMs };
      this.#windows.set(key, window);
    }
    window.count++;
    return { current: window.count, ttl: window.endsAt - now };
  }

  #prune(now: number): void {
    for (const [key, window] of this.#windows) if (window.endsAt <= now) this.#windows.delete(key);
    // Still full: the oldest go first (a Map keeps insertion order).
    for (const key of this.#windows.keys()) {
      if (this.#windows.size < MAX_LOCAL_KEYS) break;
      this.#windows.delete(key);
    }
  }
}
