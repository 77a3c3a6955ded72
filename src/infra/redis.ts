import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { redactedUrl } from './net.js';
import { throttled } from './throttled.js';

/** How long start-up waits for Redis before it gives up. */
export const REDIS_STARTUP_TIMEOUT_MS = 5_000;
// A rate-limit count takes Redis well under a millisecond; a command this slow means trouble.
const COMMAND_TIMEOUT_MS = 500;
const CONNECT_TIMEOUT_MS = 2_000;
// Reconnect attempts come this often at most, however long Redis stays away.
const MAX_RECONNECT_DELAY_MS = 1_000;

/** Raised at start-up when Redis cannot be reached; the message names TOOLPORT_REDIS_URL, never its password. */
export class RedisUnavailableError extends Error {
  override readonly name = 'RedisUnavailableError';
}

/**
 * Connects to the Redis server of TOOLPORT_REDIS_URL and waits until it answers. Rejects with
 * `RedisUnavailableError` after `timeoutMs` without an answer: a replica that cannot reach the
 * Redis it was told to share its limits through is misconfigured (a wrong URL or password, a
 * network policy), and is better refused before it takes traffic than run with limits of its own.
 *
 * Once running, a request never waits for Redis: commands are not queued while the connection is
 * down (they fail at once) and time out after 500 ms, so the store can count in the process
 * instead. The client reconnects by itself; lost connections are logged at most once every 10 s,
 * and the return once. Close it with `quit()`.
 */
export async function connectRedis(url: string, log: Logger, timeoutMs = REDIS_STARTUP_TIMEOUT_MS): Promise<Redis> {
  // Loaded here, not at start-up: ioredis is 70 modules, and only servers that share limits use it.
  const { Redis: RedisClient } = await import('ioredis');
  const redis = new RedisClient(url, {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: COMMAND_TIMEOUT_MS,
    connectTimeout: CONNECT_TIMEOUT_MS,
    retryStrategy: (attempt) => Math.min(attempt * 100, MAX_RECONNECT_DELAY_MS),
  });
  const shown = redactedUrl(url);
  let lastError = 'no answer';
  // Without a listener, ioredis writes every connection error to the console.
  const onStartupError = (err: Error): void => {
    lastError = err.message || (err as NodeJS.ErrnoException).code || String(err);
  };
  redis.on('error', onStartupError);
  redis.connect().catch(() => {
    // The client goes on reconnecting; the wait below decides.
  });
  const ready = await new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(false), timeoutMs);
    redis.once('ready', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
  redis.off('error', onStartupError);
  if (!ready) {
    redis.disconnect();
    throw new RedisUnavailableError(
      `Cannot reach Redis at TOOLPORT_REDIS_URL (${shown}) within ${timeoutMs / 1000} s: ${lastError}. ` +
        'The rate limits are to be shared through it: start it or correct the URL, or unset TOOLPORT_REDIS_URL to count limits in each process.',
    );
  }
  log.info({ redis: shown }, 'rate limits are shared through Redis');

  const lost = throttled(log, 'warn', 'lost the connection to Redis (TOOLPORT_REDIS_URL); reconnecting');
  let down = false;
  // A clean close (Redis stopped) comes without an error; a refused reconnection with one.
  redis.on('close', () => {
    // `end`: closed on purpose (quit, disconnect), with no reconnection to come.
    if (redis.status === 'end') return;
    down = true;
    lost({ redis: shown });
  });
  redis.on('error', (err: Error) => {
    down = true;
    lost({ redis: shown, err: err.message });
  });
  redis.on('ready', () => {
    if (down) log.info({ redis: shown }, 'connected to Redis again');
    down = false;
  });
  return redis;
}

/** Longest request id a cancellation carries to the other replicas; a call with a longer id is cancelled on its own replica only. */
export const MAX_SHARED_REQUEST_ID_CHARS = 256;

/** A cancellation that matched no call here, for the replicas that may hold the call (what an MCP client's `notifications/cancelled` names). */
export interface Cancellation {
  /** Who sent it: a caller's name (`admissionName`: its key's label, or its client address). */
  caller: string;
  requestId: string | number;
  reason: string;
}

