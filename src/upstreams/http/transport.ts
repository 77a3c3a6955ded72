import { ProtocolError, SdkError, SdkErrorCode, type Transport } from '@modelcontextprotocol/client';
import { Agent } from 'undici';
import type { ReadCounters } from '../answer-ledger.js';
import type { HttpUpstream } from '../config.js';
import { StreamableHttpTransport, type StreamableHttpOptions } from './client.js';
import { UpstreamContentError, UpstreamHttpError, UpstreamStreamEndedError } from './errors.js';

/** HTTP upstreams: how long a connection may take, and how long a response may stall between bytes. */
const HTTP_CONNECT_TIMEOUT_MS = 10_000;
const HTTP_BODY_TIMEOUT_MS = 300_000;
/** The SDK's errors that say the exchange itself failed, not that the upstream answered. */
const CONNECTION_ERROR_CODES: ReadonlySet<string> = new Set([SdkErrorCode.NotConnected, SdkErrorCode.ConnectionClosed, SdkErrorCode.SendFailed]);

/** The connection pool of one HTTP upstream, with its timeouts; its owner closes it. */
export function httpAgent(): Agent {
  return new Agent({ connectTimeout: HTTP_CONNECT_TIMEOUT_MS, bodyTimeout: HTTP_BODY_TIMEOUT_MS, headersTimeout: HTTP_BODY_TIMEOUT_MS });
}

export interface HttpTransportHooks {
  /** Hears why the transport gave the upstream up before it closes (it is broken, not just a stream: it restarts, with backoff, as a process would). */
  onBroken(transport: Transport, why: string): void;
  /** Hears why its GET stream was given up. */
  onEventStreamLost?(why: string): void;
  counters?: ReadCounters;
  reconnect?: StreamableHttpOptions['reconnect'];
}

/** The Streamable HTTP transport to `spec`'s URL through `agent`, each answer bounded by what its request may take (see `StreamableHttpTransport`). */
export function httpTransport(
  spec: Pick<HttpUpstream, 'url' | 'headers' | 'maxResultBytes'>,
  agent: Agent,
  hooks: HttpTransportHooks,
): StreamableHttpTransport {
  const transport: StreamableHttpTransport = new StreamableHttpTransport({
    url: new URL(spec.url),
    headers: spec.headers,
    dispatcher: agent,
    maxResultBytes: spec.maxResultBytes,
    ...(hooks.counters !== undefined ? { counters: hooks.counters } : {}),
    ...(hooks.reconnect !== undefined ? { reconnect: hooks.reconnect } : {}),
    onBroken: (why) => hooks.onBroken(transport, why),
    ...(hooks.onEventStreamLost !== undefined ? { onEventStreamLost: hooks.onEventStreamLost } : {}),
  });
  return transport;
}

/**
 * Whether `err`, from a request to an HTTP upstream, says the connection is lost rather than that
 * the upstream answered: a request that failed (refused, reset, timed out), an HTTP error status
 * (a session the upstream no longer knows: 404, or 400 from servers that answer so), a body that
 * is not what was asked for. A JSON-RPC error (ProtocolError) is the upstream's answer; a timeout,
 * a result of the wrong shape or an event stream that ended without the answer is about one request.
 */
export function isConnectionFailure(err: unknown): boolean {
  if (err instanceof UpstreamStreamEndedError) return false;
  if (err instanceof SdkError) return CONNECTION_ERROR_CODES.has(err.code);
  return err instanceof Error && !(err instanceof ProtocolError);
}

/**
 * Why a request to an HTTP upstream failed, in words safe to log and show (`/readyz` needs no key):
 * no header value, and nothing the upstream chose to say (its body, its status text, its JSON-RPC
 * error message), only the status and the kind of error.
 */
export function describeHttpFailure(err: unknown): string {
  // Their messages are the transport's own words.
  if (err instanceof UpstreamHttpError || err instanceof UpstreamContentError || err instanceof UpstreamStreamEndedError) return err.message;
  if (err instanceof ProtocolError) return `the upstream answered JSON-RPC error ${err.code}`;
  if (err instanceof SdkError) return `${err.name} ${err.code}`;
  if (!(err instanceof Error)) return 'an unknown error';
  // undici's and the system's error codes (UND_ERR_SOCKET, ECONNREFUSED) hold nothing from the upstream.
  const code = (err as NodeJS.ErrnoException).code;
  return typeof code === 'string' && /^[A-Z_]+$/.test(code) ? `the request failed: ${code}` : err.name;
}
