import {
  DEFAULT_BODY_LIMIT,
  DEFAULT_HEADERS_TIMEOUT_MS,
  DEFAULT_IDLE_TIMEOUT_MS,
  DEFAULT_KEEP_ALIVE_TIMEOUT_MS,
  DEFAULT_REQUEST_TIMEOUT_MS,
} from '../../http/defaults.js';
import { checkedList, ConfigError, corsOrigins, hostName, integer, raw, trustProxy, webOrigin, type Env } from '../parse.js';
import { booleanSetting, code, integerSetting, optionalIntegerSetting, setting } from '../variables.js';

// An hour: no connection deadline needs more, and Node's timers take at most 2^31 - 1 ms.
const MAX_TIMEOUT_MS = 3_600_000;
const CONNECTIONS = 'operations.md#connections';
const GUARD = 'security.md#host-and-origin-guard';

const requestTimeoutMs = integerSetting({
  name: 'TOOLPORT_REQUEST_TIMEOUT_MS',
  fallback: DEFAULT_REQUEST_TIMEOUT_MS,
  min: 1,
  max: MAX_TIMEOUT_MS,
  meaning:
    'time for a whole request, body included, to arrive; past it, 408 `REQUEST_TIMEOUT`. It bounds receiving the request, not the call: a response may take as long as its tool',
  see: CONNECTIONS,
});

/** How the server listens and answers: its address, bodies, documentation, connections and the guards before the tools. */
export const HTTP = {
  port: integerSetting({ name: 'PORT', fallback: 3000, min: 0, max: 65535, meaning: 'port to listen on (`0`: any free port)' }),
  host: setting(
    { name: 'HOST', default: code('127.0.0.1'), meaning: 'address to listen on; the image sets `0.0.0.0`' },
    (env) => raw(env, 'HOST') ?? '127.0.0.1',
  ),
  bodyLimit: integerSetting({ name: 'TOOLPORT_BODY_LIMIT', fallback: DEFAULT_BODY_LIMIT, min: 1, max: 1024 ** 3, meaning: 'largest request body, in bytes' }),
  docs: booleanSetting({ name: 'TOOLPORT_DOCS', fallback: true, meaning: 'serve the API browser at `/docs`' }),
  publicDocs: booleanSetting({
    name: 'TOOLPORT_PUBLIC_DOCS',
    fallback: false,
    meaning: 'with keys configured, leave `/docs`, `/openapi.json` and `/openapi.tools.json` open',
  }),
  headersTimeoutMs: setting(
    {
      name: 'TOOLPORT_HEADERS_TIMEOUT_MS',
      default: code(DEFAULT_HEADERS_TIMEOUT_MS),
      meaning: "time for a request's headers to arrive (at most `TOOLPORT_REQUEST_TIMEOUT_MS`); past it, 408 `REQUEST_TIMEOUT` and the connection closes",
      see: CONNECTIONS,
    },
    (env, cwd) => headersTimeout(env, 'TOOLPORT_HEADERS_TIMEOUT_MS', requestTimeoutMs.read(env, cwd)),
  ),
  requestTimeoutMs,
  keepAliveTimeoutMs: integerSetting({
    name: 'TOOLPORT_KEEP_ALIVE_TIMEOUT_MS',
    fallback: DEFAULT_KEEP_ALIVE_TIMEOUT_MS,
    min: 1,
    max: MAX_TIMEOUT_MS,
    meaning: 'how long a kept-alive connection may sit idle between requests (longer than the 60 s of common load balancers, which must close first)',
    see: CONNECTIONS,
  }),
  idleTimeoutMs: integerSetting({
    name: 'TOOLPORT_IDLE_TIMEOUT_MS',
    fallback: DEFAULT_IDLE_TIMEOUT_MS,
    min: 1,
    max: MAX_TIMEOUT_MS,
    meaning: 'how long a connection may see no traffic while none of its calls runs (a client that stopped reading its response)',
    see: CONNECTIONS,
  }),
  maxConnections: optionalIntegerSetting({
    name: 'TOOLPORT_MAX_CONNECTIONS',
    shown: 'from `ulimit -n`',
    min: 1,
    max: 1_000_000,
    meaning:
      'most connections open at once; past it a new one is closed as soon as it is accepted. Default: the descriptor limit less those open at start-up and a reserve for tool calls (a quarter of the limit, at least 64)',
    see: CONNECTIONS,
  }),
  allowedHosts: setting(
    {
      name: 'TOOLPORT_ALLOWED_HOSTS',
      default: 'none',
      meaning:
        'comma-separated host names or IP addresses the server answers to besides local ones, such as the public name a reverse proxy forwards; when set, any other `Host` is a 403',
      see: GUARD,
    },
    (env) => checkedList(env, 'TOOLPORT_ALLOWED_HOSTS', hostName, 'host names or IP addresses, without scheme or port'),
  ),
  allowedOrigins: setting(
    {
      name: 'TOOLPORT_ALLOWED_ORIGINS',
      default: 'none',
      meaning: 'comma-separated web origins (`https://app.example.com`) that may call besides local ones, where `Origin` is checked',
      see: GUARD,
    },
    (env) =>
      checkedList(env, 'TOOLPORT_ALLOWED_ORIGINS', webOrigin, 'web origins such as https://app.example.com (http or https, a host, an optional port, no path)'),
  ),
  corsOrigins: setting(
    {
      name: 'TOOLPORT_CORS_ORIGINS',
      default: 'none',
      meaning:
        'comma-separated exact web origins whose pages may call through CORS, such as a browser-side Open WebUI tool server: preflights answered, `Access-Control-Allow-Origin` on every answer to them, and they pass the `Origin` check; `*` stops start-up',
      see: 'security.md#cors',
    },
    // Whether keys are configured changes why a wildcard is refused, not whether.
    (env) => corsOrigins(env, 'TOOLPORT_CORS_ORIGINS', raw(env, 'TOOLPORT_API_KEYS') !== undefined || raw(env, 'TOOLPORT_API_KEYS_FILE') !== undefined),
  ),
  trustProxy: setting(
    {
      name: 'TOOLPORT_TRUST_PROXY',
      default: code('false'),
      meaning:
        'whose `X-Forwarded-For` to believe, for rate limits and logs: `true` (any peer), a hop count (`1`), or comma-separated addresses and CIDR ranges of the proxies (`10.0.0.0/8,loopback`)',
      see: 'security.md#behind-a-reverse-proxy',
    },
    (env) => trustProxy(env, 'TOOLPORT_TRUST_PROXY'),
  ),
} as const;

/** Node requires the header deadline to fall within the request's (TOOLPORT_REQUEST_TIMEOUT_MS). */
function headersTimeout(env: Env, name: string, requestTimeoutMs: number): number {
  const ms = integer(env, name, Math.min(DEFAULT_HEADERS_TIMEOUT_MS, requestTimeoutMs), 1, MAX_TIMEOUT_MS);
  if (ms > requestTimeoutMs) throw new ConfigError(name, `at most TOOLPORT_REQUEST_TIMEOUT_MS (${requestTimeoutMs})`, String(ms));
  return ms;
}