/** Shares MCP cancellations between replicas (`openCancellationChannel`). */
export interface CancellationChannel {
  /** Sends a cancellation that matched no call here to the other replicas; never throws, never waits. */
  publish(cancellation: Cancellation): void;
  /** Unsubscribes and closes the channel's own connection. */
  close(): Promise<void>;
}

/**
 * The Redis channel through which replicas share MCP clients' cancellations: a Streamable HTTP
 * client sends `notifications/cancelled` in a POST of its own, which the balancer may send to
 * another replica than the call's. A replica that holds no matching call publishes it (caller,
 * request id, reason) on `toolport:cancel:<db>` (channels are not per database, so the number
 * keeps deployments sharing a Redis apart), and every other replica applies it to its own calls
 * (`receive`). Subscribing takes a connection of its own (a subscribed connection runs no other
 * command). Resolves once subscribed, or rejects with `RedisUnavailableError` after `timeoutMs`;
 * afterwards it subscribes again after every reconnection. While Redis is away a cancellation
 * reaches only the replica it came to; a warning says so at most every 10 s.
 */
export async function openCancellationChannel(
  redis: Redis,
  log: Pick<Logger, 'info' | 'warn' | 'error'>,
  receive: (cancellation: Cancellation) => void,
  timeoutMs = REDIS_STARTUP_TIMEOUT_MS,
): Promise<CancellationChannel> {
  const channel = `toolport:cancel:${redis.options.db ?? 0}`;
  // Its own messages come back to it too: the id tells them apart.
  const self = randomUUID();
  const subscriber = redis.duplicate({ autoResubscribe: false, lazyConnect: true });
  subscriber.on('error', () => {
    // The shared connection logs Redis going away and coming back; reconnection is automatic.
  });
  let resolveSubscribed: (subscribed: boolean) => void = () => {};
  const subscribed = new Promise<boolean>((resolve) => (resolveSubscribed = resolve));
  let subscribedBefore = false;
  // Again after every reconnection: a new connection is subscribed to nothing.
  subscriber.on('ready', () => {
    subscriber.subscribe(channel).then(
      () => {
        if (subscribedBefore) log.info({ channel }, 'MCP cancellations are shared through Redis again');
        subscribedBefore = true;
        resolveSubscribed(true);
      },
      () => {},
    );
  });
  subscriber.on('message', (_channel: string, text: string) => {
    const cancellation = parseCancellation(text, self);
    if (cancellation !== undefined) receive(cancellation);
  });
  const timer = setTimeout(() => resolveSubscribed(false), timeoutMs);
  subscriber.connect().catch(() => {});
  const ok = await subscribed;
  clearTimeout(timer);
  if (!ok) {
    subscriber.disconnect();
    throw new RedisUnavailableError(`Cannot subscribe to ${channel} in Redis (TOOLPORT_REDIS_URL) within ${timeoutMs / 1000} s.`);
  }
  log.info({ channel }, 'MCP cancellations are shared through Redis');
  const lost = throttled(log, 'warn', 'cannot share an MCP cancellation through Redis (TOOLPORT_REDIS_URL); it reaches the calls of this replica only');
  return {
    publish({ caller, requestId, reason }) {
      if (typeof requestId === 'string' && requestId.length > MAX_SHARED_REQUEST_ID_CHARS) return;
      redis.publish(channel, JSON.stringify({ from: self, caller, requestId, reason })).catch((err: Error) => lost({ err: err.message }));
    },
    async close() {
      await subscriber.quit().catch(() => subscriber.disconnect());
    },
  };
}

/** A message of the channel, checked field by field; undefined for one of this replica's own, or one that is not a cancellation. */
function parseCancellation(text: string, self: string): Cancellation | undefined {
  let message: unknown;
  try {
    message = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof message !== 'object' || message === null) return undefined;
  const { from, caller, requestId, reason } = message as Record<string, unknown>;
  if (from === self || typeof caller !== 'string' || typeof reason !== 'string') return undefined;
  if (typeof requestId !== 'string' && typeof requestId !== 'number') return undefined;
  return { caller, requestId, reason: reason.slice(0, 200) };
}
