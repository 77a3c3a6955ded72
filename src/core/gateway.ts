import { pino, type Logger } from 'pino';
import { CallAbort, type AbortSource } from './call-abort.js';
import { errorBody, ToolportError, type ErrorBody, type ErrorCode } from './errors.js';
import { ToolExecutor, type CallObserver, type ExecutorOptions } from './executor.js';
import { type AnthropicTool, type APIFormat, type ListOptions, type MCPTool, type OpenAIResponsesTool, type OpenAITool } from './formats.js';
import { InFlight, shuttingDown } from './in-flight.js';
import { type ServerPermissions, type ToolScope, toolScope } from '../core/principal.js';
import { PermissionDenied, type Permissions } from './permissions.js';
import { SampledLog } from './sampled-log.js';
import type { ToolRegistry } from './registry.js';
import type { CallSpan, CallTracer, McpCallFacts } from './tracer.js';
import type { Progress, ToolDef, ToolResult } from './types.js';

/** Who is calling: what the audit lines name, and which tools the caller may use. */
export interface Caller {
  /** The label of the API key the caller presented (logged as `key`); undefined without keys. */
  readonly label?: string | undefined;
  /** The tools the caller may use; undefined: every served tool. */
  readonly scope: ToolScope | undefined;
  /** The client's address, for the audit line of a refused call. */
  readonly ip?: string | undefined;
  /** The workspace the caller's tools work in, a key of the gateway's `toolsets`; undefined: the server's. */
  readonly workspace?: string | undefined;
  /** How the caller proved who it is: an API key (the default) or an access token, for the words of a refusal. */
  readonly credential?: 'key' | 'token';
  /** For an access token: the application it was issued to (`client_id` or `azp`), in the audit lines. */
  readonly client?: string | undefined;
  /** The rules the caller's calls must pass (its key's, the server's default included); undefined: the server's default. */
  readonly permissions?: Permissions | undefined;
  /**
   * Counts one more call against the caller's rate limit, for a call its request's own count did
   * not cover (`CallRequest.extra`); resolves to the refusal when the limit is spent. Absent: no
   * rate limit applies.
   */
  countAnotherCall?(): Promise<ToolportError | undefined>;
}

/**
 * The name a caller's calls share their slots and queue under: its key's label or, without keys,
 * its client's network (with keys configured every call has a label, so the two never mix).
 * Undefined (in-process callers, stdio) shares only the tools' own limits.
 */
export function admissionName(caller: Caller): string | undefined {
  return caller.label ?? (caller.ip === undefined ? undefined : addressGroup(caller.ip));
}

/**
 * The network a client address stands for, as one caller: a client picks its source address
 * freely within it, so each address counting alone would let one client be many callers. Every
 * loopback address is the local machine; an IPv6 address stands for its /64 (what one host or
 * link is given); an IPv4 address, also written IPv4-mapped, for itself.
 */
export function addressGroup(ip: string): string {
  const v4 = ip.startsWith('::ffff:') && ip.includes('.') ? ip.slice(7) : ip;
  if (v4.startsWith('127.') || v4 === '::1') return 'loopback';
  if (!v4.includes(':')) return v4;
  const [head = '', tail] = v4.split('::');
  const front = head === '' ? [] : head.split(':');
  const back = tail === undefined || tail === '' ? [] : tail.split(':');
  const groups = tail === undefined ? front : [...front, ...Array<string>(8 - front.length - back.length).fill('0'), ...back];
  return `${groups
    .slice(0, 4)
    .map((g) => g.replace(/^0+(?=.)/, '').toLowerCase())
    .join(':')}::/64`;
}

/** A caller with every tool and no key: in-process callers (the CLI), and servers without keys. */
export const ANYONE: Caller = Object.freeze({ scope: undefined });

/** What the audit line and the metrics say about a call; all an adapter knows of a call it refuses itself. */
export interface CallIdentity {
  caller: Caller;
  /** The tool asked for; undefined when the adapter refused the call before it could tell. */
  tool?: string | undefined;
  /** Goes into every log line of the call, and into the tool's context. */
  requestId: string;
  /** The adapter: a short fixed name (`rest`, `mcp`, `cli`). A metric label, so never the client's words. */
  transport: string;
  /** The provider's id of the call (a turn's `tool_use` id), for its span; undefined: the request id stands for it. */
  callId?: string | undefined;
}

