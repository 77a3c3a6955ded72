import type { FastifyInstance } from 'fastify';
import { loadApiKeys } from '../config/api-keys.js';
import { loadConfig, workspaceWarning, type Config } from '../config/config.js';
import { defaultMaxConnections, descriptorUsage, type DescriptorUsage } from '../config/descriptors.js';
import { Workspace } from '../os/fs/workspace.js';
import { buildApp } from '../http/app.js';
import type { ConnectionLimits } from '../http/guards/connections.js';
import { keysReloader } from './key-reload.js';
import { assertKeysFileOutsideWorkspace, openKeyWorkspaces } from '../assembly/key-workspaces.js';
import { createLogger } from '../infra/logger.js';
import { connectRedis } from '../infra/redis.js';
import { assertSafeExposure } from '../config/exposure.js';
import { isLoopback } from '../infra/net.js';
import { createToolset } from '../assembly/toolset.js';
import { serverPermissions } from '../permissions/catalog.js';
import type { UpstreamSource } from '../upstreams/source.js';
import { tokenCallersAsKeys, withWorkspaces } from '../auth/workspaces.js';
import { openResourceServer, type ResourceServer } from '../auth/open.js';
import { readMapping } from '../auth/mapping.js';

// After the grace period calls are aborted and answer at once; this is only a last resort.
const FORCED_EXIT_AFTER_GRACE_MS = 5_000;

/**
 * Owns the process: reads the configuration and the API keys, opens the workspaces (the server's
 * and the keys' own), refuses an unsafe exposure (tools that change things, on a non-loopback
 * address, without keys), connects to Redis when limits are shared, builds the app, listens, and shuts
 * down gracefully on SIGTERM or SIGINT (stop taking calls, let calls in flight finish up to the
 * grace period, abort the rest, exit 0). SIGHUP reloads the keys (`keysReloader`). Start-up errors
 * are printed on one line and exit with status 1.
 */
