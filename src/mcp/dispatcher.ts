import { isRecord } from '../core/json.js';
import type { DiscoverResult, InitializeResult, ListToolsResult } from '@modelcontextprotocol/server';
import type { AbortSource } from '../core/call-abort.js';
import { inPool, MAX_TURN_ANSWER_BYTES, MAX_TURN_CONCURRENCY } from '../providers/turn-runner.js';
import type { McpBackend } from './backend.js';
import { eraOf, PROTOCOL_VERSION_KEY, SERVER_INFO_KEY } from './era.js';
import { httpStatusOf, methodError } from './rpc-errors.js';
import type { InFlightCalls } from './cancellable.js';
import {
  classify,
  errorResponse,
  parseIncoming,
  resultResponse,
  RpcCodes,
  type JsonRpcErrorResponse,
  type JsonRpcNotification,
  type JsonRpcRequest,
  type JsonRpcResponse,
} from '../core/json-rpc.js';
import { encodeOnce } from './jsonrpc.js';
import { DEFAULT_PROGRESS_INTERVAL_MS } from './progress.js';
import { PerListCache, toMcpTool } from './tool-list.js';
import { toolsCall, type ToolsCallDeps } from './tools-call.js';
import { subscriptionsListen, type ListenDeps } from './listen.js';
import { TASK_METHODS, TASKS_CAPABILITY, TASKS_EXTENSION, taskMethod } from './tasks.js';
import type { SubscriptionOpener } from './subscriptions.js';
import { allowsBatches, DEFAULT_LEGACY_VERSION, hasTaskUtility, isModernVersion, MODERN_VERSIONS, negotiateLegacyVersion } from './protocol-versions.js';

/** What a transport tells the dispatcher about one incoming message. */
export interface DispatchContext<Caller> {
  /** Who is calling, as the backend takes it (key label and scope). */
  caller: Caller;
  /**
   * The revision the transport declares: HTTP's `MCP-Protocol-Version` header, or the revision a
   * stdio client agreed in `initialize`. Absent: a request without a `_meta` version is 2025-03-26.
   */
  protocolVersion?: string;
  /** The id to log calls with (HTTP's request id); defaults to the JSON-RPC id. */
  requestId?: string;
  /** Aborts the calls this message started: the connection closed or the server is shutting down. */
  signal?: AbortSource;
  /** Where progress notifications go; without it, `progressToken` is ignored. */
  notify?: (notification: JsonRpcNotification) => void;
  /**
   * Where notifications may go after the message is answered (stdio's output, for the status of
   * tasks); absent where a response ends its stream (HTTP).
   */
  notifyAnytime?: (notification: JsonRpcNotification) => void;
  /** The calls `notifications/cancelled` may abort: the caller's own (one set per stdio process; over HTTP, the server's set `of` the caller). */
  calls?: InFlightCalls;
  /** A `tools/call` after the first of a batch: the transport counted the request once, so the backend counts this call again. */
  extra?: boolean;
  /**
   * Where `subscriptions/listen` opens its subscription to tool-list changes: the transport's
   * subscriptions, as this caller's (bounded per caller). Without it, no change is honored.
   */
  subscriptions?: SubscriptionOpener;
}

/** The answer to one message (or batch). */
export interface DispatchOutcome {
  /** What to send back; `undefined` when nothing is (notifications, responses, a cancelled call). */
  reply: JsonRpcResponse | JsonRpcResponse[] | undefined;
  /** The status a Streamable HTTP transport answers with: 200, 202 (nothing to send), 400 or 404. */
  status: number;
  /** Set when an `initialize` succeeded: the revision agreed, which stdio keeps for later messages. */
  negotiatedVersion?: string;
}

export interface DispatcherOptions {
  /** Most messages in one batch (2025-03-26 only); larger batches are refused whole. Default 64. */
  maxBatch?: number;
  /**
   * Most messages of one batch handled at once; the rest wait their turn, in order, so one batch
   * cannot take a tool's every slot. Default: the cap on the calls of a `POST /calls` turn
   * (`MAX_TURN_CONCURRENCY`, 8).
   */
  maxBatchConcurrency?: number;
  /** Shortest gap between two progress notifications of one call, in ms. Default 20. */
  progressIntervalMs?: number;
  /** `ttlMs` of `tools/list` and `server/discover` results in the stateless revisions. Default 60000. */
  listTtlMs?: number;
  /**
   * `cacheScope` of `tools/list` results: `private` (the default) when lists depend on the key, as
   * scoped keys make them; `public` only when every caller sees the same tools.
   */
  listCacheScope?: 'public' | 'private';
  /**
   * The tool list can change (upstreams): announced as the `tools.listChanged` capability. The
   * transport then tells clients of each change: 2026-07-28 clients on their `subscriptions/listen`
   * (given `subscriptions` in the context), earlier ones as the transport allows (stdio: on the
   * output; HTTP: on the GET stream).
   */
  listChanged?: boolean;
}

