import { PassThrough } from 'node:stream';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Redis } from 'ioredis';
import { CallAbort } from '../../core/call-abort.js';
import { admissionName, type Caller, type Gateway } from '../../core/gateway.js';
import { McpDispatcher } from '../../mcp/dispatcher.js';
import { gatewayBackend } from '../../mcp/gateway-backend.js';
import { checkStandardHeaders } from '../../mcp/http-headers.js';
import { BoundedOutput } from '../../mcp/bounded-output.js';
import { InFlightCalls } from '../../mcp/cancellable.js';
import { encode, isPlainObject, type JsonRpcNotification, type JsonRpcResponse } from '../../mcp/jsonrpc.js';
import { openCancellationChannel, type CancellationChannel } from '../../infra/redis.js';
import { VERSION } from '../../infra/version.js';
import { ToolportError } from '../../core/errors.js';
import { DEFAULT_LEGACY_VERSION, omitsUnknownErrorId } from '../../mcp/protocol-versions.js';
import { RequestCaller } from '../caller.js';
import { whenClientGoes } from '../client-gone.js';
import { knownOrLogged, setErrorHeaders } from '../error-handler.js';

/** The transport label of calls that come through `POST /mcp`. */
export const MCP_TRANSPORT = 'mcp';

export interface McpRoutesOptions {
  gateway: Gateway;
  /** The connections' idle timeout: an SSE response sends a comment at least twice per period, so a silent call keeps its connection. */
  idleTimeoutMs: number;
  /**
   * The Redis shared by the replicas (`connectRedis`): a cancellation that matches no call here is
   * passed to the others through it (`openCancellationChannel`). Without it, a cancellation
   * reaches the calls of this process only.
   */
  redis?: Redis | undefined;
}

const JSON_TYPE = 'application/json';
// Made once: an Error captures a stack trace, which is not free on every disconnect.
const CLIENT_GONE = new Error('the client disconnected');

/**
 * MCP's Streamable HTTP transport at `/mcp`, statelessly: every POST carries one JSON-RPC message
 * (or a 2025-03-26 batch), answered by the dispatcher over the gateway, so calls get the same
 * scope, limits, audit line and metrics as REST. The app's hooks run first, as for every route:
 * the Host and Origin guard, the key (401 before any MCP processing), the rate limit, load
 * shedding, shutdown, the body limit and the JSON-only body parser. Their refusals are answered
 * as JSON-RPC errors without an id (the HTTP status and headers as for REST) and audited through
 * `gateway.refused`. A response is JSON, except a `tools/call` that asked for progress from a
 * client that accepts `text/event-stream`: once the first progress report comes, the answer turns
 * into an SSE stream of the notifications and then the response. A closed connection aborts the
 * call. There is no stream to open and no session to end, so GET and DELETE answer 405.
 */
