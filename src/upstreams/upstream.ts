import { Client, StreamableHTTPClientTransport, type Transport } from '@modelcontextprotocol/client';
import type { Logger } from 'pino';
import { Agent, fetch as undiciFetch } from 'undici';
import { secretValues, type UpstreamSpec } from './config.js';
import { redactor } from './redact.js';
import { StdioProcessTransport } from './stdio-transport.js';
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
  #connecting: Promise<void> | undefined;
  #restartTimer: NodeJS.Timeout | undefined;
  #relistTimer: NodeJS.Timeout | undefined;
  #backoffMs: number;
  #readySince = 0;
  #restarts = 0;
  #reason: string | undefined;
  #agent: Agent | undefined;
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
    const client = new Client(
      { name: 'toolport', version: this.#options.version },
      {
        // Output schemas are checked by toolport's own pipeline, after the definition checks; the
        // SDK would compile an upstream's patterns unchecked.
        jsonSchemaValidator: { getValidator: () => (input: unknown) => ({ valid: true, data: input as never, errorMessage: undefined }) },
        listChanged: {
          tools: {
            onChanged: (error, tools) => {
              if (error) this.#log.warn({ err: this.redact(error.message) }, 'upstream tool list could not be read after list_changed');
              else if (tools) this.#options.onTools(tools);
            },
          },
        },
      },
    );
    const timeoutMs = this.#options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
    try {
      await client.connect(transport, { timeout: timeoutMs });
      const listed = await client.listTools(undefined, { timeout: timeoutMs });
      this.#client = client;
      this.#transport = transport;
      transport.onclose = chain(transport.onclose, () => this.#lost(client, transport));
      this.#readySince = Date.now();
      this.#reason = undefined;
      this.#options.onTools(listed.tools);
      this.#setState('ready');
      this.#scheduleRelist(client);
      this.#log.info({ tools: listed.tools.length, server: client.getServerVersion()?.name }, 'upstream connected');
    } catch (err) {
      this.#reason = this.redact(describeFailure(err, transport));
      await client.close().catch(() => undefined);
      await transport.close().catch(() => undefined);
      this.#log.warn({ reason: this.#reason }, 'upstream could not be reached');
      if (this.#state !== 'stopped') this.#down();
      throw new UpstreamUnavailableError(`Upstream "${this.name}" is not available: ${this.#reason}.`);
    }
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
    return new StreamableHTTPClientTransport(new URL(spec.url), {
      requestInit: { headers: spec.headers },
      // A signal per request: undici adds an abort listener to the one it is given, and the SDK
      // gives every request the transport's one long-lived signal (6.5% of a call's CPU, profiled).
      fetch: ((url: string | URL, init?: RequestInit) =>
        undiciFetch(url, {
          ...(init as object),
          ...(init?.signal ? { signal: AbortSignal.any([init.signal]) } : {}),
          dispatcher: agent,
        })) as unknown as typeof fetch,
    });
  }

  /**
   * Connects, lists, and disconnects again: a lazy upstream's tools are known from start-up (when
   * no lock file pins them), and its process runs only once a call needs it.
   */
  async probe(): Promise<void> {
    await this.start();
    const client = this.#client;
    const transport = this.#transport;
    this.#client = undefined;
    this.#transport = undefined;
    clearTimeout(this.#relistTimer);
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
    if (this.#state === 'stopped' || this.#state === 'idle') return;
    this.#reason = transport instanceof StdioProcessTransport ? `the process ${transport.exit ?? 'ended'}` : 'the connection closed';
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

  #scheduleRelist(client: Client): void {
    const every = this.#options.relistMs ?? DEFAULT_RELIST_MS;
    if (every <= 0 || client.getServerCapabilities()?.tools?.listChanged === true) return;
    this.#relistTimer = setInterval(() => {
      client.listTools(undefined, { timeout: this.#options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS }).then(
        (listed) => this.#options.onTools(listed.tools),
        (err: unknown) => this.#log.warn({ err: this.redact((err as Error).message) }, 'upstream re-list failed'),
      );
    }, every);
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
   * SDK tells the upstream: `notifications/cancelled`, or a closed request on 2026-07-28).
   */
  async call(tool: string, input: Record<string, unknown>, options: UpstreamCallOptions): Promise<unknown> {
    if (this.#state === 'idle') await this.start();
    // Throws QUEUE_FULL (a ToolportError) when the upstream's queue, or the caller's share of it, is full.
    const admitted = this.#slots.acquire(options.signal, options.caller);
    if (admitted !== true && !(await admitted)) throw options.signal.reason;
    try {
      const client = this.#client;
      if (client === undefined) {
        const why = this.#state === 'stopped' ? 'it is stopped' : `it is down (${this.#reason ?? 'connecting'}); toolport is restarting it`;
        throw new UpstreamUnavailableError(`Upstream "${this.name}" cannot take the call now: ${why}.`);
      }
      try {
        return await client.callTool(
          { name: tool, arguments: input },
          {
            signal: options.signal,
            timeout: NO_SDK_TIMEOUT_MS,
            ...(options.onProgress !== undefined ? { onprogress: options.onProgress } : {}),
          },
        );
      } catch (err) {
        if (options.signal.aborted) throw options.signal.reason;
        if (this.#client !== client) {
          throw new UpstreamUnavailableError(
            `Upstream "${this.name}" went away during the call (${this.#reason ?? 'connection closed'}); the call may or may not have taken effect. toolport is restarting it.`,
          );
        }
        throw err;
      }
    } finally {
      this.#slots.release(options.caller);
    }
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
    await client?.close().catch(() => undefined);
    await transport?.close().catch(() => undefined);
    await this.#agent?.close().catch(() => undefined);
  }
}

function chain(first: (() => void) | undefined, second: () => void): () => void {
  return () => {
    first?.();
    second();
  };
}

/** Why connecting failed, in words safe to log and show: no header value, no environment. */
function describeFailure(err: unknown, transport: Transport): string {
  if (transport instanceof StdioProcessTransport && transport.exit !== undefined) {
    const message = (err as Error)?.message ?? String(err);
    return message.startsWith('cannot run') ? message : `the process ${transport.exit} before it answered`;
  }
  const message = err instanceof Error ? err.message : String(err);
  const cause = err instanceof Error && err.cause instanceof Error ? `: ${(err.cause as NodeJS.ErrnoException).code ?? err.cause.message}` : '';
  return `${message.split('\n')[0]}${cause}`.slice(0, 300);
}
