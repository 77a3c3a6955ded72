import type { Redis } from 'ioredis';
import type { BaseLogger } from 'pino';
import type { RoundTrip } from '../../core/tracer.js';
import { throttled } from '../../infra/throttled.js';

/** Where the counts live in Redis: `toolport:ratelimit:key:<label>` or `toolport:ratelimit:ip:<address>`. */
export const REDIS_KEY_PREFIX = 'toolport:ratelimit:';
/** After a failed Redis command, this long goes by before the next is tried (a hung Redis costs every request its timeout). */
export const REDIS_RETRY_AFTER_FAILURE_MS = 1_000;
/** Calls answered ahead of Redis reach it within this long, or sooner once half a key's allowance is used. */
export const SYNC_INTERVAL_MS = 50;
// Keys counted in this process while Redis is away; past it, expired windows are dropped, then the oldest.
const MAX_LOCAL_KEYS = 10_000;
// Keys one command counts at most; the rest go in the next (a long script would hold up Redis).
const MAX_KEYS_PER_COMMAND = 500;

// Adds each key's calls to its fixed window, as the plugin's own stores kept it: the call that
// creates the key sets its expiry. A key found without one (its PEXPIRE lost) gets it again, so it
// can never count forever. Answers each key's count and the ms left of its window.
const COUNT = `
local window = tonumber(ARGV[1])
local answer = {}
for i, key in ipairs(KEYS) do
  local calls = tonumber(ARGV[i + 1])
  local current = redis.call('INCRBY', key, calls)
  local ttl = window
  if current == calls then
    redis.call('PEXPIRE', key, window)
  else
    ttl = redis.call('PTTL', key)
    if ttl < 0 then
      redis.call('PEXPIRE', key, window)
      ttl = window
    end
  end
  answer[#answer + 1] = current
  answer[#answer + 1] = ttl
end
return answer
`;

interface RateLimitRedis extends Redis {
  toolportCount(keyCount: number, ...keysThenArgs: Array<string | number>): Promise<number[]>;
}

/** How a count ended: the requests counted in the key's window so far, this one included, and the ms left of it. */
export type Counted = (error: Error | null, result?: { current: number; ttl: number }) => void;

/**
 * Where the rate limit counts: one more request of `key` in its fixed window. The callback may
 * run before `incr` returns (the counts of this process, or a call answered ahead of Redis) or
 * later (a count that waits for Redis).
 */
export interface RateLimitStore {
  incr(key: string, callback: Counted): void;
  /** Sends what is counted here and not yet in Redis; resolves when it is (or could not be) counted. */
  close?(): Promise<void>;
}

export interface SharedStoreOptions {
  /** A connection made with `connectRedis` (no offline queue, a command timeout); the caller owns it. */
  redis: Redis;
  /** The window every count runs over, in ms. */
  windowMs: number;
  /** Requests a key may make per window: what decides how many calls may be answered ahead of Redis. */
  limit: number;
  log: Pick<BaseLogger, 'warn' | 'error' | 'info'>;
  /** Called for each request counted in this process because Redis could not count it (for a metric). */
  onStoreError?: () => void;
  /** Traces each command as a client span, while tracing is on. */
  roundTrip?: RoundTrip | undefined;
}

/**
 * How many calls of a key one replica may answer ahead of Redis (k): 0 below a limit of 1,000 a
 * window, so every call waits for its count and a key gets exactly its limit in all; above it a
 * thousandth of the limit, at most 100. A key then gets at most `limit + replicas × k` calls a
 * window: each replica answers at most k calls that Redis has not counted yet, and stops once an
 * answer shows the limit reached.
 */
export function callsAheadOfRedis(limit: number): number {
  return Math.min(100, Math.floor(limit / 1_000));
}

