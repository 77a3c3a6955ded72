import { PassThrough } from 'node:stream';
import type { FastifyReply } from 'fastify';
import type { AbortSource } from '../core/call-abort.js';
import type { Progress } from '../core/types.js';
import { BoundedOutput } from '../mcp/bounded-output.js';
import type { JsonRpcNotification, JsonRpcResponse } from '../core/json-rpc.js';
import { DEFAULT_PROGRESS_INTERVAL_MS, ProgressReporter } from '../mcp/progress.js';

/** The media type of an event stream, as a request's Accept names it and a response's Content-Type says it. */
export const EVENT_STREAM_TYPE = 'text/event-stream';

/**
 * The buffer of a stream, before the socket's own: the stream counts as blocked once it holds this
 * much (on each of its two sides) that the socket has not taken. As for MCP's streams.
 */
const STREAM_BUFFER_BYTES = 16 * 1024;

/** What the event stream of `POST /tools/<name>` carries, for the OpenAPI document. */
export const CALL_EVENTS =
  'With `Accept: text/event-stream`, Server-Sent Events: `event: progress` while the tool reports progress, data `{"progress": number, "total"?: number, "message"?: string}` (progress only grows; at most 50 events a second, the latest report never dropped), then one `event: result` whose data is the JSON answer (as with `application/json`; an error body for a refusal that came after the stream began), then the end. Comment lines (`:`) keep a silent call\'s connection open. The stream begins at the first report, after half the idle timeout, or with the result; a refusal before it is answered with its status and error body.';

/** What the event stream of `POST /calls` carries. */
export const TURN_EVENTS =
  'With `Accept: text/event-stream`, Server-Sent Events: `event: progress` for each call that reports progress, data `{"id": string, "index": number, "progress": number, "total"?: number, "message"?: string}` naming the call by its provider id and its place in the turn (at most 50 events a second per call, the latest report never dropped), then one `event: result` whose data is the JSON answer, then the end. Comment lines (`:`) keep a silent turn\'s connection open. A turn refused whole is answered with its status and error body.';

/** A 200 answer that is JSON, or an event stream when the client asks for one (`events` says what it carries). */
export function withEventStream<Answer extends { description: string }>(answer: Answer, events: string) {
  return {
    description: answer.description,
    content: { 'application/json': { schema: answer }, [EVENT_STREAM_TYPE]: { schema: { type: 'string', description: events } } },
  };
}

/** How often a stream sends a keep-alive comment: twice per idle timeout, at most once a second. */
export function keepAliveInterval(idleTimeoutMs: number): number {
  return Math.max(1000, Math.floor(idleTimeoutMs / 2));
}

/** Whether the client takes an event stream: its Accept lists `text/event-stream`. */
export function acceptsEventStream(accept: string | undefined): boolean {
  return accept !== undefined && accept.includes(EVENT_STREAM_TYPE);
}

/**
 * A REST call's answer as Server-Sent Events: `progress` events while the call runs, then one
 * `result` event whose data is the body the JSON answer would have had, then the end. The stream
 * starts at the first progress report, or at the first keep-alive tick (half the idle timeout) of
 * a silent call, or with the result; a refusal before it started is answered as without the
 * stream (its status and error body), so a client gets the same statuses either way.
 *
 * What a client does not take is not kept for it, as for MCP: while the stream and socket buffers
 * are full, a call's progress waits in place of its previous report (one per call, never a
 * queue), keep-alive comments are skipped, and so nothing re-arms the connection's idle timeout,
 * which then cuts off a client that reads nothing and aborts its call.
 */
export class EventStream {
  readonly #reply: FastifyReply;
  readonly #waiting = new Map<string, string>();
  readonly #keepAlive: NodeJS.Timeout;
  #body: PassThrough | undefined;
  #blocked = false;
  #ended = false;

