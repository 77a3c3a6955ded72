import { Client, type JSONRPCMessage, type RequestId, type Transport } from '@modelcontextprotocol/client';
import type { Logger } from 'pino';
import type { Agent } from 'undici';
import { AbandonedCalls } from './abandoned-calls.js';
import { readCounters, type ReadCounters } from './answer-ledger.js';
import { secretValues, type UpstreamSpec } from './config.js';
import { describeHttpFailure, httpAgent, isConnectionFailure } from './http/transport.js';
import { PERMISSIVE, ToolLister, relister } from './listing.js';
import { bytesText } from './message-bounds.js';
import { redactor } from './redact.js';
import { StdioProcessTransport } from './stdio/transport.js';
import type { ReconnectTiming } from './http/stream-backoff.js';
import { connectFailure, lostReason, refusalReason, upstreamTransport, type BoundedTransport } from './upstream-transport.js';
import type { UpstreamConfinement } from './confinement.js';
import { STOPPING_GRACE_MS } from '../core/executor.js';
import { ConcurrencyLimiter, defaultShareOfQueue, defaultShareOfSlots } from '../core/limiter.js';

/** Where an upstream is: not started yet (lazy), connecting, serving, down (waiting to restart), or stopped for good. */
export type UpstreamState = 'idle' | 'starting' | 'ready' | 'down' | 'stopped';

/** What `/readyz` and the metrics say of an upstream. */
export interface UpstreamStatus {
  state: UpstreamState;
  transport: 'stdio' | 'http';
  /** Tools served from it now. */
  tools: number;
  /** Tools it lists that are not served (changed or new under the lock, or refused). */
  held: number;
  restarts: number;
  /** Why it is down, when it is: never holds a secret (no command line, no header, no URL query). */
  reason?: string;
}

export interface UpstreamOptions {
  log: Logger;
  /** toolport's version, sent as the client's. */
  version: string;
  /** Hears every tool list the upstream gives: at each connection, on `list_changed`, and on each periodic re-list. */
  onTools(tools: readonly unknown[]): void;
  /** Hears each change of state. */
  onState?(state: UpstreamState): void;
  /** Re-lists this often when the upstream does not announce changes; 0: never. */
  relistMs?: number;
  /** First wait before a restart; it doubles up to `maxBackoffMs`. */
  backoffMs?: number;
  maxBackoffMs?: number;
  /** How long connecting (the handshake and the first list) may take. */
  connectTimeoutMs?: number;
  /** How long a call aborted before the upstream answered keeps its slot at most: until the upstream answers it, or this long. */
  abortGraceMs?: number;
  /** The environment a stdio upstream gets besides its own `env`: PATH and HOME, taken from here (the server's environment). */
  baseEnv: Record<string, string | undefined>;
  /** The sandbox of a stdio upstream, or why there is none here (see `StdioTransportOptions.confinement`). */
  confinement?: UpstreamConfinement | string;
  /** How long a stdio line may stall before the upstream is taken for stuck (see `LINE_STALL_MS`, the default). */
  lineStallMs?: number;
  /** How an HTTP upstream's GET stream is opened again (see `RECONNECT_TIMING`, the default). */
  streamReconnect?: Partial<ReconnectTiming>;
}

/** A call an upstream could not answer: it is down, stopped, or went away during the call. The text is for the model. */
export class UpstreamUnavailableError extends Error {
  override readonly name = 'UpstreamUnavailableError';
}

export interface UpstreamCallOptions {
  signal: AbortSignal;
  /** Who the call is for (`ToolContext.caller`): each caller gets a share of the upstream's slots. */
  caller?: string | undefined;
  onProgress?: ((update: { progress: number; total?: number; message?: string }) => void) | undefined;
  /** The trace context of the call's client span (`traceparent`, `tracestate`), sent in `params._meta` as the MCP conventions say. */
  traceContext?: Readonly<Record<string, string>> | undefined;
}