/** A key's count as this replica knows it, and the calls counted here that Redis has not answered. */
interface SharedKey {
  /** The key's count in Redis at the last answer, and when (Date.now()) its window ends. */
  known: number;
  endsAt: number;
  /** Calls answered ahead of Redis, not yet sent; and those in the command in flight. */
  ahead: number;
  aheadSent: number;
  /** Calls waiting for their count, in order, not yet sent; and those in the command in flight. */
  waiting: Counted[];
  waitingSent: Counted[];
}

/**
 * A store that keeps the counts in Redis, so that every replica sharing it counts a key's requests
 * together, in at most one command per request: the calls that arrive while a command is in flight
 * go together in the next one (one command, and one round trip, for many requests under load).
 * With a limit of 1,000 a window or more, a replica also answers up to `callsAheadOfRedis(limit)`
 * calls of a key at once from the count it last heard, and sends them within `SYNC_INTERVAL_MS`
 * (sooner when half of that allowance is used); see `callsAheadOfRedis` for the bound on the
 * limit this allows.
 *
 * When Redis cannot answer (down, unreachable, too slow), a request is counted in this process
 * instead, with the same window and limit: the service stays up, and a key still gets at most the
 * limit per replica until Redis is back. Each such request is reported to `onStoreError`; a warning
 * says so at most once every 10 s, with a count, and a line says when Redis counts again. Never
 * fails a request.
 */
