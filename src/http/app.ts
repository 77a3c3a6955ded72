import type { UpstreamStates } from './routes/health.js';
import type { KeySpec } from '../auth/keyring.js';
import type { BackgroundWork } from '../core/background.js';
import type { ResourceServer } from '../auth/open.js';
import type { HttpSettings, LimitsSettings } from '../config/config.js';
import { TOOL_SCOPE_PREFIX } from '../auth/identity.js';
import { mappingScopeNames } from '../auth/mapping.js';
import Fastify, { LogController, type FastifyInstance, type FastifyPluginAsync } from 'fastify';
import type { Redis } from 'ioredis';
import { pino, type Logger } from 'pino';
import type { ToolExecutor } from '../core/executor.js';
import { ToolportError } from '../core/errors.js';
import type { Gateway } from '../core/gateway.js';
import type { RoundTrip } from '../core/tracer.js';
import { shuttingDown } from '../core/in-flight.js';
import type { Keyring } from '../auth/keyring.js';
import type { ToolRegistry } from '../core/registry.js';
import { DEFAULT_BODY_LIMIT } from './defaults.js';
import { installAccessControl } from './guards/auth.js';
import { connectionLimits, connectionServerOptions, installConnectionGuards, type ConnectionLimits } from './guards/connections.js';
import { installCors } from './guards/cors.js';
import { answerClientError, installErrorHandling, sendError } from './error-handler.js';
import { installMetrics, type ServiceMetrics } from './metrics.js';
import { assertToolsetsBound, runtimeFromOptions, type AppOptions } from './app-options.js';
import { installProtection, type PressureOptions } from './guards/protection.js';
import { lazyLogger } from './request-log.js';
import { installJsonBody } from './json-body.js';
import { lazySchemaCompilers } from './lazy-compilers.js';
import { registerOpenAPI } from './openapi/document.js';
import type { OpenAPIDocument } from './openapi/tools-document.js';
import { metadataUrls, oauthRoutes } from './routes/oauth-metadata.js';
import { healthRoutes } from './routes/health.js';
import { callsRoutes, CALLS_TRANSPORT } from './routes/calls.js';
import { MCP_TRANSPORT, mcpRoutes } from './routes/mcp.js';
import { REST_TRANSPORT, toolRoutes } from './routes/tools.js';
import { taskRoutes } from './routes/tasks.js';
import { CallTasks } from '../core/call-task-store.js';

/**
 * What the app serves, opened by the process (`openRuntime` in src/main/runtime.ts): the tools,
 * the callers and the gateway every call goes through. The app builds routes and guards around it.
 */
export interface AppRuntime {
  /** The tools to serve; a source's tools may change later (the lists and the OpenAPI document follow). */
  readonly registry: ToolRegistry;
  /** Every call goes through it: scope, admission, deadline, audit line and metrics. */
  readonly gateway: Gateway;
  /** The API keys in use; empty: no authentication (unless `oauth`). */
  readonly keyring: Keyring;
  /** The same tools as `registry` bound to the keys' own workspaces (see `openKeyWorkspaces`). */
  readonly toolsets: ReadonlyMap<string, ToolRegistry>;
  /** The metrics `/metrics` serves; the gateway reports every call to them. */
  readonly metrics: ServiceMetrics;
  /** Where the app logs; silent when omitted. */
  readonly logger?: Logger;
  /** The upstream MCP servers, for `/readyz` and the lists' changes. */
  readonly upstreams?: UpstreamStates | undefined;
  /** toolport as an OAuth 2.1 resource server (`openResourceServer`); undefined: keys only. */
  readonly oauth?: ResourceServer | undefined;
  /**
   * The rate-limit counts shared by every replica, and MCP cancellations passed between them; the
   * caller owns the connection. Without it each process counts alone.
   */
  readonly redis?: Redis | undefined;
  /** Work that outlives its call (Bash's background tasks): counted by `/readyz` and `/metrics`, drained on shutdown like calls. */
  readonly tasks?: BackgroundWork | undefined;
  /**
   * Tool calls run as tasks (`Prefer: respond-async`, MCP's tasks), over `gateway`: calls in flight
   * like any other, so shutdown drains them with the calls. Default: a store with the default bounds.
   */
  readonly callTasks?: CallTasks | undefined;
  /** Tracing, when it is on: its Fastify plugin gives each request a server span continued from its traceparent; Redis commands get client spans. */
  readonly tracing?: { fastifyPlugin(): FastifyPluginAsync; roundTrip: RoundTrip } | undefined;
}

