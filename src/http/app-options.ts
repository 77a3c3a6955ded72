import type { Logger } from 'pino';
import type { Redis } from 'ioredis';
import type { CallLimits } from '../core/executor.js';
import { Gateway } from '../core/gateway.js';
import { CallTasks } from '../core/call-task-store.js';
import type { CallTaskBounds } from '../core/call-task.js';
import { Keyring, type KeySpec } from '../auth/keyring.js';
import { type ServerPermissions } from '../core/principal.js';
import type { ToolRegistry } from '../core/registry.js';
import type { ResourceServer } from '../auth/open.js';
import type { AppHttpOptions, AppRuntime } from './app.js';
import { ServiceMetrics } from './metrics.js';
import type { UpstreamStates } from './routes/health.js';

/**
 * Everything `buildApp` took before the runtime: the parts of a runtime and the HTTP settings in
 * one object.
 * @deprecated Open a runtime (`openRuntime`) and call `buildApp(runtime, http)`.
 */
export interface AppOptions extends AppHttpOptions, CallLimits {
  /** The tools to serve; a source's tools may change later (the lists and the OpenAPI document follow). */
  registry: ToolRegistry;
  /** The upstream MCP servers, for `/readyz` and the metrics. */
  upstreams?: UpstreamStates;
  /** A pino logger; silent when omitted. */
  logger?: Logger;
  /** Deadline for tools that declare no `timeoutMs`. */
  toolTimeoutMs?: number;
  /** API keys and their scopes; none (the default) means no authentication. */
  apiKeys?: readonly KeySpec[];
  /** The permission rules every caller inherits (TOOLPORT_PERMISSIONS), and what keys' rules are checked against. */
  permissions?: ServerPermissions;
  /** toolport as an OAuth 2.1 resource server (`openResourceServer`); undefined: keys only. */
  oauth?: ResourceServer;
  /** Shared rate-limit counts and MCP cancellations (`connectRedis`); the caller owns the connection. */
  redis?: Redis;
  /** The same tools as `registry` bound to other workspaces, by the `workspace` the keys in `apiKeys` name. */
  toolsets?: ReadonlyMap<string, ToolRegistry>;
  /** The bounds on calls run as tasks (default: `DEFAULT_CALL_TASK_BOUNDS`). */
  callTasks?: Partial<CallTaskBounds>;
}

/** Every key's workspace has its tools (a wiring mistake otherwise, not the client's). */
export function assertToolsetsBound(keys: readonly KeySpec[], toolsets: ReadonlyMap<string, ToolRegistry>): void {
  for (const key of keys) {
    if (key.workspace !== undefined && !toolsets.has(key.workspace))
      throw new Error(`No tools are bound to the workspace of key "${key.label}" (${key.workspace}).`);
  }
}

/**
 * The runtime the old `buildApp(options)` made for itself: the keyring, the metrics and the
 * gateway over the given registry. `openRuntime` (src/main/runtime.ts) opens a process's runtime.
 */
export function runtimeFromOptions(options: AppOptions): [AppRuntime, AppHttpOptions] {
  const {
    registry,
    upstreams,
    logger,
    toolTimeoutMs,
    apiKeys = [],
    permissions,
    oauth,
    redis,
    toolsets = new Map<string, ToolRegistry>(),
    callTasks,
    ...rest
  } = options;
  const { maxConcurrency, queueSize, maxConcurrencyPerCaller, queuePerCaller, ...http } = rest;
  const limits: CallLimits = { maxConcurrency, queueSize, maxConcurrencyPerCaller, queuePerCaller };
  const metrics = new ServiceMetrics(registry.list().map((t) => t.name));
  if (upstreams !== undefined) metrics.watchUpstreams(upstreams, (tool) => registry.sourceOf(tool));
  const keyring = new Keyring(apiKeys, permissions);
  assertToolsetsBound(apiKeys, toolsets);
  const gateway = new Gateway({
    registry,
    logger,
    defaultTimeoutMs: toolTimeoutMs,
    ...limits,
    observer: metrics.observer,
    scopes: keyring.scopes,
    toolsets,
    permissions,
  });
  return [{ registry, gateway, keyring, toolsets, metrics, logger, upstreams, oauth, redis, callTasks: new CallTasks(gateway, callTasks) }, http];
}