export function sharedRateLimitStore(options: SharedStoreOptions): RateLimitStore {
  const redis = options.redis as RateLimitRedis;
  if (typeof redis.toolportCount !== 'function') redis.defineCommand('toolportCount', { lua: COUNT });
  const { windowMs, limit } = options;
  const allowance = callsAheadOfRedis(limit);
  const local = new LocalWindows();
  const keys = new Map<string, SharedKey>();
  // Keys with calls not yet sent, in the order they got them.
  const unsent = new Set<string>();
  const warn = throttled(
    options.log,
    'warn',
    'rate-limit counts cannot be shared through Redis (TOOLPORT_REDIS_URL); counting in this process until it is back',
  );
  let retryAt = 0;
  let failing = false;
  let inFlight: Promise<void> | undefined;
  let timer: NodeJS.Timeout | undefined;

  const unavailable = (): Error | undefined => {
    // Without a connection the command would fail at once anyway; after a failure, give it a moment.
    if (redis.status !== 'ready') return new Error(`the connection is ${redis.status}`);
    if (performance.now() < retryAt) return new Error('a recent command failed');
    return undefined;
  };
  const fallBack = (key: string, callback: Counted, err: Error): void => {
    failing = true;
    options.onStoreError?.();
    warn({ err: err.message });
    callback(null, local.incr(key, windowMs));
  };
  // Calls answered ahead that Redis will not count: this process counts them, as it does the next ones.
  const countedHereInstead = (key: string, calls: number, err: Error): void => {
    for (let i = 0; i < calls; i++) fallBack(key, () => {}, err);
  };

  const send = (): void => {
    if (timer !== undefined) clearTimeout(timer);
    timer = undefined;
    if (inFlight !== undefined || unsent.size === 0) return;
    const err = unavailable();
    if (err !== undefined) {
      for (const key of unsent) {
        const entry = keys.get(key)!;
        countedHereInstead(key, entry.ahead, err);
        for (const callback of entry.waiting) fallBack(key, callback, err);
        entry.ahead = 0;
        entry.waiting = [];
      }
      unsent.clear();
      return;
    }
    const batch: string[] = [];
    const args: number[] = [windowMs];
    for (const key of unsent) {
      if (batch.length === MAX_KEYS_PER_COMMAND) break;
      const entry = keys.get(key)!;
      unsent.delete(key);
      batch.push(key);
      args.push(entry.ahead + entry.waiting.length);
      entry.aheadSent = entry.ahead;
      entry.waitingSent = entry.waiting;
      entry.ahead = 0;
      entry.waiting = [];
    }
    const count = (): Promise<number[]> => redis.toolportCount(batch.length, ...batch.map((key) => REDIS_KEY_PREFIX + key), ...args);
    const { roundTrip } = options;
    const counted =
      roundTrip === undefined
        ? count()
        : roundTrip('EVALSHA toolport_count', { 'db.system.name': 'redis', 'db.operation.name': 'EVALSHA', 'db.operation.batch.size': batch.length }, count);
    inFlight = counted.then(
      (answer) => {
        if (failing) {
          failing = false;
          options.log.info('rate-limit counts are shared through Redis again');
        }
        const now = Date.now();
        batch.forEach((key, i) => {
          const entry = keys.get(key)!;
          const total = answer[2 * i]!;
          const ttl = answer[2 * i + 1]!;
          entry.known = total;
          entry.endsAt = now + ttl;
          // The calls answered ahead come first; those that waited take the last places, in order.
          const first = total - entry.waitingSent.length + 1;
          const waited = entry.waitingSent;
          entry.aheadSent = 0;
          entry.waitingSent = [];
          waited.forEach((callback, j) => callback(null, { current: first + j, ttl }));
        });
        settled();
      },
      (error: unknown) => {
        retryAt = performance.now() + REDIS_RETRY_AFTER_FAILURE_MS;
        const err = error instanceof Error ? error : new Error(String(error));
        for (const key of batch) {
          const entry = keys.get(key)!;
          const waited = entry.waitingSent;
          countedHereInstead(key, entry.aheadSent, err);
          entry.aheadSent = 0;
          entry.waitingSent = [];
          for (const callback of waited) fallBack(key, callback, err);
        }
        settled();
      },
    );
  };
  // The next command: at once for calls that wait or a key past half its allowance, else on the timer.
  const settled = (): void => {
    inFlight = undefined;
    prune();
    if ([...unsent].some((key) => due(keys.get(key)!))) send();
    else if (unsent.size > 0) schedule();
  };
  const due = (entry: SharedKey): boolean => entry.waiting.length > 0 || 2 * (entry.ahead + entry.aheadSent) >= allowance;
  const schedule = (): void => {
    if (timer !== undefined || inFlight !== undefined) return;
    timer = setTimeout(send, SYNC_INTERVAL_MS);
    // A pending sync never keeps the process alive.
    timer.unref();
  };
  const prune = (): void => {
    if (keys.size < MAX_LOCAL_KEYS) return;
    const now = Date.now();
    const idle = (entry: SharedKey): boolean => entry.ahead + entry.aheadSent + entry.waiting.length + entry.waitingSent.length === 0;
    for (const [key, entry] of keys) if (entry.endsAt <= now && idle(entry)) keys.delete(key);
    // Still full: the oldest idle keys go (their next calls are answered from a count of 0, within the allowance).
    for (const [key, entry] of keys) {
      if (keys.size < MAX_LOCAL_KEYS) break;
      if (idle(entry)) keys.delete(key);
    }
  };

  return {
    incr(key: string, callback: Counted): void {
      const err = unavailable();
      if (err !== undefined) return fallBack(key, callback, err);
      let entry = keys.get(key);
      if (entry === undefined) {
        if (inFlight === undefined) prune();
        entry = { known: 0, endsAt: 0, ahead: 0, aheadSent: 0, waiting: [], waitingSent: [] };
        keys.set(key, entry);
      }
      const now = Date.now();
      const known = entry.endsAt > now ? entry.known : 0;
      const aheadNow = entry.ahead + entry.aheadSent;
      unsent.add(key);
      // Ahead of Redis only within the allowance, below the limit, and behind no call that waits.
      if (aheadNow < allowance && known + aheadNow < limit && entry.waiting.length + entry.waitingSent.length === 0) {
        entry.ahead++;
        callback(null, { current: known + aheadNow + 1, ttl: entry.endsAt > now ? entry.endsAt - now : windowMs });
      } else {
        entry.waiting.push(callback);
      }
      if (due(entry)) send();
      else schedule();
    },
    async close(): Promise<void> {
      await inFlight;
      send();
      await inFlight;
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
    incr(key: string, callback: Counted): void {
      callback(null, local.incr(key, windowMs));
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
