import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Redis } from 'ioredis';
import { CallAbort } from '../../core/call-abort.js';
import { admissionName, type Caller, type Gateway } from '../../core/gateway.js';
import { McpDispatcher } from '../../mcp/dispatcher.js';
import { gatewayBackend } from '../../mcp/gateway-backend.js';
import { checkStandardHeaders, checkStreamRequest } from '../../mcp/http-headers.js';
import { InFlightCalls } from '../../mcp/cancellable.js';
import { errorResponse, RpcCodes, type JsonRpcErrorResponse, type JsonRpcResponse } from '../../core/json-rpc.js';
import { isRecord } from '../../core/json.js';
import { encode } from '../../mcp/jsonrpc.js';
import { LIST_CHANGED, SubscriptionHub, type SubscriptionLimits, type SubscriptionOpener, type ToolsChange } from '../../mcp/subscriptions.js';
import { openCancellationChannel, type CancellationChannel } from '../../infra/redis.js';
import { VERSION } from '../../infra/version.js';
import { ToolportError } from '../../core/errors.js';
import { DEFAULT_LEGACY_VERSION, omitsUnknownErrorId } from '../../mcp/protocol-versions.js';
import { RequestCaller } from '../caller.js';
import { whenClientGoes } from '../client-gone.js';
import { knownOrLogged, setErrorHeaders } from '../error-handler.js';
import { acceptsEventStream, keepAliveInterval, McpEventStream } from '../sse.js';
import type { CallTaskStore } from '../../core/call-task.js';

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
  /**
   * Subscribes to changes of the tool list (`ToolRegistry.onChange`, when upstreams make it
   * change); returns what unsubscribes. Given, `tools.listChanged` is announced and clients hear
   * each change: 2026-07-28 clients on `subscriptions/listen`, earlier ones on the GET stream.
   * Absent, the list never changes: no capability, and GET answers 405.
   */
  toolsChange?: ToolsChange | undefined;
  /** Most subscriptions open at once (listen requests and GET streams together), per caller and in all. Defaults: 16 and 1024. */
  maxSubscriptions?: SubscriptionLimits;
  /** Where tool calls run as MCP tasks (the same store as REST's `Prefer: respond-async`); without, no task is offered. */
  tasks?: CallTaskStore | undefined;
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
 * call. A `subscriptions/listen` (2026-07-28) is answered with an SSE stream at once: its
 * acknowledgement, then each tool-list change, until the client closes it or the server closes
 * (then its empty result). Clients of the 2025 revisions hear changes on the standalone stream a
 * GET opens, which those revisions allow without a session, since a list change concerns no
 * request; without `toolsChange` there is nothing to hear and GET answers 405. There is no
 * session to end, so DELETE answers 405.
 */
