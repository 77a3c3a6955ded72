import { ProtocolError, SdkError, SdkErrorCode, SdkHttpError, StreamableHTTPClientTransport, type Transport } from '@modelcontextprotocol/client';
import { Agent, Response, fetch as undiciFetch } from 'undici';
import type { HttpUpstream } from './config.js';
import { MAX_MESSAGE_BYTES } from './stdio-transport.js';

/** HTTP upstreams: how long a connection may take, and how long a response may stall between bytes. */
const HTTP_CONNECT_TIMEOUT_MS = 10_000;
const HTTP_BODY_TIMEOUT_MS = 300_000;
const NULL_BODY_STATUSES = new Set([101, 103, 204, 205, 304]);
/** The SDK's errors that say the exchange itself failed, not that the upstream answered. */
const CONNECTION_ERROR_CODES: ReadonlySet<string> = new Set([
  SdkErrorCode.NotConnected,
  SdkErrorCode.ConnectionClosed,
  SdkErrorCode.SendFailed,
  SdkErrorCode.ClientHttpUnexpectedContent,
  SdkErrorCode.ClientHttpFailedToOpenStream,
]);

/** The connection pool of one HTTP upstream, with its timeouts; its owner closes it. */
export function httpAgent(): Agent {
  return new Agent({ connectTimeout: HTTP_CONNECT_TIMEOUT_MS, bodyTimeout: HTTP_BODY_TIMEOUT_MS, headersTimeout: HTTP_BODY_TIMEOUT_MS });
}

/**
 * The Streamable HTTP transport to `spec`'s URL through `agent`, each response bounded to
 * {@link MAX_MESSAGE_BYTES} a message: past it the transport is closed and `onBroken` hears why
 * (the upstream is broken, not just this stream: it restarts, with backoff, as a process would).
 */
export function httpTransport(spec: Pick<HttpUpstream, 'url' | 'headers'>, agent: Agent, onBroken: (transport: Transport, why: string) => void): Transport {
  const transport: Transport = new StreamableHTTPClientTransport(new URL(spec.url), {
    requestInit: { headers: spec.headers },
    // A signal per request: undici adds an abort listener to the one it is given, and the SDK
    // gives every request the transport's one long-lived signal (6.5% of a call's CPU, profiled).
    fetch: (async (url: string | URL, init?: RequestInit) => {
      const response = await undiciFetch(url, {
        ...(init as object),
        ...(init?.signal ? { signal: AbortSignal.any([init.signal]) } : {}),
        dispatcher: agent,
      });
      return bounded(response, MAX_MESSAGE_BYTES, (why) => {
        onBroken(transport, why);
        void transport.close();
      });
    }) as unknown as typeof fetch,
  });
  return transport;
}

/**
 * Whether `err`, from a request to an HTTP upstream, says the connection is lost rather than that
 * the upstream answered: a fetch that failed (refused, reset), an HTTP error status (a session the
 * upstream no longer knows: 404, or 400 from servers that answer so), a body that is not what was
 * asked for. A JSON-RPC error (ProtocolError) is the upstream's answer; a timeout or a result of the
 * wrong shape is about one request.
 */
export function isConnectionFailure(err: unknown): boolean {
  if (err instanceof SdkHttpError) return true;
  if (err instanceof SdkError) return CONNECTION_ERROR_CODES.has(err.code);
  return err instanceof Error && !(err instanceof ProtocolError);
}

/**
 * Why a request to an HTTP upstream failed, in words safe to log and show (`/readyz` needs no key):
 * no header value, and nothing the upstream chose to say (its body, its status text, its JSON-RPC
 * error message), only the status and the kind of error.
 */
export function describeHttpFailure(err: unknown): string {
  if (err instanceof SdkHttpError) return `the upstream answered HTTP ${err.status}`;
  if (err instanceof ProtocolError) return `the upstream answered JSON-RPC error ${err.code}`;
  if (err instanceof SdkError) return `${err.name} ${err.code}`;
  if (!(err instanceof Error)) return 'an unknown error';
  const code = err.cause instanceof Error ? (err.cause as NodeJS.ErrnoException).code : undefined;
  // undici's own words, which hold nothing from the upstream; anything else is named by its class.
  return `${err.message === 'fetch failed' ? err.message : err.name}${code !== undefined ? `: ${code}` : ''}`;
}

/**
 * A response whose body errors once it holds more than `maxBytes` without a line break (an SSE
 * event's line), or more than `maxBytes` in all for JSON; `onOverflow` hears why. Each chunk is
 * searched once, so the cost is linear.
 */
function bounded(response: Response, maxBytes: number, onOverflow: (why: string) => void): Response {
  if (response.body === null || NULL_BODY_STATUSES.has(response.status)) return response;
  const whole = /^application\/json\b/i.test(response.headers.get('content-type') ?? '');
  let run = 0;
  const body = response.body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        const first = whole ? -1 : chunk.indexOf(0x0a);
        const over = first === -1 ? run + chunk.byteLength > maxBytes : run + first > maxBytes;
        run = first === -1 ? run + chunk.byteLength : chunk.byteLength - chunk.lastIndexOf(0x0a) - 1;
        if (over || run > maxBytes) {
          const why = `the upstream sent a message of more than ${maxBytes / (1024 * 1024)} MiB`;
          onOverflow(why);
          controller.error(new Error(why));
          return;
        }
        controller.enqueue(chunk);
      },
    }),
  );
  return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
}
