import { isRecord } from '../core/json.js';
import type { Readable, Writable } from 'node:stream';
import { BoundedOutput } from './bounded-output.js';
import type { McpDispatcher } from './dispatcher.js';
import { InFlightCalls } from './cancellable.js';
import { errorResponse, parseIncoming, RpcCodes } from '../core/json-rpc.js';
import { coalesced, DEFAULT_LIST_CHANGED_INTERVAL_MS, LIST_CHANGED, SubscriptionHub, type SubscriptionLimits } from './subscriptions.js';

export interface StdioOptions<Caller> {
  /** Who is calling: the whole stream is one caller (the user who launched the process). */
  caller: Caller;
  /** Longest line taken, in bytes; a longer one is answered with invalid request and skipped. Default 16 MiB. */
  maxLineBytes?: number;
  /** Most requests handled at once; past it, reading pauses. Default 32. */
  maxInFlight?: number;
  /** How long calls may still finish once the input ends, in ms, before they are aborted. Default 2000. */
  endGraceMs?: number;
  /** Shutdown: aborts every call and stops reading; the returned promise resolves once they answered. */
  signal?: AbortSignal;
  /**
   * Subscribes to changes of the tool list (upstream tools come and go); returns what unsubscribes.
   * Each change sends `notifications/tools/list_changed`: unasked once a legacy `initialize` was
   * answered, and on each open `subscriptions/listen` of 2026-07-28, whose era sends nothing
   * unasked. Pair it with the dispatcher's `listChanged` option, which announces the capability.
   */
  onToolsChanged?: (listener: () => void) => () => void;
  /** Most `subscriptions/listen` open at once. Default 16 (the whole stream is one caller). */
  maxSubscriptions?: number;
}

const NEWLINE = 0x0a;

/**
 * Serves MCP over a pair of streams, one JSON-RPC message per line (the stdio transport): each
 * line goes to the dispatcher, each response and progress notification comes out as one line.
 * Requests run concurrently, so `notifications/cancelled` reaches a call that is still running;
 * an `initialize` is answered before the next line is read, and the revision it agreed applies to
 * the requests after it (the legacy handshake's scope is the process). Resolves when the input
 * has ended (or `signal` aborted) and every call has answered; calls still running
 * `endGraceMs` after the input ended are aborted, so the process exits promptly, as the spec asks.
 */