/**
 * The MCP protocol layer: one JSON-RPC message (or a 2025-03-26 batch) in, the response out, over
 * an `McpBackend`. It holds no session: every request carries what it needs (the transport's
 * declared revision, or the stateless revisions' `_meta`), so any replica can answer any request.
 * It never throws and never rejects; what it cannot handle becomes the spec's JSON-RPC error.
 */
export class McpDispatcher<Caller> {
  readonly #backend: McpBackend<Caller>;
  readonly #maxBatch: number;
  readonly #maxBatchConcurrency: number;
  readonly #listTtlMs: number;
  readonly #listCacheScope: 'public' | 'private';
  readonly #resultMeta: Record<string, unknown>;
  readonly #callDeps: ToolsCallDeps<Caller>;
  readonly #listenDeps: ListenDeps;
  readonly #lists = new PerListCache<Record<string, unknown>>();
  readonly #initializeResults = new Map<string, Record<string, unknown>>();
  readonly #discoverResult: Record<string, unknown>;
  readonly #capabilities: { tools: { listChanged: boolean } };

  constructor(backend: McpBackend<Caller>, options: DispatcherOptions = {}) {
    this.#backend = backend;
    this.#maxBatch = options.maxBatch ?? 64;
    this.#maxBatchConcurrency = options.maxBatchConcurrency ?? MAX_TURN_CONCURRENCY;
    this.#listTtlMs = options.listTtlMs ?? 60_000;
    this.#listCacheScope = options.listCacheScope ?? 'private';
    this.#resultMeta = { [SERVER_INFO_KEY]: { ...backend.serverInfo } };
    this.#capabilities = { tools: { listChanged: options.listChanged === true } };
    this.#callDeps = {
      backend,
      resultMeta: this.#resultMeta,
      progressIntervalMs: options.progressIntervalMs ?? DEFAULT_PROGRESS_INTERVAL_MS,
    };
    this.#listenDeps = { listChanged: this.#capabilities.tools.listChanged, resultMeta: this.#resultMeta };
    const discover = {
      resultType: 'complete',
      supportedVersions: [...MODERN_VERSIONS],
      // The tasks extension, when the backend runs tasks (2026-07-28: an extension, no longer a capability of its own).
      capabilities: backend.tasks === undefined ? this.#capabilities : { ...this.#capabilities, extensions: { [TASKS_EXTENSION]: {} } },
      ...(backend.instructions !== undefined ? { instructions: backend.instructions } : {}),
      ttlMs: this.#listTtlMs,
      cacheScope: 'public',
      _meta: this.#resultMeta,
    } satisfies DiscoverResult & { resultType: string };
    this.#discoverResult = encodeOnce(discover);
  }

  /** Parses one message's text (a stdio line, an HTTP body) and handles it. */
  handleText(text: string, context: DispatchContext<Caller>): Promise<DispatchOutcome> {
    const parsed = parseIncoming(text);
    if ('reply' in parsed) return Promise.resolve({ reply: parsed.reply, status: 400 });
    return this.handle(parsed.value, context);
  }

  /**
   * Handles one parsed message or batch. Never rejects. A `subscriptions/listen` resolves only
   * when its subscription ends: what it sends until then goes through `context.notify`.
   */
  async handle(message: unknown, context: DispatchContext<Caller>): Promise<DispatchOutcome> {
    // An error that cannot name its request leaves `id` out: the SDK's message schema, which its
    // clients parse every line with, refuses a null id.
    try {
      return Array.isArray(message) ? await this.#batch(message, context) : await this.#one(message, context);
    } catch {
      // Only a bug gets here (the backend is not expected to throw either); answer, don't crash.
      const id = isRecord(message) && (typeof message['id'] === 'string' || typeof message['id'] === 'number') ? message['id'] : null;
      return { reply: errorResponse(id, RpcCodes.INTERNAL_ERROR, 'Internal error'), status: 200 };
    }
  }

  /** Audits a `tools/call` this layer refused before the backend saw it; other messages are not calls. */
  #refusedCall(message: unknown, context: DispatchContext<Caller>, why: string): void {
    if (!isRecord(message) || message['method'] !== 'tools/call') return;
    const params = message['params'];
    const name = isRecord(params) && typeof params['name'] === 'string' ? params['name'] : undefined;
    const id = message['id'];
    const requestId = context.requestId ?? (typeof id === 'string' || typeof id === 'number' ? String(id) : 'none');
    this.#backend.refused?.(context.caller, name, why, requestId, 'request');
  }

  async #batch(messages: unknown[], context: DispatchContext<Caller>): Promise<DispatchOutcome> {
    const version = context.protocolVersion ?? DEFAULT_LEGACY_VERSION;
    if (!allowsBatches(version)) {
      const why = `protocol version ${version} does not allow batches (only 2025-03-26 did)`;
      for (const message of messages) this.#refusedCall(message, context, `Invalid Request: ${why}`);
      return invalidBatch(why);
    }
    if (messages.length === 0) return invalidBatch('the batch is empty');
    if (messages.length > this.#maxBatch) {
      const why = `the batch holds ${messages.length} messages; at most ${this.#maxBatch} are taken`;
      for (const message of messages) this.#refusedCall(message, context, `Invalid Request: ${why}`);
      return invalidBatch(why);
    }
    let calls = 0;
    let answerBytes = 0;
    const outcomes = new Array<DispatchOutcome>(messages.length);
    const answer = async (message: unknown): Promise<DispatchOutcome> => {
      const refusal = batchRefusal(message);
      if (refusal) {
        this.#refusedCall(message, context, refusal.error.message);
        return { reply: refusal, status: 400 };
      }
      // Every call of a batch counts against the rate limit, as if it came alone.
      const extra = isRecord(message) && message['method'] === 'tools/call' && calls++ > 0;
      const outcome = await this.#one(message, extra ? { ...context, extra } : context);
      // The answers of one batch are bounded as a /calls turn's are: 64 Reads of 10 MiB each
      // would hold most of a gigabyte per request (and the client may not read it).
      const size = outcome.reply === undefined ? 0 : JSON.stringify(outcome.reply).length;
      if (answerBytes + size <= MAX_TURN_ANSWER_BYTES) {
        answerBytes += size;
        return outcome;
      }
      return { reply: leftOut(outcome.reply as JsonRpcResponse, size), status: 200 };
    };
    await inPool(this.#maxBatchConcurrency, 0, messages.length, async (i) => {
      outcomes[i] = await answer(messages[i]);
    });
    const replies: JsonRpcResponse[] = [];
    for (const outcome of outcomes) {
      if (outcome.reply !== undefined) replies.push(...(Array.isArray(outcome.reply) ? outcome.reply : [outcome.reply]));
    }
    return replies.length === 0 ? { reply: undefined, status: 202 } : { reply: replies, status: 200 };
  }

  async #one(message: unknown, context: DispatchContext<Caller>): Promise<DispatchOutcome> {
    const incoming = classify(message);
    switch (incoming.kind) {
      case 'invalid':
        this.#refusedCall(message, context, incoming.reply.error.message);
        return { reply: incoming.reply, status: 400 };
      case 'response':
        // This server sends no requests, so a response answers nothing; drop it.
        return { reply: undefined, status: 202 };
      case 'notification':
        this.#notification(incoming.message, context);
        return { reply: undefined, status: 202 };
      case 'request':
        return this.#request(incoming.message, context);
    }
  }

  #notification(notification: JsonRpcNotification, context: DispatchContext<Caller>): void {
    // notifications/initialized needs nothing (no session); unknown notifications are ignored.
    if (notification.method !== 'notifications/cancelled' || !context.calls) return;
    const params = notification.params;
    if (!isRecord(params)) return;
    const reason = typeof params['reason'] === 'string' ? params['reason'] : 'the client cancelled the call';
    context.calls.cancel(params['requestId'], `Cancelled by the client: ${reason.slice(0, 200)}`);
  }

  async #request(request: JsonRpcRequest, context: DispatchContext<Caller>): Promise<DispatchOutcome> {
    const era = eraOf(request, context.protocolVersion);
    if ('refused' in era) {
      this.#refusedCall(request, context, era.refused.error.message);
      return { reply: era.refused, status: httpStatusOf(era.refused.error.code, 'before-method', true) };
    }
    const { modern, version } = era;
    if (request.params !== undefined && !isRecord(request.params)) {
      if (request.method === 'tools/call') {
        this.#backend.refused?.(context.caller, undefined, 'Invalid params: params must be an object', context.requestId ?? String(request.id), 'params');
      }
      return methodError(request, RpcCodes.INVALID_PARAMS, 'Invalid params: params must be an object');
    }
    switch (request.method) {
      case 'tools/call':
        return toolsCall(this.#callDeps, request, version, modern, context);
      case 'tools/list':
        return this.#toolsList(request, version, modern, context);
      case 'server/discover':
        if (modern) return { reply: resultResponse(request.id, this.#discoverResult), status: 200 };
        break;
      case 'subscriptions/listen':
        if (modern) return subscriptionsListen(this.#listenDeps, request, context);
        break;
      case 'initialize':
        if (!modern) return this.#initialize(request);
        break;

      case 'ping':
        if (!modern) return { reply: resultResponse(request.id, {}), status: 200 };
        break;
      default:
        if (TASK_METHODS.has(request.method)) {
          const outcome = await taskMethod(this.#callDeps, request, version, modern, context);
          if (outcome !== undefined) return outcome;
        }
    }
    const reply = errorResponse(request.id, RpcCodes.METHOD_NOT_FOUND, 'Method not found', { method: request.method.slice(0, 200) });
    return { reply, status: httpStatusOf(RpcCodes.METHOD_NOT_FOUND, 'before-method', modern) };
  }

  #initialize(request: JsonRpcRequest): DispatchOutcome {
    const requested = request.params?.['protocolVersion'];
    if (typeof requested !== 'string') {
      return methodError(request, RpcCodes.INVALID_PARAMS, 'Invalid params: initialize needs params.protocolVersion, a string');
    }
    const version = negotiateLegacyVersion(requested);
    let result = this.#initializeResults.get(version);
    if (!result) {
      const { instructions, serverInfo } = this.#backend;
      const built = {
        protocolVersion: version,
        capabilities: this.#backend.tasks !== undefined && hasTaskUtility(version) ? { ...this.#capabilities, tasks: TASKS_CAPABILITY } : this.#capabilities,
        serverInfo: { ...serverInfo },
        ...(instructions !== undefined ? { instructions } : {}),
      } satisfies InitializeResult;
      result = encodeOnce(built);
      this.#initializeResults.set(version, result);
    }
    return { reply: resultResponse(request.id, result), status: 200, negotiatedVersion: version };
  }

  #toolsList(request: JsonRpcRequest, version: string, modern: boolean, context: DispatchContext<Caller>): DispatchOutcome {
    const cursor = request.params?.['cursor'];
    if (cursor !== undefined && cursor !== null) {
      // Every list fits one page, so no cursor was ever handed out: any cursor is invalid.
      return methodError(request, RpcCodes.INVALID_PARAMS, 'Invalid params: invalid cursor (tools/list has one page)');
    }
    const tools = this.#backend.tools(context.caller);
    const result = this.#lists.get(tools, version, () => {
      // 2025-11-25's tasks utility: any tool may run as a task when the client asks.
      const taskSupport = this.#backend.tasks !== undefined && hasTaskUtility(version);
      const list = tools.map((tool) => toMcpTool(tool, version, taskSupport));
      const built: ListToolsResult & Record<string, unknown> = modern
        ? { resultType: 'complete', tools: list, ttlMs: this.#listTtlMs, cacheScope: this.#listCacheScope, _meta: this.#resultMeta }
        : { tools: list };
      return encodeOnce(built);
    });
    return { reply: resultResponse(request.id, result), status: 200 };
  }
}