export function mcpRoutes(app: FastifyInstance, { gateway, idleTimeoutMs, redis }: McpRoutesOptions): void {
  const dispatcher = new McpDispatcher(gatewayBackend(gateway, { transport: MCP_TRANSPORT, serverInfo: { name: 'toolport', version: VERSION } }));
  const keepAliveMs = Math.max(1000, Math.floor(idleTimeoutMs / 2));
  // The calls a client's notifications/cancelled can reach, by caller and JSON-RPC id (see InFlightCalls).
  let channel: CancellationChannel | undefined;
  const calls = new InFlightCalls({ log: app.log, forward: (cancellation) => channel?.publish(cancellation) });
  if (redis !== undefined) {
    app.addHook('onReady', async () => {
      channel = await openCancellationChannel(redis, app.log, ({ caller, requestId, reason }) => calls.of(caller).cancelHere(requestId, reason));
    });
    app.addHook('onClose', async () => channel?.close());
  }
  // Who a cancellation may come from: the caller that fair admission knows (key label, or client address).
  const callsOf = (caller: Caller): InFlightCalls | undefined => {
    const name = admissionName(caller);
    return name === undefined ? undefined : calls.of(name);
  };

  // Runs only for errors raised before the handler (the dispatcher answers everything it sees).
  const refusedBeforeDispatch = (request: FastifyRequest, _reply: FastifyReply, error: FastifyError, done: () => void): void => {
    gateway.refused({ caller: new RequestCaller(request), requestId: request.id, transport: MCP_TRANSPORT }, knownOrLogged(error, request));
    done();
  };
  const answerRefusal = (error: FastifyError, request: FastifyRequest, reply: FastifyReply): FastifyReply => {
    const refusal = knownOrLogged(error, request);
    const data = refusal.details === undefined ? { code: refusal.code } : { code: refusal.code, details: refusal.details };
    // JSON-RPC 2.0 answers an error it cannot tie to a request with "id": null, as revisions
    // before 2025-11-25 want too; from 2025-11-25 on, the id of such an error is left out.
    const version = headerOf(request.headers['mcp-protocol-version']) ?? DEFAULT_LEGACY_VERSION;
    const rpcError = { code: refusal.jsonRpcCode, message: refusal.message, data };
    const body = omitsUnknownErrorId(version) ? { jsonrpc: '2.0', error: rpcError } : { jsonrpc: '2.0', id: null, error: rpcError };
    return setErrorHeaders(reply, refusal).code(refusal.statusCode).type(JSON_TYPE).send(JSON.stringify(body));
  };

  app.post(
    '/mcp',
    { schema: { hide: true }, config: { runsTools: true }, onError: refusedBeforeDispatch, errorHandler: answerRefusal },
    async (request, reply) => {
      const message = request.body;
      const headers = request.headers;
      const protocolVersion = headerOf(headers['mcp-protocol-version']);
      const mismatch = checkStandardHeaders(message, { protocolVersion, method: headerOf(headers['mcp-method']), name: headerOf(headers['mcp-name']) });
      if (mismatch) {
        // A call refused for its headers is a refused call like any other: audited and counted.
        if (carriesToolsCall(message)) {
          const name = isPlainObject(message) && isPlainObject(message['params']) ? message['params']['name'] : undefined;
          gateway.refused(
            { caller: new RequestCaller(request), tool: typeof name === 'string' ? name : undefined, requestId: request.id, transport: MCP_TRANSPORT },
            new ToolportError('BAD_REQUEST', mismatch.error.message),
          );
        }
        return reply.code(400).type(JSON_TYPE).send(encode(mismatch));
      }

      const caller: Caller = new RequestCaller(request);
      if (!carriesToolsCall(message)) {
        const own = carriesCancellation(message) ? callsOf(caller) : undefined;
        const outcome = await dispatcher.handle(message, {
          caller,
          requestId: request.id,
          ...(protocolVersion ? { protocolVersion } : {}),
          ...(own ? { calls: own } : {}),
        });
        return send(reply, outcome.status, outcome.reply);
      }

      // Tool calls: aborted when the client goes away (and by shutdown, through the gateway); with
      // no AbortController unless a tool asks for a signal.
      const abort = new CallAbort();
      const stopWatching = whenClientGoes(request, () => abort.abort(CLIENT_GONE));
      const stream = wantsProgressStream(message, headers.accept) ? new ProgressStream(reply, keepAliveMs) : undefined;
      try {
        const own = callsOf(caller);
        const outcome = await dispatcher.handle(message, {
          caller,
          requestId: request.id,
          signal: abort,
          ...(own ? { calls: own } : {}),
          ...(protocolVersion ? { protocolVersion } : {}),
          ...(stream ? { notify: stream.notify } : {}),
        });
        if (stream?.started) return stream.end(outcome.reply);
        return send(reply, outcome.status, outcome.reply);
      } finally {
        stream?.stopKeepAlive();
        stopWatching();
      }
    },
  );

  const notAllowed = async (_request: FastifyRequest, reply: FastifyReply) => reply.code(405).header('allow', 'POST').send();
  app.get('/mcp', { schema: { hide: true } }, notAllowed);
  app.delete('/mcp', { schema: { hide: true } }, notAllowed);
}

