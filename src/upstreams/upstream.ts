import {
  Client,
  ProtocolError,
  SdkError,
  SdkHttpError,
  StreamableHTTPClientTransport,
  type JSONRPCMessage,
  type RequestId,
  type Transport,
} from '@modelcontextprotocol/client';
import type { Logger } from 'pino';
import { Agent, Response, fetch as undiciFetch } from 'undici';
import { secretValues, type UpstreamSpec } from './config.js';
import { DEFINITION_LIMITS } from './definitions.js';
import { redactor } from './redact.js';
import { MAX_MESSAGE_BYTES, StdioProcessTransport } from './stdio-transport.js';
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
/** HTTP upstreams: how long a connection may take, and how long a response may stall between bytes. */
const HTTP_CONNECT_TIMEOUT_MS = 10_000;
const HTTP_BODY_TIMEOUT_MS = 300_000;
/** Most of a tool list read, all pages together (as JSON): past it, or past DEFINITION_LIMITS.tools tools, the rest is not read. */
const LIST_BUDGET_CHARS = 16 * 1024 * 1024;
/** Most pages of a tool list read (the SDK's own default). */
const LIST_MAX_PAGES = 64;
/** After a listing, the next one (for a list_changed) waits at least this long: a flood of announcements is one listing now and then. */
const RELIST_MIN_INTERVAL_MS = 300;

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
  #transport: Transport | undefined;
  /** The transport of a connection being made, which `stop` closes. */
  #opening: Transport | undefined;
  #connecting: Promise<void> | undefined;
  #restartTimer: NodeJS.Timeout | undefined;
  #relistTimer: NodeJS.Timeout | undefined;
  #backoffMs: number;
  #readySince = 0;
  #restarts = 0;
  #reason: string | undefined;
  #agent: Agent | undefined;
  /** Why a transport was given up from this side (an HTTP stream past the message bound), for its reason. */
  readonly #brokenBy = new WeakMap<Transport, string>();
  /** Set while a call's `tools/call` request is being sent, to learn its id (the SDK sends it synchronously). */
  #sending: { id?: RequestId } | undefined;
  /** Calls aborted before the upstream answered, by request id: each releases its slot once answered. */
  readonly #abandoned = new Map<RequestId, () => void>();
  /** The last listing was cut short; said once until a listing is whole again. */
  #listCut = false;
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
    this.redact = redactor(secretValues([spec]));
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
        // Tool lists are read page by page here (#listTools); this caps the SDK's own walk, should it start one.
        listMaxPages: 1,
      },
    );
    // Followed with toolport's own bounded listing, not the SDK's (which gathers every page first).
    const relist = this.#relister(client);
    client.setNotificationHandler('notifications/tools/list_changed', relist);
    const timeoutMs = this.#options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
    let listed: unknown[];
    try {
      await client.connect(transport, { timeout: timeoutMs });
      listed = await this.#listTools(client);
    } catch (err) {
      this.#opening = undefined;
      this.#reason = this.redact(this.#brokenBy.get(transport) ?? describeFailure(err, transport));
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
    this.#options.onTools(listed);
    this.#setState('ready');
    this.#scheduleRelist(client, relist);
    // An announcement that came during the first listing.
    relist.pending();
    this.#log.info({ tools: listed.length, server: client.getServerVersion()?.name }, 'upstream connected');
  }

  /**
   * Sees the messages a call needs: the id of each `tools/call` sent (see `call`), and the answers
   * to calls aborted before the upstream answered, which free their slots. Protocol.connect keeps
   * an `onmessage` set before it and calls it first.
   */
  #watch(transport: Transport): void {
    const send = transport.send.bind(transport);
    transport.send = (message, options) => {
      if (this.#sending !== undefined && 'method' in message && message.method === 'tools/call' && 'id' in message) this.#sending.id = message.id;
      return send(message, options);
    };
    transport.onmessage = (message: JSONRPCMessage) => {
      if (this.#abandoned.size > 0 && 'id' in message && !('method' in message) && message.id !== undefined) this.#abandoned.get(message.id)?.();
    };
  }

  /**
   * Reads the upstream's tool list page by page, and reads no further page past DEFINITION_LIMITS.tools tools
   * (those its `tools` filter leaves out do not count), past LIST_BUDGET_CHARS or past
   * LIST_MAX_PAGES: what a hostile upstream lists is bounded before anything checks it. An
   * upstream that does not offer tools lists none.
   */
  async #listTools(client: Client): Promise<unknown[]> {
    if (client.getServerCapabilities()?.tools === undefined) return [];
    const timeout = this.#options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
    const filter = this.spec.tools;
    const tools: unknown[] = [];
    let chars = 0;
    let pages = 0;
    let cursor: string | undefined;
    do {
      const page = await client.request(cursor === undefined ? { method: 'tools/list' } : { method: 'tools/list', params: { cursor } }, { timeout });
      pages++;
      chars += JSON.stringify(page.tools).length;
      for (const tool of page.tools) if (selected(tool, filter)) tools.push(tool);
      cursor = page.nextCursor;
      if (cursor !== undefined && (tools.length > DEFINITION_LIMITS.tools || chars > LIST_BUDGET_CHARS || pages >= LIST_MAX_PAGES)) {
        if (!this.#listCut) {
          this.#log.warn(
            { tools: tools.length, pages, chars, maxTools: DEFINITION_LIMITS.tools, maxChars: LIST_BUDGET_CHARS, maxPages: LIST_MAX_PAGES },
            'upstream tool list too long: the rest of it is not read',
          );
        }
        this.#listCut = true;
        // The pages read are checked whole: the checks count and name the tools past the bound.
        return tools;
      }
    } while (cursor !== undefined);
    this.#listCut = false;
    return tools;
  }

  /**
   * Lists again on demand (list_changed, the periodic re-list): one listing at a time, the next at
   * least RELIST_MIN_INTERVAL_MS after it, and any number of demands meanwhile make one more.
   * `pending()` runs one asked for before the connection was ready.
   */
  #relister(client: Client): (() => void) & { pending(): void } {
    let listing = false;
    let again = false;
    let waiting: NodeJS.Timeout | undefined;
    const relist = (): void => {
      again = true;
      if (listing || waiting !== undefined || this.#client !== client) return;
      again = false;
      listing = true;
      this.#listTools(client)
        .then(
          (tools) => {
            if (this.#client === client) this.#options.onTools(tools);
          },
          (err: unknown) => {
            if (this.#client === client) this.#log.warn({ err: this.redact((err as Error).message) }, 'upstream tool list could not be read again');
          },
        )
        .finally(() => {
          listing = false;
          if (!again || this.#client !== client) return;
          waiting = setTimeout(() => {
            waiting = undefined;
            relist();
          }, RELIST_MIN_INTERVAL_MS);
          waiting.unref();
        });
    };
    return Object.assign(relist, {
      pending: () => {
        if (again) relist();
      },
    });
  }

  #makeTransport(): Transport {
    const spec = this.spec;
    if (spec.transport === 'stdio') {
      const base = this.#options.baseEnv;
      const env: Record<string, string> = {};
      for (const name of ['PATH', 'HOME']) if (base[name] !== undefined) env[name] = base[name];
      return new StdioProcessTransport({
        command: spec.command,
        args: spec.args,
        env: { ...env, ...spec.env },
        cwd: spec.cwd,
        log: this.#log,
        redact: this.redact,
      });
    }
    this.#agent ??= new Agent({ connectTimeout: HTTP_CONNECT_TIMEOUT_MS, bodyTimeout: HTTP_BODY_TIMEOUT_MS, headersTimeout: HTTP_BODY_TIMEOUT_MS });
    const agent = this.#agent;
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
          // The upstream is broken, not just this stream: it restarts, with backoff, as a process would.
          this.#brokenBy.set(transport, why);
          void transport.close();
        });
      }) as unknown as typeof fetch,
    });
    return transport;
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
    this.#releaseAbandoned();
    this.#setState('idle');
    await client?.close().catch(() => undefined);
    await transport?.close().catch(() => undefined);
  }

  /** The connection ended while ready: the process exited or the stream broke. */
  #lost(client: Client, transport: Transport): void {
    if (this.#client !== client) return;
    this.#client = undefined;
    this.#transport = undefined;
    clearTimeout(this.#relistTimer);
    // The calls it had not answered will not be answered now.
    this.#releaseAbandoned();
    if (this.#state === 'stopped' || this.#state === 'idle') return;
    this.#reason = this.redact(
      transport instanceof StdioProcessTransport ? `the process ${transport.exit ?? 'ended'}` : (this.#brokenBy.get(transport) ?? 'the connection closed'),
    );
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

  #scheduleRelist(client: Client, relist: () => void): void {
    const every = this.#options.relistMs ?? DEFAULT_RELIST_MS;
    if (every <= 0 || client.getServerCapabilities()?.tools?.listChanged === true) return;
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
        answer = client.request(
          { method: 'tools/call', params: { name: tool, arguments: input } },
          {
            signal: options.signal,
            timeout: NO_SDK_TIMEOUT_MS,
            ...(options.onProgress !== undefined ? { onprogress: options.onProgress } : {}),
          },
        );
      } finally {
        this.#sending = undefined;
      }
      try {
        return await answer;
      } catch (err) {
        if (options.signal.aborted) {
          // The upstream may go on with it (it need not heed the cancellation): the slot stays
          // taken until it answers, for a while at most, so aborting calls cannot run more at once.
          if (sent.id !== undefined && this.#client === client) {
            this.#keepSlot(sent.id, options.caller);
            slotKept = true;
          }
          throw options.signal.reason;
        }
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

  /** Releases the caller's slot once the upstream answers request `id`, or after the abort grace, or when the connection ends. */
  #keepSlot(id: RequestId, caller: string | undefined): void {
    const release = (): void => {
      if (this.#abandoned.get(id) !== release) return;
      this.#abandoned.delete(id);
      clearTimeout(timer);
      this.#slots.release(caller);
    };
    const timer = setTimeout(release, this.#options.abortGraceMs ?? STOPPING_GRACE_MS);
    timer.unref();
    this.#abandoned.set(id, release);
  }

  #releaseAbandoned(): void {
    for (const release of [...this.#abandoned.values()]) release();
  }

  /** Ends the connection (and the process group of a stdio upstream) for good. */
  async stop(): Promise<void> {
    this.#setState('stopped');
    clearTimeout(this.#restartTimer);
    clearTimeout(this.#relistTimer);
    const client = this.#client;
    const transport = this.#transport;
    this.#client = undefined;
    this.#transport = undefined;
    this.#releaseAbandoned();
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

const NULL_BODY_STATUSES = new Set([101, 103, 204, 205, 304]);

/** Whether the tool list entry `tool` passes the upstream's `tools` filter (an entry without a name string passes, to be refused by the checks). */
function selected(tool: unknown, filter: UpstreamSpec['tools']): boolean {
  const name = typeof tool === 'object' && tool !== null ? (tool as { name?: unknown }).name : undefined;
  if (filter === undefined || typeof name !== 'string') return true;
  return (filter.include?.includes(name) ?? true) && !(filter.exclude?.includes(name) ?? false);
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

/**
 * Why connecting failed, in words safe to log and show (`/readyz` needs no key): no header value,
 * no environment, and nothing an HTTP upstream chose to say (its body, its status text, its
 * JSON-RPC error message), only the status and the kind of error.
 */
function describeFailure(err: unknown, transport: Transport): string {
  if (transport instanceof StdioProcessTransport) {
    const message = (err as Error)?.message ?? String(err);
    if (transport.exit !== undefined) return message.startsWith('cannot run') ? message : `the process ${transport.exit} before it answered`;
    const cause = err instanceof Error && err.cause instanceof Error ? `: ${(err.cause as NodeJS.ErrnoException).code ?? err.cause.message}` : '';
    return `${message.split('\n')[0]}${cause}`.slice(0, 300);
  }
  if (err instanceof SdkHttpError) return `the upstream answered HTTP ${err.status}`;
  if (err instanceof ProtocolError) return `the upstream answered JSON-RPC error ${err.code}`;
  if (err instanceof SdkError) return `${err.name} ${err.code}`;
  if (!(err instanceof Error)) return 'an unknown error';
  const code = err.cause instanceof Error ? (err.cause as NodeJS.ErrnoException).code : undefined;
  // undici's own words, which hold nothing from the upstream; anything else is named by its class.
  return `${err.message === 'fetch failed' ? err.message : err.name}${code !== undefined ? `: ${code}` : ''}`;
}