/** The fields of the configuration's `http` section (and its rate limit) that the app applies, as the section declares them. */
type HttpSectionFields = Pick<HttpSettings, 'bodyLimit' | 'docs' | 'publicDocs' | 'allowedHosts' | 'allowedOrigins' | 'corsOrigins' | 'trustProxy'> &
  Pick<LimitsSettings, 'rateLimit'>;

/**
 * How the app answers HTTP: the configuration's `http` section as it is (a `Config` passes), each
 * field optional (defaults: a 1 MiB body, `/docs` served, no extra hosts or origins, no CORS, no
 * proxy believed, no rate limit), and what the process derives from it.
 */
export type AppHttpOptions = { readonly [K in keyof HttpSectionFields]?: Readonly<HttpSectionFields[K]> } & {
  /** The server listens on loopback: refuse requests whose Host or Origin is not local (default false). */
  localOnly?: boolean;
  /** Timeouts and the connection cap (default: the DEFAULT_* timeouts of connections.ts, no cap). */
  connections?: Partial<ConnectionLimits>;
  /** When to shed load with 503 OVERLOADED (default: event-loop delay over 1 s, heap near its limit); false: never. */
  pressure?: PressureOptions | false;
};

/** What the entry point needs to run the app: the gateway, and a bounded graceful shutdown. */
export interface Toolport {
  /** Every call goes through it; another adapter on the same server (MCP) calls it too. */
  gateway: Gateway;
  /** The gateway's pipeline (`gateway.executor`). */
  executor: ToolExecutor;
  /** True once shutdown began: readiness fails and new calls get 503. */
  readonly draining: boolean;
  /**
   * Stops taking calls, lets calls in flight finish for up to `graceMs`, aborts what remains
   * through its signal, then closes the server.
   */
  shutdown(graceMs: number): Promise<void>;
  /**
   * Puts `keys` in place of the keys in use (a reload of the keys file), from the next request
   * on: a key left out gets 401, a key whose tools changed gets its new scope, a new key works.
   * Requests already past the key check, and their calls, go on as they began. Throws, changing
   * nothing, when the app was built without keys (a reload cannot switch authentication on), when
   * `keys` is empty, or when a key's workspace has no tools bound in `toolsets`.
   */
  replaceKeys(keys: readonly KeySpec[]): void;
}

declare module 'fastify' {
  interface FastifyInstance {
    toolport: Toolport;
    /** The OpenAPI document as `/openapi.json` serves it now: every tool registered, each its own operation. */
    openapiDocument(): OpenAPIDocument;
  }
  interface FastifyContextConfig {
    /** The route runs tool calls, which may keep its connection silent for minutes (see `installConnectionGuards`). */
    runsTools?: boolean;
    /** What the route's body holds, for the errors about a body it cannot read (default: `the tool input`). */
    bodyIs?: string;
    /** The body's schema in the OpenAPI document, for a route that reads its body itself rather than through Fastify's validation. */
    documentedBody?: object;
    /** The route answers without credentials (the OAuth discovery documents, which a client reads before it has any). */
    openRoute?: boolean;
  }
}

export { DEFAULT_BODY_LIMIT };
export type { AppOptions };

const CLIENT_REQUEST_ID = /^[\w.:-]{1,128}$/;

/** Request ids: the client's x-request-id when it is short and plain, else a counter. */
function requestId(): (req: { headers: Record<string, string | string[] | undefined> }) => string {
  let next = 0;
  return (req) => {
    const given = req.headers['x-request-id'];
    return typeof given === 'string' && CLIENT_REQUEST_ID.test(given) ? given : `req-${(++next).toString(36)}`;
  };
}

/** Fastify's trustProxy; its types leave out the hop count its runtime takes, so that becomes a function. */
function trustedProxies(trust: boolean | number | readonly string[]): boolean | string[] | ((address: string, hop: number) => boolean) {
  if (typeof trust === 'number') return (_address, hop) => hop < trust;
  return typeof trust === 'boolean' ? trust : [...trust];
}