const DEFAULT_BACKOFF_MS = 500;
/** Calls that may wait for one of an upstream's slots, per slot. */
const QUEUE_PER_SLOT = 8;
const DEFAULT_MAX_BACKOFF_MS = 30_000;
const DEFAULT_CONNECT_TIMEOUT_MS = 30_000;
const DEFAULT_RELIST_MS = 5 * 60_000;
/** A connection that stayed up this long resets the backoff: the next failure is a new story. */
const STABLE_AFTER_MS = 60_000;
/** The longest delay a timer takes; the deadline is toolport's, so the SDK's own timeout is pushed out of the way. */
const NO_SDK_TIMEOUT_MS = 2_147_483_647;

/**
 * One upstream MCP server, kept connected: connects (starting the process of a stdio upstream),
 * lists its tools, follows `list_changed` (or re-lists now and then), forwards calls with their
 * progress and cancellation, bounds the calls in flight to it, and restarts it with backoff when it
 * exits or the connection drops; the calls it took with it end as errors that say so.
 */
export class Upstream {
  readonly spec: UpstreamSpec;
  readonly #options: UpstreamOptions;
  readonly #log: Logger;
  // Calls in flight to the upstream, whichever of its tools: shared fairly between callers, as a tool's slots are.
  readonly #slots: ConcurrencyLimiter;
  /** Hides this upstream's secrets (its env and header values, what its `${VAR}`s gave) in logs and messages. */
  readonly redact: (text: string) => string;
  #state: UpstreamState = 'idle';
  #client: Client | undefined;
  #transport: BoundedTransport | undefined;
  /** The transport of a connection being made, which `stop` closes. */
  #opening: BoundedTransport | undefined;
  #connecting: Promise<void> | undefined;
  #restartTimer: NodeJS.Timeout | undefined;
  #relistTimer: NodeJS.Timeout | undefined;
  #backoffMs: number;
  #readySince = 0;
  #restarts = 0;
  #reason: string | undefined;
  #agent: Agent | undefined;
  /** Why a transport was given up from this side (an HTTP stream past the message bound, a failed request), for its reason. */
  readonly #brokenBy = new WeakMap<Transport, string>();
  /** Set while a call's `tools/call` request is being sent, to learn its id (the SDK sends it synchronously). */
  #sending: { id?: RequestId } | undefined;
  readonly #abandoned: AbandonedCalls;
  /** Lists the connected upstream again (its `relister`). */
  #relistNow: (() => void) | undefined;
  /** Transports whose GET stream was given up: their upstream is re-listed periodically, whatever it announces. */
  readonly #silent = new WeakSet<Transport>();
  readonly #lister: ToolLister;
  /** What reading its messages cost, over all its connections (for tests and measurements). */
  readonly counters: ReadCounters = readCounters();
  tools = 0;
  held = 0;

