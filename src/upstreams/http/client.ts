import { setMaxListeners } from 'node:events';
import type { JSONRPCMessage, RequestId, Transport, TransportSendOptions } from '@modelcontextprotocol/client';
import type { Dispatcher } from 'undici';
import type { AnswerLedger, ReadCounters } from '../answer-ledger.js';
import type { EventStreamParser } from './event-stream.js';
import { HttpAnswers } from './answers.js';
import { delay, discard, header, mediaType, type Body } from './body.js';
import { UpstreamContentError, UpstreamHttpError, UpstreamStreamEndedError } from './errors.js';
import { NotJsonRpcError } from '../json-rpc.js';
import { MessageTooLargeError } from '../stdio/line-splitter.js';
import { bytesText, DEFAULT_MAX_RESULT_BYTES, SMALL_MESSAGE_BYTES } from '../message-bounds.js';
import { StreamBackoff, type ReconnectTiming } from './stream-backoff.js';

export interface StreamableHttpOptions {
  url: URL;
  /** Sent with every request (the upstream's configured headers); the transport's own headers win. */
  headers: Readonly<Record<string, string>>;
  dispatcher: Dispatcher;
  /** The most a call's answer may take (the upstream's `maxResultBytes`; default {@link DEFAULT_MAX_RESULT_BYTES}). */
  maxResultBytes?: number;
  /** Where what reading costs is counted (the upstream's, over its connections). */
  counters?: ReadCounters;
  /** How the GET stream is opened again when it ends (see `StreamBackoff`). */
  reconnect?: Partial<ReconnectTiming>;
  /** Hears why the transport gave the upstream up (a message past its bound, an answer to a request never sent), before it closes. */
  onBroken(why: string): void;
  /** Hears why the GET stream was given up (it keeps ending at once, or cannot be opened): what it would announce is not heard. */
  onEventStreamLost?(why: string): void;
}

const ACCEPT = 'application/json, text/event-stream';
/** The W3C trace context, copied from a message's `_meta` into its request's headers. */
const TRACE_HEADERS = ['traceparent', 'tracestate', 'baggage'] as const;

// The headers the transport sets itself; a configured header of the same name is left out.
const OWN_HEADERS = new Set(['accept', 'content-type', 'content-length', 'last-event-id', 'mcp-session-id', 'mcp-protocol-version']);
/** How long closing waits for the upstream to take the DELETE of its session. */
const DELETE_TIMEOUT_MS = 2_000;
/** Failed reopens of an event stream are tried this many times. */
const MAX_RECONNECT_ATTEMPTS = 2;

/**
 * MCP's Streamable HTTP transport, client side, over undici's `request` (no fetch, no web
 * streams: the SDK's transport spent about 1 ms of CPU a call there). Each message is a POST that
 * accepts JSON or an event stream; the session id from `initialize` and the protocol version go
 * with every request after it; once the session is up, a GET stream carries what the upstream
 * sends on its own (`list_changed`), reopened when it ends; closing aborts what is in flight and
 * DELETEs the session. A request whose event stream ends before its answer is resumed from the
 * last event id (GET with `Last-Event-ID`) when the stream gave one. What the upstream sends is
 * read through {@link HttpAnswers}: each body and event bounded by the request it answers (past
 * it, that request is refused), the GET stream's events by a small message's bound (past it, or
 * at an answer to a request never sent, the transport is given up: `onBroken`, then closed).
 */
