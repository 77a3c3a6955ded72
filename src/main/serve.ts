import type { FastifyInstance } from 'fastify';
import { loadConfig, workspaceWarning, type Config } from '../config/config.js';
import { defaultMaxConnections, descriptorUsage, type DescriptorUsage } from '../config/descriptors.js';
import { buildApp } from '../http/app.js';
import { connectionLimits, type ConnectionLimits } from '../http/guards/connections.js';
import { keysReloader } from './key-reload.js';
import { httpRuntime, openRuntime, type Runtime } from './runtime.js';
import { createLogger } from '../infra/logger.js';
import { isLoopback } from '../infra/net.js';
import { tokenCallersAsKeys } from '../auth/workspaces.js';

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
  let runtime: Runtime | undefined;
  try {
    config = loadConfig(env);
    const logger = createLogger(config.logLevel, { traced: config.tracing !== undefined });
    const rootWarning = workspaceWarning(config);
    if (rootWarning !== undefined) logger.warn({ workspace: config.workspace }, rootWarning);
    const opened = (runtime = await openRuntime(config, { kind: 'server', logger, env }));
    unauthenticated = [...opened.unauthenticated];
    keyLabels = opened.keys.map((k) => k.label);
    keyWorkspaces = opened.keys.flatMap((k) => (k.workspace === undefined ? [] : [{ key: k.label, workspace: k.workspace }]));
    descriptors = descriptorUsage();
    // The http section as it is: the connections' deadlines, the body limit, the guards' hosts and origins.
    connections = connectionLimits({ ...config, maxConnections: config.maxConnections ?? defaultMaxConnections(descriptors) });
    app = await buildApp(httpRuntime(opened), { ...config, localOnly: isLoopback(config.host), connections });
    // After the last call: stops the upstreams, closes every workspace and the Redis connection.
    app.addHook('onClose', () => opened.close());
    const reload = keysReloader({
      config,
      servedTools: opened.servedNames,
      keys: opened.keys,
      permissions: opened.permissions,
      // A reload checks what start-up checked: no key may pass for an access token's caller.
      checkKeys: config.oauth === undefined ? undefined : (keys) => void tokenCallersAsKeys(undefined, keys),
      workspaces: opened.workspaces!,
      replaceKeys: (keys) => {
        app.toolport.replaceKeys(keys);
        // A removed key's background tasks are its calls in flight: they get the shutdown's grace, then end.
        const removed = keyLabels.filter((label) => !keys.some((k) => k.label === label));
        keyLabels = keys.map((k) => k.label);
        opened.tasks.endCallers(removed, config.shutdownGraceMs);
        // Its tool calls run as tasks too; and no later key of the same label may read their results.
        opened.callTasks.endCallers(removed, config.shutdownGraceMs);
      },
      log: logger,
    });
    handleSignals(app, config, reload);
    startedUp();
    if (reloadAsked) void reload();
    await app.listen({ port: config.port, host: config.host });
  } catch (err) {
    startedUp();
    await runtime?.close();
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