/** One call through the gateway. Each call needs its own object: it is the key `cancel` finds the call by. */
export interface CallRequest extends CallIdentity {
  tool: string;
  /** The tool input as parsed, not yet validated. */
  input: unknown;
  /** Aborts the call from outside (a client's cancellation); `cancel` does the same without a signal. */
  signal?: AbortSource;
  /** Size of the raw input, for the log line (the input itself is never logged). */
  inputBytes?: number;
  /** Hears the tool's progress reports; without it, the tool's context has no `progress`. */
  onProgress?: (progress: Progress) => void;
  /**
   * A call after the first of its request (a batch): the request was counted once against the
   * rate limit, so this call is counted again (`Caller.countAnotherCall`) before it may run.
   */
  extra?: boolean;
  /** What an MCP call came with, for its span (set by the MCP adapter only while tracing is on, `Gateway.traced`). */
  mcp?: McpCallFacts | undefined;
}

/** What a call that ran answers: a normalised ToolResult, `isError` always set. */
export type CallResult = ToolResult & { isError: boolean };

/** Hears calls that ran and calls that were refused, for metrics; cheap, and must not throw. */
export interface GatewayObserver extends CallObserver {
  /** A call was refused before it ran, by the gateway or by an adapter (`Gateway.refused`). */
  callRefused(code: ErrorCode, transport: string): void;
}

export interface GatewayOptions extends Omit<ExecutorOptions, 'observer'> {
  observer?: GatewayObserver;
  /** The distinct scopes of the API keys, so their tool lists are made at start-up rather than on first use. */
  scopes?: readonly ToolScope[];
  /**
   * The same tools as `registry`, in the same order, bound to other workspaces, by the name a
   * `Caller.workspace` gives. Lists and definitions come from `registry`; a call runs the tool
   * of its caller's workspace.
   */
  toolsets?: ReadonlyMap<string, ToolRegistry>;
  /** The rules every caller inherits (a key's own come with its `Caller`), and what rules are checked against. */
  permissions?: ServerPermissions;
  /** Makes a span of every call, run or refused; absent while tracing is off. */
  tracer?: CallTracer | undefined;
}

type ToolDefinition = AnthropicTool | OpenAITool | OpenAIResponsesTool | MCPTool;

/**
 * The one way into the tools, for every adapter (REST, MCP, the CLI): the caller's scope, the
 * lookup, validation, admission, the deadline and normalisation (through the `ToolExecutor`), one
 * audit line and one metric per call, run or refused, labelled with the transport, and the calls
 * in flight for a graceful shutdown. Adapters parse their protocol, call this, and render.
 */
export class Gateway {
  readonly executor: ToolExecutor;
  readonly registry: ToolRegistry;
  readonly #log: Logger;
  // Refusals are what a flood is made of: their audit lines are sampled per error code (see SampledLog).
  readonly #refusals: SampledLog;
  readonly #observer: GatewayObserver | undefined;
  readonly #inFlight = new InFlight();
  readonly #toolsets: ReadonlyMap<string, ToolRegistry>;
  // The default rules, for callers without a key of their own (no keys, stdio, the CLI), and the scope their lists are made for.
  readonly #defaults: Permissions | undefined;
  readonly #defaultScope: ToolScope | undefined;
  readonly #tracer: CallTracer | undefined;

  /** Throws `PermissionRuleError` for a default rule that cannot be read. */
  constructor({ scopes = [], observer, toolsets = new Map(), permissions, tracer, ...options }: GatewayOptions) {
    this.executor = new ToolExecutor({ ...options, observer });
    this.registry = options.registry;
    // The tools registered one by one are bound to a workspace; a source's (an upstream's) are not, and stay in `registry` only.
    const names = (registry: ToolRegistry): string =>
      registry
        .list()
        .filter((t) => registry.sourceOf(t.name) === '')
        .map((t) => t.name)
        .join(', ');
    for (const [workspace, toolset] of toolsets) {
      if (names(toolset) !== names(this.registry)) {
        throw new Error(`The tools of workspace ${JSON.stringify(workspace)} (${names(toolset)}) are not the server's (${names(this.registry)}).`);
      }
    }
    this.#toolsets = toolsets;
    this.#log = options.logger ?? pino({ level: 'silent' });
    this.#refusals = new SampledLog(this.#log, 'tool call refusals left out of the log');
    this.#observer = observer;
    this.#tracer = tracer;
    this.#defaults = permissions?.compile([{ where: 'TOOLPORT_PERMISSIONS', rules: permissions.defaults }]);
    this.#defaultScope = this.#defaults && toolScope(undefined, this.#defaults);
    this.prepareLists(scopes);
  }