  constructor(spec: UpstreamSpec, options: UpstreamOptions) {
    this.spec = spec;
    this.#options = options;
    this.#log = options.log;
    const queueSize = spec.maxConcurrency * QUEUE_PER_SLOT;
    this.#slots = new ConcurrencyLimiter({
      tool: spec.name,
      label: `Upstream ${JSON.stringify(spec.name)}`,
      limit: spec.maxConcurrency,
      queueSize,
      limitPerCaller: defaultShareOfSlots(spec.maxConcurrency),
      queuePerCaller: defaultShareOfQueue(queueSize),
    });
    this.#backoffMs = options.backoffMs ?? DEFAULT_BACKOFF_MS;
    this.#abandoned = new AbandonedCalls((caller) => this.#slots.release(caller), options.abortGraceMs ?? STOPPING_GRACE_MS);
    this.redact = redactor(secretValues([spec]));
    this.#lister = new ToolLister(spec.tools, options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS, this.#log);
  }

  get name(): string {
    return this.spec.name;
  }

  get state(): UpstreamState {
    return this.#state;
  }

  /** The process id of a stdio upstream while it is connected. */
  get pid(): number | undefined {
    return this.#transport instanceof StdioProcessTransport ? this.#transport.pid : undefined;
  }

  status(): UpstreamStatus {
    return {
      state: this.#state,
      transport: this.spec.transport,
      tools: this.tools,
      held: this.held,
      restarts: this.#restarts,
      ...(this.#reason !== undefined && this.#state !== 'ready' ? { reason: this.#reason } : {}),
    };
  }

  /** Connects and lists; resolves once ready, rejects with why it could not (and a restart is scheduled). */
  start(): Promise<void> {
    if (this.#state === 'stopped') return Promise.reject(new UpstreamUnavailableError(`Upstream "${this.name}" is stopped.`));
    if (this.#state === 'ready') return Promise.resolve();
    return (this.#connecting ??= this.#connect().finally(() => (this.#connecting = undefined)));
  }

  async #connect(): Promise<void> {
    clearTimeout(this.#restartTimer);
    this.#setState('starting');
    const transport = this.#makeTransport();
    this.#opening = transport;
    this.#watch(transport);
    const client = new Client(
      { name: 'toolport', version: this.#options.version },
      {
        // Output schemas are checked by toolport's own pipeline, after the definition checks; the
        // SDK would compile an upstream's patterns unchecked.
        jsonSchemaValidator: { getValidator: () => (input: unknown) => ({ valid: true, data: input as never, errorMessage: undefined }) },
        // Tool lists are read page by page here (ToolLister); this caps the SDK's own walk, should it start one.
        listMaxPages: 1,
      },
    );
    // Followed with toolport's own bounded listing, not the SDK's (which gathers every page first).
    const relist = relister(
      () => this.#relist(client, transport),
      () => this.#client === client,
    );
    client.setNotificationHandler('notifications/tools/list_changed', relist);
    const timeoutMs = this.#options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
    let listed: unknown[];
    try {
      await client.connect(transport, { timeout: timeoutMs });
      listed = await this.#lister.list(client);
    } catch (err) {
      this.#opening = undefined;
      this.#reason = this.redact(connectFailure(transport, err, this.#brokenBy.get(transport)));
      await client.close().catch(() => undefined);
      await transport.close().catch(() => undefined);
      if (this.#state === 'stopped') throw new UpstreamUnavailableError(`Upstream "${this.name}" is stopped.`);
      this.#log.warn({ reason: this.#reason }, 'upstream could not be reached');
      this.#down();
      throw new UpstreamUnavailableError(`Upstream "${this.name}" is not available: ${this.#reason}.`);
    }
    this.#opening = undefined;
    // Stopped while connecting (the server is shutting down): what was started goes at once.
    if (this.#state === 'stopped') {
      await client.close().catch(() => undefined);
      await transport.close().catch(() => undefined);
      throw new UpstreamUnavailableError(`Upstream "${this.name}" is stopped.`);
    }
    this.#client = client;
    this.#transport = transport;
    transport.onclose = chain(transport.onclose, () => this.#lost(client, transport));
    this.#readySince = Date.now();
    this.#reason = undefined;
    this.#relistNow = relist;
    this.#options.onTools(listed);
    this.#setState('ready');
    this.#scheduleRelist(client, transport, relist);
    // An announcement that came during the first listing.
    relist.pending();
    this.#log.info({ tools: listed.length, server: client.getServerVersion()?.name }, 'upstream connected');
  }

  /**
   * Sees what a call needs: the id of each `tools/call` sent (see `call`), and the answers to
   * calls aborted before the upstream answered, which free their slots (the transport drops them
   * unread, as late answers; an answer that raced the cancellation is seen as it goes to the SDK:
   * Protocol.connect keeps an `onmessage` set before it and calls it first).
   */
  #watch(transport: BoundedTransport): void {
    const send = transport.send.bind(transport);
    transport.send = (message, options) => {
      if (this.#sending !== undefined && 'method' in message && message.method === 'tools/call' && 'id' in message) this.#sending.id = message.id;
      return send(message, options);
    };
    transport.answers.onLate = (id) => this.#abandoned.answered(id);
    transport.onmessage = (message: JSONRPCMessage) => {
      if (this.#abandoned.size > 0 && 'id' in message && !('method' in message) && message.id !== undefined) this.#abandoned.answered(message.id);
    };
  }

  /** Lists again for `relister`; an HTTP upstream that cannot be reached is lost, as a process that exits is. */
  async #relist(client: Client, transport: BoundedTransport): Promise<void> {
    try {
      const tools = await this.#lister.list(client);
      if (this.#client === client) this.#options.onTools(tools);
    } catch (err) {
      if (this.#client !== client) return;
      if (this.#connectionFailed(client, transport, err)) return;
      this.#log.warn({ err: this.redact(refusalReason(transport.answers, err) ?? (err as Error).message) }, 'upstream tool list could not be read again');
    }
  }

  /**
   * A request to an HTTP upstream failed below JSON-RPC (its Streamable HTTP transport closes only
   * when told to, so nothing else notices it went away): the connection is lost, and restarted
   * with backoff. Says whether it was such a failure.
   */
  #connectionFailed(client: Client, transport: BoundedTransport, err: unknown): boolean {
    if (this.spec.transport !== 'http' || !isConnectionFailure(err)) return false;
    if (!this.#brokenBy.has(transport)) this.#brokenBy.set(transport, describeHttpFailure(err));
    this.#lost(client, transport);
    void client.close().catch(() => undefined);
    return true;
  }

  #makeTransport(): BoundedTransport {
    return upstreamTransport(this.spec, {
      ...this.#options,
      redact: this.redact,
      agent: () => (this.#agent ??= httpAgent()),
      counters: this.counters,
      onBroken: (transport, why) => this.#brokenBy.set(transport, why),
      onEventStreamLost: (transport, why) => this.#eventStreamLost(transport, why),
    });
  }

  /**
   * The HTTP upstream's GET stream was given up (it kept ending at once): its `list_changed` would
   * go unheard, so it is listed again every `relistMs` instead, as one that announces nothing is.
   */
  #eventStreamLost(transport: Transport, why: string): void {
    this.#log.warn({ reason: this.redact(why) }, 'upstream event stream given up: its tool list is read again periodically instead');
    this.#silent.add(transport);
    if (this.#transport === transport && this.#client !== undefined && this.#relistNow !== undefined)
      this.#scheduleRelist(this.#client, transport, this.#relistNow);
  }

  /**
   * Connects, lists, and disconnects again: a lazy upstream's tools are known from start-up (when
   * no lock file pins them), and its process runs only once a call needs it.
   */
  async probe(): Promise<void> {
    await this.start();
    if (this.#state === 'stopped') return;
    const client = this.#client;
    const transport = this.#transport;
    this.#client = undefined;
    this.#transport = undefined;
    clearTimeout(this.#relistTimer);
    this.#relistTimer = undefined;
    this.#relistNow = undefined;
    this.#abandoned.releaseAll();
    this.#setState('idle');
    await client?.close().catch(() => undefined);
    await transport?.close().catch(() => undefined);
  }

  /** The connection ended while ready: the process exited or the stream broke. */
  #lost(client: Client, transport: BoundedTransport): void {
    if (this.#client !== client) return;
    this.#client = undefined;
    this.#transport = undefined;
    clearTimeout(this.#relistTimer);
    this.#relistTimer = undefined;
    this.#relistNow = undefined;
    // The calls it had not answered will not be answered now.
    this.#abandoned.releaseAll();
    if (this.#state === 'stopped' || this.#state === 'idle') return;
    this.#reason = this.redact(lostReason(transport, this.#brokenBy.get(transport)));
    this.#log.warn({ reason: this.#reason }, 'upstream lost');
    if (Date.now() - this.#readySince >= STABLE_AFTER_MS) this.#backoffMs = this.#options.backoffMs ?? DEFAULT_BACKOFF_MS;
    this.#down();
  }

  #down(): void {
    this.#setState('down');
    const wait = this.#backoffMs;
    this.#backoffMs = Math.min(wait * 2, this.#options.maxBackoffMs ?? DEFAULT_MAX_BACKOFF_MS);
    clearTimeout(this.#restartTimer);
    this.#restartTimer = setTimeout(() => {
      this.#restarts++;
      this.start().catch(() => undefined);
    }, wait);
    this.#restartTimer.unref();
  }

  #scheduleRelist(client: Client, transport: Transport, relist: () => void): void {
    const every = this.#options.relistMs ?? DEFAULT_RELIST_MS;
    const announces = client.getServerCapabilities()?.tools?.listChanged === true && !this.#silent.has(transport);
    if (every <= 0 || this.#relistTimer !== undefined || announces) return;
    this.#relistTimer = setInterval(relist, every);
    this.#relistTimer.unref();
  }

  #setState(state: UpstreamState): void {
    if (this.#state === state) return;
    this.#state = state;
    this.#options.onState?.(state);
  }

  /**
   * Calls a tool of the upstream by its own name; resolves to the wire result as the upstream gave
   * it. Rejects with `UpstreamUnavailableError` (text for the model) when the upstream is not
   * there or leaves during the call, and with the signal's reason when the call is aborted (the
   * SDK tells the upstream: `notifications/cancelled`, or a closed request on 2026-07-28); an
   * aborted call's slot stays taken until the upstream answers it, or `abortGraceMs` at most.
   */
  async call(tool: string, input: Record<string, unknown>, options: UpstreamCallOptions): Promise<unknown> {
    if (this.#state === 'idle') await this.start();
    // Throws QUEUE_FULL (a ToolportError) when the upstream's queue, or the caller's share of it, is full.
    const admitted = this.#slots.acquire(options.signal, options.caller);
    if (admitted !== true && !(await admitted)) throw options.signal.reason;
    let slotKept = false;
    try {
      const client = this.#client;
      if (client === undefined) {
        const why = this.#state === 'stopped' ? 'it is stopped' : `it is down (${this.#reason ?? 'connecting'}); toolport is restarting it`;
        throw new UpstreamUnavailableError(`Upstream "${this.name}" cannot take the call now: ${why}.`);
      }
      // The request itself rather than callTool, whose extras (output schemas and header mirroring
      // from a cached list) toolport does without: sent synchronously, so #watch learns its id.
      const sent: { id?: RequestId } = {};
      this.#sending = sent;
      let answer: Promise<unknown>;
      try {
        const params =
          options.traceContext === undefined ? { name: tool, arguments: input } : { name: tool, arguments: input, _meta: { ...options.traceContext } };
        answer = client.request({ method: 'tools/call', params }, PERMISSIVE.callResult, {
          signal: options.signal,
          timeout: NO_SDK_TIMEOUT_MS,
          ...(options.onProgress !== undefined ? { onprogress: options.onProgress } : {}),
        });
      } finally {
        this.#sending = undefined;
      }
      try {
        return await answer;
      } catch (err) {
        const refused = this.#transport?.answers.refusal(err);
        if (refused !== undefined) {
          throw new UpstreamUnavailableError(
            `Upstream "${this.name}" answered with more than ${bytesText(refused.maxBytes)}, the most toolport takes from it for one call ("maxResultBytes" in its entry of the upstreams file); the answer was dropped unread.`,
          );
        }
        if (options.signal.aborted) {
          // The upstream may go on with it (it need not heed the cancellation): the slot stays
          // taken until it answers, for a while at most, so aborting calls cannot run more at once.
          if (sent.id !== undefined && this.#client === client) {
            this.#abandoned.keep(sent.id, options.caller);
            slotKept = true;
          }
          throw options.signal.reason;
        }
        if (this.#client === client && this.#transport !== undefined) this.#connectionFailed(client, this.#transport, err);
        if (this.#client !== client) {
          throw new UpstreamUnavailableError(
            `Upstream "${this.name}" went away during the call (${this.#reason ?? 'connection closed'}); the call may or may not have taken effect. toolport is restarting it.`,
          );
        }
        throw err;
      }
    } finally {
      if (!slotKept) this.#slots.release(options.caller);
    }
  }

  /** Ends the connection (and the process group of a stdio upstream) for good. */
  async stop(): Promise<void> {
    this.#setState('stopped');
    clearTimeout(this.#restartTimer);
    clearTimeout(this.#relistTimer);
    this.#relistTimer = undefined;
    this.#relistNow = undefined;
    const client = this.#client;
    const transport = this.#transport;
    this.#client = undefined;
    this.#transport = undefined;
    this.#abandoned.releaseAll();
    await client?.close().catch(() => undefined);
    await transport?.close().catch(() => undefined);
    // A connection being made fails now, rather than at its timeout with the process still running.
    await this.#opening?.close().catch(() => undefined);
    await this.#agent?.close().catch(() => undefined);
  }
}

function chain(first: (() => void) | undefined, second: () => void): () => void {
  return () => {
    first?.();
    second();
  };
}
