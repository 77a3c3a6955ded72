import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { redactedUrl } from './config.js';
import { throttled } from './http/connections.js';

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