  /**
   * Makes the default list (the Anthropic format) of every scope given, and of no scope, now, so the
   * list most clients ask for costs no request anything: at start-up, and for the scopes of keys put
   * in place by a reload. The other formats are made by the first request for them, and kept: with
   * a thousand tools, all six formats of every scope took most of a second of start-up.
   */
  prepareLists(scopes: readonly ToolScope[]): void {
    for (const scope of [this.#defaultScope, ...scopes]) this.registry.listBytes('anthropic', scope);
  }

  /**
   * Runs a call. Rejects with `ToolportError` when the call is refused (shutting down, outside the
   * caller's scope, unknown tool, invalid input, queue full), after logging and counting the
   * refusal; whatever the tool does becomes the resolved `CallResult`.
   */
  call(request: CallRequest): Promise<CallResult> {
    // The one check tracing adds to a call's path.
    const tracer = this.#tracer;
    return tracer === undefined ? this.#call(request, undefined) : tracer.trace(request, (span) => this.#call(request, span));
  }

  /** True while tracing is on: adapters gather what a span records (`CallRequest.mcp`) only then. */
  get traced(): boolean {
    return this.#tracer !== undefined;
  }

  async #call(request: CallRequest, span: CallSpan | undefined): Promise<CallResult> {
    const permissions = request.caller.permissions ?? this.#defaults;
    let refusal = this.#inFlight.draining ? shuttingDown() : (this.scopeRefusal(request.caller, request.tool) ?? permissions?.toolRefusal(request.tool));
    if (refusal === undefined && request.extra === true && request.caller.countAnotherCall !== undefined) {
      refusal = await request.caller.countAnotherCall();
      if (refusal === undefined && this.#inFlight.draining) refusal = shuttingDown();
    }
    if (refusal !== undefined) {
      this.refused(request, refusal);
      throw refusal;
    }
    // Synchronous up to the executor's call, so calls are admitted in the order they came.
    const registry = this.#toolsetOf(request.caller, request.tool);
    // No AbortController unless the tool asks for a signal: cancel, shutdown and the caller's
    // signal all abort this.
    const abort = new CallAbort();
    this.#inFlight.enter(request, abort);
    const unlink = request.signal && abort.follow(request.signal);
    try {
      return await this.executor.call(request.tool, request.input, {
        requestId: request.requestId,
        abort,
        inputBytes: request.inputBytes,
        keyLabel: request.caller.label,
        client: request.caller.client,
        transport: request.transport,
        onProgress: request.onProgress,
        registry,
        caller: admissionName(request.caller),
        permissions,
        span,
      });
    } catch (err) {
      if (err instanceof ToolportError) this.refused(request, err);
      throw err;
    } finally {
      this.#inFlight.leave(request);
      unlink?.();
    }
  }

  /** `call` that never rejects: a refusal becomes its error body, itself a ToolResult (for MCP and batches). */
  async callSafe(request: CallRequest): Promise<CallResult | ErrorBody> {
    try {
      return await this.call(request);
    } catch (err) {
      if (err instanceof ToolportError) return errorBody(err.code, err.message, err.details);
      this.#log.error({ reqId: request.requestId, tool: request.tool, err }, 'unexpected error');
      const internal = new ToolportError('INTERNAL_ERROR', `Internal server error (request id ${request.requestId}).`);
      this.refused(request, internal);
      return errorBody(internal.code, internal.message);
    }
  }

  /**
   * Logs and counts a call an adapter refused before it could call the gateway (no valid key, rate
   * limit, body too large, not JSON, overload), so every refusal of every transport gets the same
   * audit line and metric. The gateway calls it for its own refusals.
   */
  refused(call: CallIdentity, error: ToolportError): void {
    const { caller } = call;
    const rule = error instanceof PermissionDenied ? error.rule : undefined;
    this.#refusals.info(
      error.code,
      {
        reqId: call.requestId,
        tool: call.tool,
        key: caller.label,
        client: caller.client,
        ip: caller.ip,
        transport: call.transport,
        status: error.statusCode,
        code: error.code,
        rule,
      },
      'tool call refused',
    );
    this.#observer?.callRefused(error.code, call.transport);
    this.#tracer?.refused(call, error);
  }

  /**
   * The FORBIDDEN refusal for a tool outside the caller's scope, or undefined when it may use it. A
   * scoped caller gets this same answer for a tool that does not exist at all, so it cannot probe
   * which tools exist beyond its scope. For adapters that check before they read the input.
   */
  scopeRefusal(caller: Caller, tool: string): ToolportError | undefined {
    const scope = caller.scope;
    if (scope === undefined || scope.has(tool)) return undefined;
    const allowed = [...scope];
    const who = caller.credential === 'token' ? 'The access token of' : 'API key';
    return new ToolportError('FORBIDDEN', `${who} "${caller.label}" may not use tool ${JSON.stringify(tool)}; it may use ${allowed.join(', ')}.`, {
      tool,
      available: allowed,
    });
  }

  /** The tools the caller may use, in registration order: the same array for the same scope, until a new `register`. */
  tools(caller: Caller): readonly ToolDef[] {
    return this.registry.tools(this.#scopeOf(caller));
  }

  /** The scope a caller's lists are made for: its key's, or the default rules' for a caller without one. */
  #scopeOf(caller: Caller): ToolScope | undefined {
    return caller.scope ?? this.#defaultScope;
  }

  /** The tools the caller may see, in a provider's format, as JSON text made once (at start-up for the keys' scopes). */
  list(caller: Caller, format: APIFormat = 'anthropic', options?: ListOptions): string {
    return this.registry.listJSON(format, this.#scopeOf(caller), options);
  }

  /** `list` as UTF-8 bytes, the same Buffer every time (until a new `register`); never change it. */
  listBytes(caller: Caller, format: APIFormat = 'anthropic', options?: ListOptions): Buffer {
    return this.registry.listBytes(format, this.#scopeOf(caller), options);
  }

  /** One tool's definition in a provider's format; throws FORBIDDEN outside the caller's scope, TOOL_NOT_FOUND for no such tool. */
  describe(caller: Caller, name: string, format: APIFormat = 'anthropic', options?: ListOptions): ToolDefinition {
    const refusal = this.scopeRefusal(caller, name);
    if (refusal !== undefined) throw refusal;
    this.executor.lookup(name);
    const index = this.registry.tools().findIndex((t) => t.name === name);
    const shaped = this.registry.toAPI(format, undefined, options);
    return (Array.isArray(shaped) ? shaped[index] : shaped.tools[index])!;
  }

  /** The registry a call of `tool` runs from: the caller's workspace's, or the server's for a source's tool; an Error (a wiring mistake, not the client's) for a workspace with none. */
  #toolsetOf(caller: Caller, tool: string): ToolRegistry {
    if (caller.workspace === undefined) return this.registry;
    const toolset = this.#toolsets.get(caller.workspace);
    if (toolset === undefined) throw new Error(`No tools are bound to workspace ${JSON.stringify(caller.workspace)}.`);
    // A source's tool (an upstream's) works in no workspace: it runs from the server's registry.
    return toolset.get(tool) === undefined && this.registry.get(tool) !== undefined ? this.registry : toolset;
  }

  /** Aborts a call in flight (its client went away); nothing when it already answered. */
  cancel(request: CallRequest, reason: unknown): void {
    this.#inFlight.abort(request, reason);
  }

  /** True once `drain` was called: new calls are refused with SHUTTING_DOWN. */
  get draining(): boolean {
    return this.#inFlight.draining;
  }

  /** Calls running or waiting for a slot right now. */
  get inFlight(): number {
    return this.#inFlight.count;
  }

  /** Refuses new calls from now on; calls in flight go on. */
  drain(): void {
    this.#inFlight.drain();
  }

  /** Resolves to true once no call is in flight, or to false after `graceMs`. */
  drained(graceMs: number): Promise<boolean> {
    return this.#inFlight.drained(graceMs);
  }

  /** Aborts every call in flight through its signal; each answers at once as aborted. */
  abortAll(reason: Error): void {
    this.#inFlight.abortAll(reason);
  }
}
