import type { Logger } from 'pino';
import type { Redis } from 'ioredis';
import type { Config, LimitsSettings } from '../config/config.js';
import type { CallLimits } from '../core/executor.js';
import { Gateway } from '../core/gateway.js';
import { CallTasks } from '../core/call-task-store.js';
import { Keyring, type KeySpec } from '../auth/keyring.js';
import { type ServerPermissions } from '../core/principal.js';
import type { ToolRegistry } from '../core/registry.js';
import type { ToolDef } from '../core/types.js';
import { createToolset } from '../assembly/toolset.js';
import type { KeyWorkspaces } from '../assembly/key-workspaces.js';
import type { ResourceServer } from '../auth/open.js';
import type { AppRuntime } from '../http/app.js';
import type { ServiceMetrics } from '../http/metrics.js';
import type { UpstreamSource } from '../upstreams/source.js';
import { BackgroundTasks } from '../tools/tasks/background-tasks.js';
import type { Tracing } from '../telemetry/sdk.js';

// Every module only one kind of process needs is imported when that process asks for it: `toolport
// mcp` answers a desktop client's first message without loading keys, OAuth, Redis, metrics or the
// MCP client (scripts/bundle.ts keeps dynamic imports as functions that run only when called).

/** Which process the runtime serves: what it opens besides the tools and the gateway. */
export type RuntimeKind =
  /** The HTTP server: callers (keys, OAuth, their workspaces), the exposure check, Redis and metrics. */
  | 'server'
  /** `toolport mcp`: the local user is the only caller. */
  | 'stdio'
  /** A one-off command of the CLI (`list`, `call`, `openapi`): the tools neither log how they run nor sweep the workspace. */
  | 'command';

export interface RuntimeOptions {
  kind: RuntimeKind;
  /** Where the gateway's audit lines and the upstreams' logs go. */
  logger: Logger;
  /** The environment the upstreams' `${VAR}` values and their processes' variables come from. */
  env?: Record<string, string | undefined>;
  cwd?: string;
}

/**
 * Everything a process serves, opened once from the configuration: the transports (HTTP, stdio,
 * the CLI) parse their protocol, name a caller and call `gateway`.
 */
export interface Runtime {
  readonly kind: RuntimeKind;
  readonly config: Config;
  readonly logger: Logger;
  /** The served tools, the upstreams' included as they change; lists and definitions come from here. */
  readonly registry: ToolRegistry;
  /** The same tools bound to each key's own workspace, by its canonical root; empty outside the server. */
  readonly toolsets: ReadonlyMap<string, ToolRegistry>;
  /** The names rules and keys may speak of: the served tools and the upstreams' namespaces (`github__*`). */
  readonly servedNames: readonly string[];
  /** The tools that changing things would be exposed without authentication (see `assertSafeExposure`); logged by the server. */
  readonly unauthenticated: readonly string[];
  /** The API keys, their workspaces made canonical; none outside the server. */
  readonly keys: readonly KeySpec[];
  readonly keyring: Keyring;
  /** The key workspaces (the server only): a reload checks keys against them. */
  readonly workspaces: KeyWorkspaces | undefined;
  /** The rules every caller inherits and the catalog keys' rules are checked against; undefined without rules. */
  readonly permissions: ServerPermissions | undefined;
  /** toolport as an OAuth resource server (TOOLPORT_OAUTH_ISSUER), the server only. */
  readonly oauth: ResourceServer | undefined;
  readonly gateway: Gateway;
  readonly upstreams: UpstreamSource | undefined;
  /** The Prometheus metrics the gateway reports every call to; none for `toolport mcp`. */
  readonly metrics: ServiceMetrics | undefined;
  /** The replicas' shared rate-limit counts and MCP cancellations (TOOLPORT_REDIS_URL), the server only. */
  readonly redis: Redis | undefined;
  /** Bash's background tasks, of every workspace: shutdown drains them like calls, metrics and `/readyz` count them. */
  readonly tasks: BackgroundTasks;
  /** Tool calls run as tasks (REST's `Prefer: respond-async`, MCP's tasks): calls in flight of the gateway, kept per caller. */
  readonly callTasks: CallTasks;
  /** OpenTelemetry tracing, when the OTEL_* variables switch it on (loaded only then). */
  readonly tracing: Tracing | undefined;
  /** Stops the upstreams, closes the workspaces opened here and the Redis connection. */
  close(): Promise<void>;
}

/**
 * Opens what a process serves from its configuration, in the order start-up has always checked
 * it: the tools, the upstreams' files, the permission rules, the keys, their workspaces and the
 * exposure (a bad keys file never starts a process), the OAuth issuers (one that cannot be reached
 * stops start-up), then the upstreams, then Redis. What was opened is closed again when a later
 * step throws.
 */