/** How long a closing server lets the last answers go out before it closes the connections left. */
const CLOSE_FLUSH_MS = 500;

/**
 * Builds the HTTP service around what a process opened (`openRuntime`): routes and guards, no
 * more. Never listens: the caller owns the process, and closes the runtime after the app.
 */
export async function buildApp(runtime: AppRuntime, http?: AppHttpOptions): Promise<FastifyInstance>;
/**
 * @deprecated Open a runtime (`openRuntime`) and call `buildApp(runtime, http)`; this form makes
 * the keyring, the gateway and the metrics from `options` itself.
 */
export async function buildApp(options: AppOptions): Promise<FastifyInstance>;
export async function buildApp(runtimeOrOptions: AppRuntime | AppOptions, httpOptions: AppHttpOptions = {}): Promise<FastifyInstance> {
  const [runtime, http] = 'gateway' in runtimeOrOptions ? [runtimeOrOptions, httpOptions] : runtimeFromOptions(runtimeOrOptions);
  const { registry, gateway, keyring, toolsets, metrics, tasks } = runtime;
  const logger = runtime.logger ?? pino({ level: 'silent' });
  const connections = connectionLimits(http.connections);
  const app = Fastify({
    // Children made lazily: request.log binds the request id when something logs there.
    loggerInstance: lazyLogger(logger),
    ...connectionServerOptions(connections),
    trustProxy: trustedProxies(http.trustProxy ?? false),
    // One log line per tool call comes from the pipeline; Fastify's two per request would halve throughput.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: http.bodyLimit ?? DEFAULT_BODY_LIMIT,
    // The client's x-request-id is taken only when it is short and plain: it goes into every log line.
    requestIdHeader: false,
    genReqId: requestId(),
    // Shutdown answers new requests itself, in the error-body shape.
    return503OnClosing: false,
    clientErrorHandler: answerClientError,
    // Unknown query parameters are refused like unknown tool input, not silently dropped.
    ajv: { customOptions: { removeAdditional: false } },
    // Each route's schemas compiled on its first request, not all of them before listening.
    schemaController: { compilersFactory: lazySchemaCompilers() },
    // Errors raised before routing (a malformed %-escape, an over-long parameter) skip the hooks
    // and the error handler; answer them in the same shape, with the request id.
    frameworkErrors: (err, request, reply) => {
      reply.header('x-request-id', request.id);
      const path = request.url.split('?')[0]!.slice(0, 200);
      return sendError(
        reply,
        err.code === 'FST_ERR_MAX_PARAM_LENGTH'
          ? new ToolportError('ROUTE_NOT_FOUND', `Route ${request.method} ${path} not found.`)
          : new ToolportError('BAD_REQUEST', 'The URL holds a malformed percent-encoding.'),
      );
    },
  }) as unknown as FastifyInstance;

  metrics.serveTransports([REST_TRANSPORT, CALLS_TRANSPORT, MCP_TRANSPORT]);
  // Before every hook and route, which it instruments as they are added.
  if (runtime.tracing !== undefined) await app.register(runtime.tracing.fastifyPlugin());

  app.decorate('toolport', {
    gateway,
    executor: gateway.executor,
    get draining() {
      return gateway.draining;
    },
    async shutdown(graceMs: number) {
      // Keep listening while draining: load balancers see /readyz fail and new calls get a clean 503.
      gateway.drain();
      tasks?.drain();
      // Background tasks are calls in flight too: they get the same grace, then end with the calls.
      const [callsDone, tasksDone] = await Promise.all([gateway.drained(graceMs), tasks?.drained(graceMs) ?? true]);
      if (!callsDone || !tasksDone) {
        gateway.abortAll(new Error('the server is shutting down'));
        // Aborted calls answer at once; the bound only guards against a stuck response.
        await Promise.all([gateway.drained(graceMs), tasks?.stopAll()]);
      }
      // Node counts a connection a client opened but never sent a request on (undici opens one
      // after an aborted stream) as busy, so close() would wait for its timeout: after a moment for
      // the last answers and stream ends to go out, every connection still open is closed.
      const closeRest = setTimeout(() => app.server.closeAllConnections(), CLOSE_FLUSH_MS);
      closeRest.unref();
      try {
        await app.close();
      } finally {
        clearTimeout(closeRest);
      }
    },
    replaceKeys(keys: readonly KeySpec[]) {
      if (keyring.size === 0) throw new Error('The server was started without API keys: a reload cannot switch authentication on.');
      if (keys.length === 0) throw new Error('A reload must leave at least one API key.');
      assertToolsetsBound(keys, toolsets);
      // Both synchronous: no request sees the new keys before their lists are made.
      keyring.replace(keys);
      gateway.prepareLists(keyring.scopes);
    },
  } satisfies Toolport);

  installErrorHandling(app);
  // The log destination buffers lines; pino writes what is left synchronously at exit, too.
  app.addHook('onClose', async () => logger.flush());
  installConnectionGuards(app, connections);
  installJsonBody(app);
  // First, so that every response, refusals by the hooks below included, carries the id.
  // Callback hooks, here and below: no promise per request on the hot path.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    done();
  });
  // Before the guard and authentication: a preflight carries no credentials.
  await installCors(app, http.corsOrigins ?? []);
  const oauth = runtime.oauth;
  installAccessControl(app, {
    keyring,
    oauth: oauth === undefined ? undefined : { tokens: oauth.tokens, ...metadataUrls(oauth.publicUrl) },
    publicDocs: http.publicDocs ?? false,
    localOnly: http.localOnly ?? false,
    allowedHosts: http.allowedHosts,
    allowedOrigins: [...(http.allowedOrigins ?? []), ...(http.corsOrigins ?? [])],
  });
  await installProtection(app, {
    rateLimit: http.rateLimit ?? 0,
    pressure: http.pressure,
    redis: runtime.redis,
    onStoreError: () => metrics.rateLimitStoreErrors.inc(),
    roundTrip: runtime.tracing?.roundTrip,
  });
  installMetrics(app, metrics);

  app.addHook('onRequest', (request, _reply, done) => {
    done(gateway.draining && request.url !== '/healthz' ? shuttingDown() : undefined);
  });
  // While draining, every response closes its connection, so none lingers idle after the close.
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (gateway.draining) reply.header('connection', 'close');
    done(null, payload);
  });

  // What the metadata and the OpenAPI document advertise: the configured scopes, or every tool's and the mapping's own.
  const scopes = (): readonly string[] =>
    oauth?.scopes ?? [
      `${TOOL_SCOPE_PREFIX}*`,
      ...registry.list().map((t) => `${TOOL_SCOPE_PREFIX}${t.name}`),
      ...(oauth === undefined ? [] : mappingScopeNames(oauth.mapping)),
    ];
  await registerOpenAPI(app, {
    docs: http.docs ?? true,
    registry,
    oauth: oauth === undefined ? undefined : { issuer: oauth.issuers[0]!, scopes: scopes() },
  });
  oauthRoutes(app, {
    resource: oauth === undefined ? undefined : { publicUrl: oauth.publicUrl, authorizationServers: oauth.issuers.map((i) => i.issuer), scopes },
    keyed: keyring.size > 0,
  });
  const callTasks = runtime.callTasks ?? new CallTasks(gateway);
  healthRoutes(app, () => gateway.draining, runtime.upstreams, tasks, callTasks);
  // The audit lines and metrics of calls, run or refused, come from the gateway.
  toolRoutes(app, { gateway, idleTimeoutMs: connections.idleTimeoutMs, tasks: callTasks });
  // The calls started with `Prefer: respond-async`, each its caller's only.
  taskRoutes(app, { tasks: callTasks, idleTimeoutMs: connections.idleTimeoutMs });
  // An assistant's turn in, in its provider's shape; the next turn out.
  callsRoutes(app, { gateway, idleTimeoutMs: connections.idleTimeoutMs });
  // MCP's Streamable HTTP transport, behind the same hooks, through the same gateway.
  mcpRoutes(app, {
    gateway,
    tasks: callTasks,
    idleTimeoutMs: connections.idleTimeoutMs,
    redis: runtime.redis,
    toolsChange: runtime.upstreams ? (listener) => registry.onChange(listener) : undefined,
  });
  return app;
}