export class StreamableHttpTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  /** One request per message: a request's own signal aborts it (the 2026 revision's cancellation). */
  readonly hasPerRequestStream = true;
  sessionId: string | undefined;
  /** The requests sent and what their answers may take. */
  readonly answers: AnswerLedger;

  readonly #options: StreamableHttpOptions;
  readonly #read: HttpAnswers;
  readonly #backoff: StreamBackoff;
  readonly #origin: string;
  readonly #path: string;
  readonly #headers: Record<string, string> = {};
  // Aborts every request and stream at close; undici removes its listener as each request ends.
  readonly #closing = new AbortController();
  /** Stops the event stream of each request still being answered, by request id. */
  readonly #streams = new Map<RequestId, () => void>();
  #protocolVersion: string | undefined;
  #closed = false;
  #reconnectTimer: NodeJS.Timeout | undefined;

  constructor(options: StreamableHttpOptions) {
    this.#options = options;
    this.#origin = options.url.origin;
    this.#path = `${options.url.pathname}${options.url.search}`;
    for (const [name, value] of Object.entries(options.headers)) if (!OWN_HEADERS.has(name.toLowerCase())) this.#headers[name.toLowerCase()] = value;
    if (options.url.username !== '' || options.url.password !== '') {
      this.#headers['authorization'] ??=
        `Basic ${Buffer.from(`${decodeURIComponent(options.url.username)}:${decodeURIComponent(options.url.password)}`).toString('base64')}`;
    }
    // As many listeners as requests in flight, which the upstream's slots bound.
    setMaxListeners(0, this.#closing.signal);
    this.#read = new HttpAnswers(options.maxResultBytes ?? DEFAULT_MAX_RESULT_BYTES, options.counters, {
      message: (message) => this.onmessage?.(message),
      error: (error) => this.onerror?.(error),
      breach: (why) => this.#giveUp(`the upstream ${why}`),
    });
    this.answers = this.#read.ledger;
    this.#backoff = new StreamBackoff(options.reconnect);
  }

  async start(): Promise<void> {}

  setProtocolVersion(version: string): void {
    this.#protocolVersion = version;
  }

  get protocolVersion(): string | undefined {
    return this.#protocolVersion;
  }

  async send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    const requestSignal = options?.requestSignal;
    const awaited = 'method' in message && 'id' in message ? message.id : undefined;
    try {
      if (this.#closed) throw new Error('the connection to the upstream is closed');
      this.answers.sent(message);
      const initialize = 'method' in message && message.method === 'initialize';
      const headers = this.#requestHeaders(ACCEPT, initialize);
      headers['content-type'] = 'application/json';
      if (options?.headers !== undefined) {
        for (const [name, value] of Object.entries(options.headers)) if (!OWN_HEADERS.has(name.toLowerCase())) headers[name.toLowerCase()] = value;
      }
      // A call's trace context goes in its _meta for the upstream's MCP layer, and here for its HTTP layer.
      const meta = 'method' in message ? message.params?.['_meta'] : undefined;
      if (meta !== undefined && meta !== null && typeof meta === 'object') {
        for (const name of TRACE_HEADERS) {
          const value = (meta as Record<string, unknown>)[name];
          if (typeof value === 'string') headers[name] = value;
        }
      }
      const signal = requestSignal === undefined ? this.#closing.signal : AbortSignal.any([this.#closing.signal, requestSignal]);
      const response = await this.#options.dispatcher.request({
        origin: this.#origin,
        path: this.#path,
        method: 'POST',
        headers,
        body: JSON.stringify(message),
        signal,
      });
      const { statusCode, body } = response;
      if (statusCode < 200 || statusCode > 299) {
        await discard(body);
        throw new UpstreamHttpError(statusCode);
      }
      if (initialize) this.sessionId = header(response.headers, 'mcp-session-id');
      if (statusCode === 202 || awaited === undefined) {
        await discard(body);
        if ('method' in message && message.method === 'notifications/initialized') this.#openEventStream(0);
        // The upstream has the cancellation now: the call's stream, which it may never end, goes.
        if ('method' in message && message.method === 'notifications/cancelled') this.#streams.get(message.params?.['requestId'] as RequestId)?.();
        return;
      }
      const type = mediaType(response.headers);
      if (type === 'application/json') {
        await this.#read.readJson(body, response.headers, awaited);
      } else if (type === 'text/event-stream') {
        await this.#readRequestStream(body, awaited);
      } else {
        await discard(body);
        throw new UpstreamContentError('the upstream answered neither JSON nor an event stream');
      }
    } catch (err) {
      const error =
        err instanceof SyntaxError || err instanceof NotJsonRpcError
          ? new UpstreamContentError('the upstream answered what is not a JSON-RPC message')
          : (err as Error);
      if (!this.#closed && requestSignal?.aborted !== true) this.onerror?.(error);
      throw error;
    } finally {
      // Its answer comes on this exchange or not at all: one later is late.
      if (awaited !== undefined) this.answers.forget(awaited);
    }
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearTimeout(this.#reconnectTimer);
    this.#closing.abort();
    const session = this.sessionId;
    try {
      this.onclose?.();
    } finally {
      // The upstream may let go of the session now rather than at its own timeout; it may refuse (405).
      if (session !== undefined) await this.#deleteSession().catch(() => undefined);
    }
  }

  async #deleteSession(): Promise<void> {
    const { body } = await this.#options.dispatcher.request({
      origin: this.#origin,
      path: this.#path,
      method: 'DELETE',
      headers: this.#requestHeaders(undefined, false),
      signal: AbortSignal.timeout(DELETE_TIMEOUT_MS),
    });
    await discard(body);
  }

  #requestHeaders(accept: string | undefined, initialize: boolean): Record<string, string> {
    const headers: Record<string, string> = { ...this.#headers };
    if (accept !== undefined) headers['accept'] = accept;
    if (this.sessionId !== undefined && !initialize) headers['mcp-session-id'] = this.sessionId;
    if (this.#protocolVersion !== undefined) headers['mcp-protocol-version'] = this.#protocolVersion;
    return headers;
  }

  /**
   * The event stream answering request `id`: read to its end; resumed from its last event id
   * while it ends before the answer; without an id to resume from, the request fails. A
   * cancellation of the request ends it quietly; an event past the request's allowance ends it
   * with a refusal for the request.
   */
  async #readRequestStream(body: Body, id: RequestId): Promise<void> {
    let answered = false;
    let stopped = false;
    let current = body;
    this.#streams.set(id, () => {
      stopped = true;
      current.destroy();
    });
    const parser = this.#read.parser(this.#read.allowance(id), (message) => {
      if (!('method' in message) && 'id' in message && message.id === id) answered = true;
    });
    try {
      await this.#read.readEvents(body, parser);
      for (let attempt = 0; !answered && !this.#closed && !stopped; attempt++) {
        if (parser.lastEventId === undefined || attempt >= MAX_RECONNECT_ATTEMPTS) {
          throw new UpstreamStreamEndedError('the upstream ended the event stream of the call without answering it');
        }
        await delay(this.#backoff.base(parser.retryMs), this.#closing.signal);
        const resumed = stopped ? undefined : await this.#get(parser.lastEventId);
        if (resumed === undefined) continue;
        current = resumed;
        if (stopped) resumed.destroy();
        await this.#read.readEvents(resumed, parser);
      }
    } catch (err) {
      if (err instanceof MessageTooLargeError) return this.#read.refuse(id);
      if (!stopped) throw err;
    } finally {
      this.#streams.delete(id);
    }
  }

  /**
   * The stream of what the upstream sends on its own: opened once the session is up (an upstream
   * that offers none answers 405), and again, from its last event id, each time it ends, after
   * the waits of {@link StreamBackoff} (given up after many quick ends in a row); an open that
   * fails is tried again {@link MAX_RECONNECT_ATTEMPTS} times, then given up. Its events may take
   * a small message's bound: past it the upstream is given up.
   */
  #openEventStream(attempt: number, parser = this.#read.parser(SMALL_MESSAGE_BYTES)): void {
    if (this.#closed) return;
    void (async () => {
      let openedAt: number | undefined;
      try {
        const body = await this.#get(parser.lastEventId);
        if (body === undefined) return;
        openedAt = performance.now();
        await this.#read.readEvents(body, parser);
        this.#streamEnded(performance.now() - openedAt, parser);
      } catch (err) {
        if (this.#closed) return;
        if (err instanceof MessageTooLargeError) return void this.#giveUp(`the upstream sent a message of more than ${bytesText(SMALL_MESSAGE_BYTES)}`);
        this.onerror?.(err as Error);
        if (openedAt !== undefined) this.#streamEnded(performance.now() - openedAt, parser);
        else if (attempt < MAX_RECONNECT_ATTEMPTS) this.#reopen(attempt + 1, parser, this.#backoff.base(parser.retryMs));
        else this.#options.onEventStreamLost?.(`its event stream could not be opened again (${(err as Error).message})`);
      }
    })();
  }

  #streamEnded(livedMs: number, parser: EventStreamParser): void {
    const wait = this.#backoff.ended(livedMs, parser.retryMs);
    if (wait === undefined) this.#options.onEventStreamLost?.(this.#backoff.givenUp);
    else this.#reopen(0, parser, wait);
  }

  #reopen(attempt: number, parser: EventStreamParser, wait: number): void {
    if (this.#closed) return;
    clearTimeout(this.#reconnectTimer);
    this.#reconnectTimer = setTimeout(() => this.#openEventStream(attempt, parser), wait);
    this.#reconnectTimer.unref();
  }

  /** A GET of the event stream (from `lastEventId` when given); undefined when the upstream offers none (405). */
  async #get(lastEventId: string | undefined): Promise<Body | undefined> {
    const headers = this.#requestHeaders('text/event-stream', false);
    if (lastEventId !== undefined) headers['last-event-id'] = lastEventId;
    const response = await this.#options.dispatcher.request({ origin: this.#origin, path: this.#path, method: 'GET', headers, signal: this.#closing.signal });
    if (response.statusCode === 405) {
      await discard(response.body);
      return undefined;
    }
    if (response.statusCode < 200 || response.statusCode > 299) {
      await discard(response.body);
      throw new UpstreamHttpError(response.statusCode);
    }
    if (mediaType(response.headers) !== 'text/event-stream') {
      await discard(response.body);
      throw new UpstreamContentError('the upstream answered the event stream request with something else');
    }
    return response.body;
  }

  /** Gives the upstream up (`why` is its reason), and closes; the error says why to whoever read. */
  #giveUp(why: string): UpstreamContentError {
    if (!this.#closed) {
      this.#options.onBroken(why);
      void this.close();
    }
    return new UpstreamContentError(why);
  }
}