/** The response as JSON, or 202 with no body when there is nothing to send (notifications). */
function send(reply: FastifyReply, status: number, message: JsonRpcResponse | JsonRpcResponse[] | undefined): FastifyReply {
  if (message === undefined) return reply.code(202).send();
  const text = Array.isArray(message) ? `[${message.map(encode).join(',')}]` : encode(message);
  return reply.code(status).type(JSON_TYPE).send(text);
}

/**
 * The buffer of an SSE stream, before the socket's own: the stream counts as blocked once it holds
 * this much (on each of its two sides) that the socket has not taken.
 */
const STREAM_BUFFER_BYTES = 16 * 1024;

/**
 * An SSE answer, started by the first notification: a call that reports no progress is answered
 * with plain JSON. The stream goes through `reply.send`, so the app's onSend hooks still run. It
 * is bounded: what the client has not taken stays within the stream's buffer, the socket's and
 * one notification, since while they are full only the latest progress waits (`BoundedOutput`).
 * A client that takes nothing at all is cut off by the connection's idle timeout, which counts
 * from the socket's last write once the response has started (nothing is written to a blocked
 * socket), and its call is aborted as any client that went away.
 */
class ProgressStream {
  readonly #reply: FastifyReply;
  readonly #keepAliveMs: number;
  #body: PassThrough | undefined;
  #out: BoundedOutput | undefined;
  #keepAlive: NodeJS.Timeout | undefined;

  constructor(reply: FastifyReply, keepAliveMs: number) {
    this.#reply = reply;
    this.#keepAliveMs = keepAliveMs;
  }

  get started(): boolean {
    return this.#body !== undefined;
  }

  readonly notify = (notification: JsonRpcNotification): void => {
    (this.#out ?? this.#start()).progress(notification);
  };

  end(message: JsonRpcResponse | JsonRpcResponse[] | undefined): FastifyReply {
    this.stopKeepAlive();
    // A cancelled call has no response; the stream just ends.
    if (message !== undefined && !Array.isArray(message)) this.#out?.send(message);
    this.#out?.close();
    this.#body?.end();
    return this.#reply;
  }

  stopKeepAlive(): void {
    if (this.#keepAlive) clearInterval(this.#keepAlive);
    this.#keepAlive = undefined;
  }

  #start(): BoundedOutput {
    const body = new PassThrough({ highWaterMark: STREAM_BUFFER_BYTES });
    const out = new BoundedOutput(body, { frame: (text) => `event: message\ndata: ${text}\n\n` });
    this.#body = body;
    this.#out = out;
    void this.#reply.code(200).header('content-type', 'text/event-stream').header('cache-control', 'no-cache').header('x-accel-buffering', 'no').send(body);
    // A comment line keeps the idle timeout from closing a call that is silent for a while.
    this.#keepAlive = setInterval(() => out.optional(':\n\n'), this.#keepAliveMs);
    return out;
  }
}

/** A tools/call, alone or in a batch (2025-03-26): its calls must end when the client goes away. */
function carriesToolsCall(message: unknown): boolean {
  const isCall = (m: unknown): boolean => isPlainObject(m) && m['method'] === 'tools/call';
  return isCall(message) || (Array.isArray(message) && message.some(isCall));
}

/** A notifications/cancelled, alone or in a batch: it needs the caller's calls in flight. */
function carriesCancellation(message: unknown): boolean {
  const isCancel = (m: unknown): boolean => isPlainObject(m) && m['method'] === 'notifications/cancelled';
  return isCancel(message) || (Array.isArray(message) && message.some(isCancel));
}

/** A progress token, and a client that takes SSE: the spec lets the server answer either way. */
function wantsProgressStream(message: unknown, accept: string | undefined): boolean {
  if (accept === undefined || !accept.includes('text/event-stream') || !isPlainObject(message)) return false;
  const params = message['params'];
  const meta = isPlainObject(params) ? params['_meta'] : undefined;
  return isPlainObject(meta) && meta['progressToken'] !== undefined;
}

function headerOf(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(', ') : value;
}