/** A batch's answer past its budget: the call ran (or was refused), and its answer is replaced by an error result saying why. */
function leftOut(reply: JsonRpcResponse, size: number): JsonRpcResponse {
  // Only results are large; an error without an id (an unreadable request) is a few bytes.
  if (reply.id === null || reply.id === undefined) return reply;
  return resultResponse(reply.id, {
    content: [
      {
        type: 'text',
        text: `The call ran, but its answer (${size} bytes) is left out: the answers of one batch may take at most ${MAX_TURN_ANSWER_BYTES} bytes. Send fewer or smaller calls per batch (a Read with offset and limit, say).`,
      },
    ],
    isError: true,
  });
}

/** An element a batch may not hold: `initialize` (2025-03-26 says so), or a stateless-revision request. */
function batchRefusal(message: unknown): JsonRpcErrorResponse | undefined {
  if (!isRecord(message)) return undefined;
  const id = typeof message['id'] === 'string' || typeof message['id'] === 'number' ? message['id'] : null;
  if (message['method'] === 'initialize') return errorResponse(id, RpcCodes.INVALID_REQUEST, 'Invalid Request: initialize must not be part of a batch');
  const params = message['params'];
  const meta = isRecord(params) ? params['_meta'] : undefined;
  const claimed = isRecord(meta) ? meta[PROTOCOL_VERSION_KEY] : undefined;
  if (typeof claimed === 'string' && isModernVersion(claimed)) {
    return errorResponse(id, RpcCodes.INVALID_REQUEST, `Invalid Request: a request of protocol version ${claimed} must not be part of a batch`);
  }
  return undefined;
}

function invalidBatch(why: string): DispatchOutcome {
  return { reply: errorResponse(null, RpcCodes.INVALID_REQUEST, `Invalid Request: ${why}`), status: 400 };
}