export async function openRuntime(config: Config, options: RuntimeOptions): Promise<Runtime> {
  const { kind, logger } = options;
  const env = options.env ?? process.env;
  const cwd = options.cwd ?? process.cwd();
  const opened: Array<() => Promise<unknown>> = [];
  const closeAll = async (): Promise<void> => {
    await Promise.all(opened.splice(0).map((close) => close()));
  };
  // First in the list: its close signals every task before the workspaces' sandboxes end under them.
  const tasks = new BackgroundTasks(config.bashTasks);
  opened.push(() => tasks.close());
  try {
    // First, so that the identity providers' and upstreams' round trips at start-up are traced too.
    const tracing = config.tracing === undefined ? undefined : await (await import('../telemetry/sdk.js')).openTracing(config.tracing, logger);
    if (tracing !== undefined) opened.push(() => tracing.shutdown());
    const principals = kind === 'server' ? await import('./principals.js') : undefined;
    const workspace = principals === undefined ? undefined : await principals.openServerWorkspace(config);
    if (workspace !== undefined) opened.push(() => workspace.close());
    const served = await createToolset(config, cwd, kind === 'command' ? undefined : logger, workspace, tasks);
    const tools = served.list();
    const upstreamModule = config.upstreams === undefined ? undefined : await import('../upstreams/open.js');
    const specs = (await upstreamModule?.readUpstreamSpecs(config, env)) ?? [];
    const namespaces = upstreamModule?.upstreamExposure(specs) ?? [];
    const servedNames = [...tools.map((t) => t.name), ...namespaces.map((t) => t.name)];
    // The server always has a catalog, which keys' rules are checked against; elsewhere rules come only from a file.
    const permissions = kind === 'server' || config.permissionsFile !== undefined ? await loadPermissions(config, tools, namespaces) : undefined;
    const callers =
      principals === undefined || workspace === undefined
        ? undefined
        : await principals.openPrincipals({ config, workspace, served, servedNames, exposed: [...tools, ...namespaces], permissions, logger, cwd, tasks });
    if (callers !== undefined) opened.push(() => callers.workspaces.close());
    const registry = callers?.workspaces.registry ?? served;
    // No stdio upstream may read the keys' workspaces (nor the server's files, which it finds in `config`).
    const hidden = callers?.keys.flatMap((key) => (key.workspace === undefined ? [] : [key.workspace])) ?? [];
    const upstreams = await upstreamModule?.openUpstreams(specs, config, registry, logger, { baseEnv: env, hidden });
    if (upstreams !== undefined) opened.push(() => upstreams.stop());
    const redis =
      kind === 'server' && config.redisUrl !== undefined ? await (await import('../infra/redis.js')).connectRedis(config.redisUrl, logger) : undefined;
    if (redis !== undefined) opened.push(() => redis.quit());
    // `toolport mcp` serves no metrics; a command may build the HTTP app (`toolport openapi`).
    const metrics = kind === 'stdio' ? undefined : await openMetrics(registry, upstreams);
    metrics?.watchTasks(tasks);
    const keys = callers?.keys ?? [];
    const keyring = new Keyring(keys, permissions);
    const toolsets = callers?.workspaces.toolsets ?? new Map<string, ToolRegistry>();
    const gateway = new Gateway({
      // The limits section as it is: its admission fields are the executor's `CallLimits`, by the same names.
      ...limitsOf(config),
      registry,
      logger,
      defaultTimeoutMs: config.toolTimeoutMs,
      observer: metrics?.observer,
      scopes: keyring.scopes,
      toolsets,
      permissions,
      tracer: tracing?.tracer,
    });
    const callTasks = new CallTasks(gateway, config.callTasks);
    metrics?.watchCallTasks(callTasks);
    return {
      kind,
      config,
      logger,
      registry,
      toolsets,
      servedNames,
      unauthenticated: callers?.unauthenticated ?? [],
      keys,
      keyring,
      workspaces: callers?.workspaces,
      permissions,
      oauth: callers?.oauth,
      gateway,
      upstreams,
      metrics,
      redis,
      tasks,
      callTasks,
      tracing,
      close: closeAll,
    };
  } catch (err) {
    await closeAll();
    throw err;
  }
}

/** The configuration seen as its limits section, typed as the executor's `CallLimits`: no field is copied by hand. */
function limitsOf(config: LimitsSettings): CallLimits {
  return config;
}

async function loadPermissions(config: Config, tools: readonly ToolDef[], namespaces: readonly ToolDef[]): Promise<ServerPermissions> {
  const { serverPermissions } = await import('../permissions/catalog.js');
  return serverPermissions(
    config,
    tools,
    namespaces.map((t) => t.name),
  );
}

async function openMetrics(registry: ToolRegistry, upstreams: UpstreamSource | undefined): Promise<ServiceMetrics> {
  const { ServiceMetrics } = await import('../http/metrics.js');
  const metrics = new ServiceMetrics(registry.list().map((t) => t.name));
  if (upstreams !== undefined) metrics.watchUpstreams(upstreams, (tool) => registry.sourceOf(tool));
  return metrics;
}

/** The runtime as the HTTP app takes it: a server's, which has its metrics. */
export function httpRuntime(runtime: Runtime): AppRuntime {
  const { metrics } = runtime;
  if (metrics === undefined) throw new Error(`A runtime opened for ${runtime.kind} has no metrics to serve over HTTP.`);
  return { ...runtime, metrics };
}