export function mcpRoutes(app: FastifyInstance, { gateway, idleTimeoutMs, redis, toolsChange, maxSubscriptions, tasks }: McpRoutesOptions): void {
  const dispatcher = new McpDispatcher(gatewayBackend(gateway, { transport: MCP_TRANSPORT, serverInfo: { name: 'toolport', version: VERSION }, tasks }), {
    listChanged: toolsChange !== undefined,
  });
  const keepAliveMs = keepAliveInterval(idleTimeoutMs);
  // Subscriptions end before the server stops listening, each with the graceful close its revision has.
  const subscriptions = new SubscriptionHub(toolsChange, maxSubscriptions);
  app.addHook('preClose', (done) => {
    subscriptions.closeAll();
    done();
  });
  const subscriptionsOf = (caller: Caller): SubscriptionOpener | undefined => (subscriptions.live ? subscriptions.of(admissionName(caller) ?? '') : undefined);
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
          const name = isRecord(message) && isRecord(message['params']) ? message['params']['name'] : undefined;
          gateway.refused(
            { caller: new RequestCaller(request), tool: typeof name === 'string' ? name : undefined, requestId: request.id, transport: MCP_TRANSPORT },
            new ToolportError('BAD_REQUEST', mismatch.error.message),
          );
        }
        return reply.code(400).type(JSON_TYPE).send(encode(mismatch));
      }

      const caller: Caller = new RequestCaller(request);
      const listen = isListen(message);
      if (!listen && !carriesToolsCall(message)) {
        const own = carriesCancellation(message) ? callsOf(caller) : undefined;
        const outcome = await dispatcher.handle(message, {
          caller,
          requestId: request.id,
          ...(protocolVersion ? { protocolVersion } : {}),
          ...(own ? { calls: own } : {}),
        });
        return send(reply, outcome.status, outcome.reply);
      }

      if (listen && !acceptsEventStream(headers.accept)) {
        const { id } = message as { id: string | number };
        const refusal = errorResponse(
          id,
          RpcCodes.INVALID_REQUEST,
          'Not Acceptable: subscriptions/listen answers with an event stream; the Accept header must list text/event-stream',
        );
        return reply.code(406).type(JSON_TYPE).send(encode(refusal));
      }

      // Tool calls and subscriptions: ended when the client goes away (calls also by shutdown,
      // through the gateway); with no AbortController unless a tool asks for a signal.
      const abort = new CallAbort();
      const stopWatching = whenClientGoes(request, () => abort.abort(CLIENT_GONE));
      const stream = listen || wantsProgressStream(message, headers.accept) ? new McpEventStream(reply, keepAliveMs) : undefined;
      // A subscription's connection closes with it, so a shutdown that ends it is not kept waiting
      // for the connection's keep-alive.
      if (listen) reply.header('connection', 'close');
      try {
        const own = callsOf(caller);
        const opener = listen ? subscriptionsOf(caller) : undefined;
        const outcome = await dispatcher.handle(message, {
          caller,
          requestId: request.id,
          signal: abort,
          ...(own ? { calls: own } : {}),
          ...(protocolVersion ? { protocolVersion } : {}),
          ...(stream ? { notify: stream.notify } : {}),
          ...(opener ? { subscriptions: opener } : {}),
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
  app.get('/mcp', { schema: { hide: true } }, async (request, reply) => {
    const protocolVersion = headerOf(request.headers['mcp-protocol-version']);
    const refusal = checkStreamRequest({ protocolVersion, accept: request.headers.accept }, subscriptions.live);
    if (refusal?.status === 405) return notAllowed(request, reply);
    if (refusal) return reply.code(refusal.status).type(JSON_TYPE).send(unknownIdBody(refusal.error, protocolVersion));
    return standaloneStream(request, reply, subscriptions.of(admissionName(new RequestCaller(request)) ?? ''), protocolVersion, keepAliveMs);
  });
  app.delete('/mcp', { schema: { hide: true } }, notAllowed);
}

/**
 * The standalone stream of a GET (2025 revisions): a `notifications/tools/list_changed` at each
 * change of the tool list, unstamped, as those revisions send it, until the client goes away or
 * the server closes (the stream just ends; the SDKs' clients open it again, elsewhere if need be).
 * It holds one of the caller's subscriptions: past the caller's share 429, past the server's 503.
 */
function standaloneStream(request: FastifyRequest, reply: FastifyReply, opener: SubscriptionOpener, protocolVersion: string | undefined, keepAliveMs: number) {
  const stream = new McpEventStream(reply, keepAliveMs);
  let stopWatching = (): void => {};
  const end = (): void => {
    stopWatching();
    stream.end();
  };
  const subscription = opener.open({ changed: () => stream.notify(LIST_CHANGED), ended: end });
  if ('refused' in subscription) {
    const body = unknownIdBody(errorResponse(null, RpcCodes.INTERNAL_ERROR, subscription.refused), protocolVersion);
    return reply
      .code(subscription.limit === 'caller' ? 429 : 503)
      .type(JSON_TYPE)
      .send(body);
  }
  reply.header('connection', 'close');
  stream.start();
  stopWatching = whenClientGoes(request, () => {
    subscription.close();
    end();
  });
  return reply;
}

/** An error that names no request: `"id": null` before 2025-11-25, no id from then on (as `answerRefusal` has it). */
function unknownIdBody(error: JsonRpcErrorResponse, protocolVersion: string | undefined): string {
  return JSON.stringify(omitsUnknownErrorId(protocolVersion ?? DEFAULT_LEGACY_VERSION) ? error : { jsonrpc: '2.0', id: null, error: error.error });
}

/** The response as JSON, or 202 with no body when there is nothing to send (notifications). */
function send(reply: FastifyReply, status: number, message: JsonRpcResponse | JsonRpcResponse[] | undefined): FastifyReply {
  if (message === undefined) return reply.code(202).send();
  const text = Array.isArray(message) ? `[${message.map(encode).join(',')}]` : encode(message);
  return reply.code(status).type(JSON_TYPE).send(text);
}

/** A `subscriptions/listen` request (alone: the stateless revision has no batches): it is answered with a stream. */
function isListen(message: unknown): boolean {
  return isRecord(message) && message['method'] === 'subscriptions/listen' && (typeof message['id'] === 'string' || typeof message['id'] === 'number');
}

/** A tools/call, alone or in a batch (2025-03-26): its calls must end when the client goes away. */
function carriesToolsCall(message: unknown): boolean {
  const isCall = (m: unknown): boolean => isRecord(m) && m['method'] === 'tools/call';
  return isCall(message) || (Array.isArray(message) && message.some(isCall));
}

/** A notifications/cancelled, alone or in a batch: it needs the caller's calls in flight. */
function carriesCancellation(message: unknown): boolean {
  const isCancel = (m: unknown): boolean => isRecord(m) && m['method'] === 'notifications/cancelled';
  return isCancel(message) || (Array.isArray(message) && message.some(isCancel));
}

/** A progress token, and a client that takes SSE: the spec lets the server answer either way. */
function wantsProgressStream(message: unknown, accept: string | undefined): boolean {
  if (!acceptsEventStream(accept) || !isRecord(message)) return false;
  const params = message['params'];
  const meta = isRecord(params) ? params['_meta'] : undefined;
  return isRecord(meta) && meta['progressToken'] !== undefined;
}

function headerOf(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(', ') : value;
}