  constructor(reply: FastifyReply, keepAliveMs: number) {
    this.#reply = reply;
    // A comment keeps a silent call's connection (and any proxy on the way) from timing out.
    this.#keepAlive = setInterval(() => {
      if (!this.#blocked) this.#write(':\n\n');
    }, keepAliveMs);
  }

  /** True once the response is an event stream (its status and headers are sent). */
  get started(): boolean {
    return this.#body !== undefined;
  }

  /**
   * A listener for one call's progress (`key` tells the calls of a turn apart; `fields` go into
   * each event, before the report): at most one report per `intervalMs`, the latest one kept.
   * `finish` sends what waits; nothing is sent once `signal` aborts.
   */
  progressOf(key: string, fields: Record<string, unknown>, signal: AbortSource, intervalMs = DEFAULT_PROGRESS_INTERVAL_MS): ProgressReporter {
    return new ProgressReporter(
      key,
      // The report as MCP would send it; the event carries its fields, without the token.
      ({ params }) => {
        const { progress, total, message } = params as unknown as Progress;
        this.#progress(key, JSON.stringify({ ...fields, progress, total, message }));
      },
      intervalMs,
      signal,
    );
  }

  /** Sends the `result` event (after the progress that waits, whatever the backpressure) and ends the stream. */
  end(data: string): FastifyReply {
    this.close();
    this.#start();
    this.#flushWaiting(true);
    this.#write(`event: result\ndata: ${data}\n\n`);
    this.#ended = true;
    this.#body!.end();
    return this.#reply;
  }

  /** Stops the keep-alive; nothing more is written unless `end` is called. */
  close(): void {
    clearInterval(this.#keepAlive);
  }

  #progress(key: string, data: string): void {
    if (this.#ended) return;
    this.#start();
    if (this.#blocked) {
      this.#waiting.delete(key);
      this.#waiting.set(key, data);
      return;
    }
    this.#write(`event: progress\ndata: ${data}\n\n`);
  }

  #start(): void {
    if (this.#body !== undefined) return;
    const body = new PassThrough({ highWaterMark: STREAM_BUFFER_BYTES });
    this.#body = body;
    // Through reply.send, so the app's onSend hooks run (the connection guard, x-request-id).
    void this.#reply.code(200).header('content-type', EVENT_STREAM_TYPE).header('cache-control', 'no-cache').header('x-accel-buffering', 'no').send(body);
  }

  #write(text: string): void {
    if (this.#body === undefined) this.#start();
    const body = this.#body!;
    if (body.destroyed || body.writableEnded) return;
    if (!body.write(text) && !this.#blocked) {
      this.#blocked = true;
      body.once('drain', this.#drained);
    }
  }

  /** Writes what waits, in the order it came; unless `all`, stops as soon as the stream blocks again. */
  #flushWaiting(all: boolean): void {
    for (const [key, data] of this.#waiting) {
      if (this.#blocked && !all) return;
      this.#waiting.delete(key);
      this.#write(`event: progress\ndata: ${data}\n\n`);
    }
  }

  readonly #drained = (): void => {
    this.#blocked = false;
    if (!this.#ended) this.#flushWaiting(false);
  };
}

/**
 * An MCP answer as an SSE stream (Streamable HTTP): JSON-RPC messages as `message` events,
 * started by the first notification (a call that reports no progress is answered with plain
 * JSON), or at once by `start` (a stream that may stay silent for long). It goes through
 * `reply.send`, so the app's onSend hooks still run. It is bounded: what the client has not taken
 * stays within the stream's buffer, the socket's and one notification of each kind, since while
 * they are full only the latest progress of a call, or change of a subscription, waits
 * (`BoundedOutput`). A comment every `keepAliveMs` keeps the connection's idle timeout from
 * closing a silent stream; a client that takes nothing at all is cut off by that timeout, which
 * counts from the socket's last write once the response has started (nothing is written to a
 * blocked socket), and what it asked for ends as for any client that went away.
 */
export class McpEventStream {
  readonly #reply: FastifyReply;
  readonly #keepAliveMs: number;
  #body: PassThrough | undefined;
  #out: BoundedOutput | undefined;
  #keepAlive: NodeJS.Timeout | undefined;

  constructor(reply: FastifyReply, keepAliveMs: number) {
    this.#reply = reply;
    this.#keepAliveMs = keepAliveMs;
  }

  /** True once the response is an event stream (its status and headers are sent). */
  get started(): boolean {
    return this.#body !== undefined;
  }

  /** Sends a notification, starting the stream if it has not started. */
  readonly notify = (notification: JsonRpcNotification): void => {
    (this.#out ?? this.#begin()).progress(notification);
  };

  /** Starts the stream now, for a stream that may stay silent for long: its status and headers go out at once. */
  start(): void {
    if (this.#out !== undefined) return;
    // Node sends the status and headers with the body's first bytes, and the client waits for them.
    this.#begin().optional(':\n\n');
  }

  /** Sends the response (none for a cancelled request, or a stream that only carries notifications) and ends the stream. */
  end(message?: JsonRpcResponse | JsonRpcResponse[]): FastifyReply {
    this.stopKeepAlive();
    if (message !== undefined && !Array.isArray(message)) this.#out?.send(message);
    this.#out?.close();
    this.#body?.end();
    return this.#reply;
  }

  /** Stops the keep-alive comments: the answer is on its way, or the request ended without one. */
  stopKeepAlive(): void {
    if (this.#keepAlive) clearInterval(this.#keepAlive);
    this.#keepAlive = undefined;
  }

  #begin(): BoundedOutput {
    const body = new PassThrough({ highWaterMark: STREAM_BUFFER_BYTES });
    const out = new BoundedOutput(body, { frame: (text) => `event: message\ndata: ${text}\n\n` });
    this.#body = body;
    this.#out = out;
    void this.#reply.code(200).header('content-type', EVENT_STREAM_TYPE).header('cache-control', 'no-cache').header('x-accel-buffering', 'no').send(body);
    this.#keepAlive = setInterval(() => out.optional(':\n\n'), this.#keepAliveMs);
    return out;
  }
}