export function serveStdio<Caller>(dispatcher: McpDispatcher<Caller>, input: Readable, output: Writable, options: StdioOptions<Caller>): Promise<void> {
  const maxLineBytes = options.maxLineBytes ?? 16 * 1024 * 1024;
  const maxInFlight = options.maxInFlight ?? 32;
  const endGraceMs = options.endGraceMs ?? 2000;
  const calls = new InFlightCalls();
  const shutdown = new AbortController();
  const lines: string[] = [];
  let parts: Buffer[] = [];
  let partBytes = 0;
  let oversized = false;
  let active = 0;
  // Open subscriptions/listen requests: they last as long as the client wants, so they do not
  // take the places of calls (maxInFlight); the subscriptions' own bound applies to them.
  let listening = 0;
  let initializing = false;
  let ended = false;
  let protocolVersion: string | undefined;
  let graceTimer: NodeJS.Timeout | undefined;
  let resolveDone!: () => void;
  const done = new Promise<void>((resolve) => (resolveDone = resolve));

  // A reader that does not keep up gets each call's latest progress, not a queue of it: only the
  // responses (one per request, and reading pauses while the output is blocked) are always written.
  const out = new BoundedOutput(output, { frame: (text) => `${text}\n`, onDrain: () => pump() });
  const limits: SubscriptionLimits = { perCaller: options.maxSubscriptions ?? 16, total: options.maxSubscriptions ?? 16 };
  const hub = options.onToolsChanged ? new SubscriptionHub(options.onToolsChanged, limits) : undefined;
  const subscriptions = hub?.of('');

  const start = (line: string): void => {
    const parsed = parseIncoming(line);
    if ('reply' in parsed) return out.send(parsed.reply);
    const method = isRecord(parsed.value) ? parsed.value['method'] : undefined;
    const isInitialize = method === 'initialize';
    const isListen = method === 'subscriptions/listen';
    if (isListen) listening++;
    else active++;
    if (isInitialize) initializing = true;
    const context = {
      caller: options.caller,
      calls,
      notify: out.progress,
      notifyAnytime: out.progress,
      signal: shutdown.signal,
      ...(protocolVersion ? { protocolVersion } : {}),
      ...(subscriptions ? { subscriptions } : {}),
    };
    void dispatcher.handle(parsed.value, context).then((outcome) => {
      if (outcome.negotiatedVersion !== undefined) protocolVersion = outcome.negotiatedVersion;
      if (outcome.reply !== undefined) out.send(outcome.reply);
      if (isListen) listening--;
      else active--;
      if (isInitialize) initializing = false;
      pump();
    });
  };

  /** Starts what waits, while the limits allow; pauses or resumes reading; resolves at the end. */
  const pump = (): void => {
    while (!initializing && lines.length > 0 && active < maxInFlight) start(lines.shift()!);
    if (ended) {
      if (active === 0 && listening === 0 && lines.length === 0) finish();
      return;
    }
    if (lines.length > 0 || out.blocked) input.pause();
    else input.resume();
  };

  const onData = (chunk: Buffer | string): void => {
    const data = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    let from = 0;
    for (let at = data.indexOf(NEWLINE); at !== -1; at = data.indexOf(NEWLINE, from)) {
      take(data.subarray(from, at));
      endLine();
      from = at + 1;
    }
    if (from < data.length) take(data.subarray(from));
    pump();
  };

  const take = (piece: Buffer): void => {
    if (oversized || piece.length === 0) return;
    partBytes += piece.length;
    if (partBytes > maxLineBytes) {
      oversized = true;
      parts = [];
    } else {
      parts.push(piece);
    }
  };

  const endLine = (): void => {
    if (oversized) {
      out.send(errorResponse(null, RpcCodes.INVALID_REQUEST, `Invalid Request: the message is longer than ${maxLineBytes} bytes`));
    } else if (partBytes > 0) {
      const line = Buffer.concat(parts, partBytes).toString('utf8').trim();
      if (line !== '') lines.push(line);
    }
    parts = [];
    partBytes = 0;
    oversized = false;
  };

  const onEnd = (): void => {
    if (ended) return;
    if (partBytes > 0 || oversized) endLine();
    ended = true;
    input.off('data', onData);
    // Subscriptions end with the input (their empty results, the graceful close): nothing more will be asked.
    hub?.closeAll();
    if (endGraceMs <= 0) stopAll(new Error('the input ended'));
    else graceTimer = setTimeout(() => stopAll(new Error('the input ended')), endGraceMs);
    pump();
  };

  // Every call: those the client can name by id and those it cannot (a repeated id), through the
  // signal each of them is given.
  const stopAll = (reason: Error): void => {
    shutdown.abort(reason);
    calls.abortAll(reason);
  };

  // The client closed its end (EPIPE comes as an event, not a throw): nothing more can be said,
  // so stop as when the input ends, at once.
  const onOutputError = (): void => {
    lines.length = 0;
    onEnd();
    stopAll(new Error('the output closed'));
  };

  const onAbort = (): void => {
    lines.length = 0;
    hub?.closeAll();
    shutdown.abort(options.signal?.reason);
    onEnd();
    calls.abortAll(options.signal?.reason);
  };

  // Unasked only to a client of the legacy handshake (protocolVersion is what its initialize
  // agreed). Sent as progress is: a reader that does not keep up gets one, however many changes;
  // and at most one a second, as on a subscription.
  const listChanged = coalesced(() => {
    if (protocolVersion !== undefined) out.progress(LIST_CHANGED);
  }, DEFAULT_LIST_CHANGED_INTERVAL_MS);
  const stopListening = options.onToolsChanged?.(listChanged);

  const finish = (): void => {
    stopListening?.();
    listChanged.cancel();
    if (graceTimer) clearTimeout(graceTimer);
    input.off('end', onEnd);
    input.off('error', onEnd);
    out.close();
    options.signal?.removeEventListener('abort', onAbort);
    resolveDone();
  };

  input.on('data', onData);
  input.once('end', onEnd);
  input.once('error', onEnd);
  // Left on after the end: a late error of a closed pipe must not be an uncaught one.
  output.on('error', onOutputError);
  if (options.signal?.aborted) onAbort();
  else options.signal?.addEventListener('abort', onAbort, { once: true });
  return done;
}