export async function serve(env: Record<string, string | undefined> = process.env): Promise<FastifyInstance | undefined> {
  let app: FastifyInstance;
  let config: ReturnType<typeof loadConfig>;
  let keyLabels: string[];
  let keyWorkspaces: Array<{ key: string; workspace: string }>;
  let unauthenticated: string[];
  let descriptors: DescriptorUsage;
  let connections: ConnectionLimits;
  // A SIGHUP before the handlers are in place (start-up takes a while: the sandbox's trial run, the
  // workspaces) would end the process; it is remembered, and the keys are read again once serving.
  let reloadAsked = false;
  const askedEarly = (): void => {
    reloadAsked = true;
  };
  process.on('SIGHUP', askedEarly);
  // A SIGTERM or SIGINT before the handlers below are in place (an upstream's handshake can take a
  // while) exits through process.exit: its exit hook ends the process groups started so far, which
  // the default action, ending the process at once, would leave running.
  const stopEarly = (signal: NodeJS.Signals): void => {
    process.stderr.write(`toolport: ${signal} during start-up; exiting\n`);
    process.exit(0);
  };
  process.on('SIGTERM', stopEarly);
  process.on('SIGINT', stopEarly);
  const startedUp = (): void => {
    process.off('SIGHUP', askedEarly);
    process.off('SIGTERM', stopEarly);
    process.off('SIGINT', stopEarly);
  };
  let upstreams: UpstreamSource | undefined;
  try {
    config = loadConfig(env);
    const logger = createLogger(config.logLevel);
    const rootWarning = workspaceWarning(config);
    if (rootWarning !== undefined) logger.warn({ workspace: config.workspace }, rootWarning);
    const workspace = await Workspace.open(config.workspace);
    const served = await createToolset(config, process.cwd(), logger, workspace);
    const tools = served.list();
    // Loaded only when configured: the MCP client and its dependencies are most of a cold start's modules.
    const upstreamModule = config.upstreams === undefined ? undefined : await import('../upstreams/open.js');
    const specs = (await upstreamModule?.readUpstreamSpecs(config, env)) ?? [];
    const namespaces = upstreamModule?.upstreamExposure(specs) ?? [];
    const permissions = await serverPermissions(
      config,
      tools,
      namespaces.map((t) => t.name),
    );
    const loadedKeys = await loadApiKeys(config, [...tools.map((t) => t.name), ...namespaces.map((t) => t.name)], permissions);
    await assertKeysFileOutsideWorkspace(config, workspace);
    const mapping = config.oauth?.mappingFile === undefined ? undefined : await readMapping(config.oauth.mappingFile);
    // The subjects' and groups' workspaces are opened and checked as keys' are (see auth/workspaces.ts).
    const tokenCallers = config.oauth === undefined ? [] : tokenCallersAsKeys(mapping, loadedKeys);
    const workspaces = await openKeyWorkspaces({ config, server: workspace, served, keys: [...loadedKeys, ...tokenCallers], log: logger });
    const apiKeys = workspaces.keys.slice(0, loadedKeys.length);
    // With OAuth every request is authenticated, as with keys.
    unauthenticated =
      config.oauth === undefined
        ? assertSafeExposure({ host: config.host, apiKeys, allowUnauthenticated: config.allowUnauthenticated }, [...tools, ...namespaces])
        : [];
    // Before any upstream starts: an issuer that cannot be reached stops start-up.
    const oauth: ResourceServer | undefined =
      config.oauth === undefined
        ? undefined
        : await openResourceServer(config.oauth, { mapping: mapping && withWorkspaces(mapping, workspaces.keys.slice(loadedKeys.length)), permissions });
    // After the checks that need no upstream: a bad keys file never starts a process.
    // No stdio upstream may read the keys' workspaces (nor the server's files, which it finds in `config`).
    const hidden = workspaces.keys.flatMap((key) => (key.workspace === undefined ? [] : [key.workspace]));
    upstreams = await upstreamModule?.openUpstreams(specs, config, workspaces.registry, logger, { baseEnv: env, hidden });
    // The replicas share the rate-limit counts and MCP cancellations through it.
    const redis = config.redisUrl !== undefined ? await connectRedis(config.redisUrl, logger) : undefined;
    keyLabels = apiKeys.map((k) => k.label);
    keyWorkspaces = apiKeys.flatMap((k) => (k.workspace === undefined ? [] : [{ key: k.label, workspace: k.workspace }]));
    descriptors = descriptorUsage();
    connections = {
      headersTimeoutMs: config.headersTimeoutMs,
      requestTimeoutMs: config.requestTimeoutMs,
      keepAliveTimeoutMs: config.keepAliveTimeoutMs,
      idleTimeoutMs: config.idleTimeoutMs,
      maxConnections: config.maxConnections ?? defaultMaxConnections(descriptors),
    };
    app = await buildApp({
      registry: workspaces.registry,
      upstreams,
      toolsets: workspaces.toolsets,
      redis,
      logger,
      toolTimeoutMs: config.toolTimeoutMs,
      bodyLimit: config.bodyLimit,
      docs: config.docs,
      apiKeys,
      permissions,
      oauth,
      publicDocs: config.publicDocs,
      localOnly: isLoopback(config.host),
      allowedHosts: config.allowedHosts,
      allowedOrigins: config.allowedOrigins,
      corsOrigins: config.corsOrigins,
      trustProxy: config.trustProxy,
      connections,
      rateLimit: config.rateLimit,
      maxConcurrency: config.maxConcurrency,
      queueSize: config.queueSize,
      maxConcurrencyPerCaller: config.maxConcurrencyPerCaller,
      queuePerCaller: config.queuePerCaller,
    });
    // After the last call: closes every workspace and the Redis connection.
    app.addHook('onClose', async () => {
      await Promise.all([workspaces.close(), workspace.close(), redis?.quit(), upstreams?.stop()]);
    });
    const reload = keysReloader({
      config,
      servedTools: [...tools.map((t) => t.name), ...namespaces.map((t) => t.name)],
      keys: apiKeys,
      permissions,
      // A reload checks what start-up checked: no key may pass for an access token's caller.
      checkKeys: config.oauth === undefined ? undefined : (keys) => void tokenCallersAsKeys(undefined, keys),
      workspaces,
      replaceKeys: (keys) => app.toolport.replaceKeys(keys),
      log: logger,
    });
    handleSignals(app, config, reload);
    startedUp();
    if (reloadAsked) void reload();
    await app.listen({ port: config.port, host: config.host });
  } catch (err) {
    startedUp();
    await upstreams?.stop();
    process.stderr.write(`toolport: ${(err as Error).message}\n`);
    process.exitCode = 1;
    return undefined;
  }
  if (unauthenticated.length > 0) {
    app.log.warn(
      { tools: unauthenticated, host: config.host },
      'serving tools that are not read-only without authentication on a non-loopback address (TOOLPORT_ALLOW_UNAUTHENTICATED=true)',
    );
  }
  // Labels only: a key's value never reaches the log.
  app.log.info({ tools: app.toolport.gateway.registry.list().map((t) => t.name), keyLabels }, 'serving tools');
  if (keyWorkspaces.length > 0) app.log.info({ workspaces: keyWorkspaces }, 'keys with workspaces of their own');
  if (config.oauth !== undefined) app.log.info({ issuers: config.oauth.issuers, resource: config.oauth.publicUrl }, 'accepting OAuth access tokens');
  app.log.info({ ...connections, descriptorLimit: descriptors.limit }, 'connection limits');
  if (descriptors.limit !== undefined && descriptors.open !== undefined && connections.maxConnections > descriptors.limit - descriptors.open) {
    app.log.warn(
      { ...descriptors, maxConnections: connections.maxConnections },
      'TOOLPORT_MAX_CONNECTIONS is above what the descriptor limit (ulimit -n) leaves: connections past it will be refused by the system, and tool calls may fail to open files',
    );
  }

  return app;
}

/**
 * SIGTERM or SIGINT: stop taking calls, let calls in flight finish up to the grace period, abort
 * the rest, exit 0. SIGHUP: reload the keys; the process goes on (by default SIGHUP ends it).
 * Installed before the server listens, so no signal finds it without a handler.
 */
function handleSignals(app: FastifyInstance, config: Config, reload: () => Promise<unknown>): void {
  let stopping = false;
  const stop = (signal: NodeJS.Signals): void => {
    if (stopping) {
      // A second signal means "now": exit at once; the exit handler still kills running commands.
      app.log.warn({ signal }, 'second signal; exiting without waiting for calls in flight');
      process.exit(1);
    }
    stopping = true;
    app.log.info({ signal, graceMs: config.shutdownGraceMs }, 'shutting down');
    setTimeout(() => {
      app.log.error('shutdown did not finish in time; exiting');
      process.exit(1);
    }, config.shutdownGraceMs + FORCED_EXIT_AFTER_GRACE_MS).unref();
    app.toolport.shutdown(config.shutdownGraceMs).then(
      () => {
        app.log.info('stopped');
        process.exit(0);
      },
      (err: unknown) => {
        app.log.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  process.on('SIGHUP', () => void reload());
}
