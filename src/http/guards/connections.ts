import type { IncomingMessage, ServerOptions } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction, onRequestHookHandler, onSendHookHandler } from 'fastify';
import type { HttpSettings } from '../../config/config.js';
import { throttled } from '../../infra/throttled.js';
import { DEFAULT_HEADERS_TIMEOUT_MS, DEFAULT_IDLE_TIMEOUT_MS, DEFAULT_KEEP_ALIVE_TIMEOUT_MS, DEFAULT_REQUEST_TIMEOUT_MS } from '../defaults.js';

/**
 * How long a connection may take over each part of its life, and how many may be open at once:
 * the http section's deadlines (`src/config/sections/http.ts` says what each is).
 * Without them a client that opens sockets and sends nothing (or half a header, or half a body)
 * holds a descriptor for ever, and enough of them exhaust the process's descriptors.
 */
export type ConnectionLimits = Pick<HttpSettings, 'headersTimeoutMs' | 'requestTimeoutMs' | 'keepAliveTimeoutMs' | 'idleTimeoutMs'> & {
  /** `TOOLPORT_MAX_CONNECTIONS`, `Infinity` when unset. */
  maxConnections: number;
};

export { DEFAULT_HEADERS_TIMEOUT_MS, DEFAULT_IDLE_TIMEOUT_MS, DEFAULT_KEEP_ALIVE_TIMEOUT_MS, DEFAULT_REQUEST_TIMEOUT_MS };

/** The limits, with the defaults for those not given (no connection cap). */
export function connectionLimits(given: Partial<ConnectionLimits> = {}): ConnectionLimits {
  const requestTimeoutMs = given.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  return {
    requestTimeoutMs,
    // Node requires the header deadline to fall within the request's.
    headersTimeoutMs: given.headersTimeoutMs ?? Math.min(DEFAULT_HEADERS_TIMEOUT_MS, requestTimeoutMs),
    keepAliveTimeoutMs: given.keepAliveTimeoutMs ?? DEFAULT_KEEP_ALIVE_TIMEOUT_MS,
    idleTimeoutMs: given.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS,
    maxConnections: given.maxConnections ?? Infinity,
  };
}

/** The Fastify server options that carry the limits (the connection cap is set on the server itself). */
export function connectionServerOptions(limits: ConnectionLimits): {
  connectionTimeout: number;
  requestTimeout: number;
  keepAliveTimeout: number;
  http: ServerOptions;
} {
  return {
    connectionTimeout: limits.idleTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    http: {
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      // Node checks the header and request deadlines every 30 s by default, so a 10 s deadline
      // could hold a socket for 40 s; check often enough that a deadline means what it says.
      connectionsCheckingInterval: Math.max(10, Math.min(1_000, Math.floor(limits.headersTimeoutMs / 2))),
    },
  };
}

/**
 * The connection cap, the idle timeout that spares running calls, and listeners that keep a
 * failure to accept a connection from ending the process. Call before the first route is added.
 *
 * The idle timeout is the socket's inactivity timer: it fires, too, while a tool call runs and
 * the connection rightly stays silent (Bash may run for ten minutes). A socket whose call is
 * still running is spared; once the response starts, any write re-arms the timer, so a client
 * that stops reading is still cut off. A stuck call is the tool deadline's to end, not this one's.
 */
export function installConnectionGuards(app: FastifyInstance, limits: ConnectionLimits): void {
  const server = app.server;
  server.maxConnections = limits.maxConnections;
  // Calls whose response has not started, counted on their socket (more than one when requests
  // are pipelined), in a property of its own: a WeakMap and a WeakSet cost 1.4% of a call. Only
  // the routes that run tools (config.runsTools) count them: nothing else keeps a socket silent
  // for long, and every other request is spared two hooks.
  const enter = (request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction): void => {
    const raw = request.raw as Counted<IncomingMessage>;
    const socket = raw.socket as Counted<Socket>;
    socket[RUNNING] = (socket[RUNNING] ?? 0) + 1;
    raw[RUNNING] = 1;
    done();
  };
  // A request refused before its route's hooks ran was never counted.
  const leave = (request: FastifyRequest, _reply: FastifyReply, payload: unknown, done: (err: null, payload: unknown) => void): void => {
    const raw = request.raw as Counted<IncomingMessage>;
    if (raw[RUNNING] === 1) {
      raw[RUNNING] = 0;
      (raw.socket as Counted<Socket>)[RUNNING]! -= 1;
    }
    done(null, payload);
  };
  app.addHook('onRoute', (route) => {
    if (route.config?.runsTools !== true) return;
    route.onRequest = [enter as onRequestHookHandler, ...hooksOf(route.onRequest)];
    route.onSend = [...hooksOf(route.onSend), leave as onSendHookHandler];
  });
  // With a listener here, Node leaves the socket to it instead of destroying it.
  server.on('timeout', (socket: Counted<Socket>) => {
    if (!((socket[RUNNING] ?? 0) > 0)) socket.destroy();
  });

  const refused = throttled(app.log, 'warn', 'connections refused: the connection cap (TOOLPORT_MAX_CONNECTIONS) is reached');
  server.on('drop', () => refused({ maxConnections: limits.maxConnections }));
  // After listening, an 'error' without a listener would throw and end the process: a failed
  // accept (EMFILE when descriptors run out) must cost one connection, not the server.
  const failed = throttled(app.log, 'error', 'server error; still listening');
  app.addHook('onListen', (done) => {
    server.on('error', (err: NodeJS.ErrnoException) => failed({ code: err.code, syscall: err.syscall, err }));
    done();
  });
}

const RUNNING = Symbol('toolport.runningCalls');
/** A socket (its calls running) or a request (1 while counted) with the count of the connection guards. */
type Counted<T> = T & { [RUNNING]?: number };

/** A route's own hooks of one kind, as an array (Fastify takes one, many or none). */
function hooksOf<Hook>(hooks: Hook | Hook[] | undefined): Hook[] {
  if (hooks === undefined) return [];
  return Array.isArray(hooks) ? hooks : [hooks];
}
