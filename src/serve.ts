import type { FastifyInstance } from 'fastify';
import { loadConfig } from './config.js';
import { buildApp } from './http/app.js';
import { createLogger } from './logger.js';
import { createToolset } from './toolset.js';

// After the grace period calls are aborted and answer at once; this is only a last resort.
const FORCED_EXIT_AFTER_GRACE_MS = 5_000;

/**
 * Owns the process: reads the configuration, builds the app, listens, and shuts down gracefully
 * on SIGTERM or SIGINT (stop taking calls, let calls in flight finish up to the grace period,
 * abort the rest, exit 0). Start-up errors are printed on one line and exit with status 1.
 */
export async function serve(env: Record<string, string | undefined> = process.env): Promise<FastifyInstance | undefined> {
  let app: FastifyInstance;
  let config: ReturnType<typeof loadConfig>;
  try {
    config = loadConfig(env);
    const logger = createLogger(config.logLevel);
    const registry = await createToolset(config);
    app = await buildApp({
      registry,
      logger,
      toolTimeoutMs: config.toolTimeoutMs,
      bodyLimit: config.bodyLimit,
      docs: config.docs,
    });
    await app.listen({ port: config.port, host: config.host });
  } catch (err) {
    process.stderr.write(`toolport: ${(err as Error).message}\n`);
    process.exitCode = 1;
    return undefined;
  }
  app.log.info({ tools: app.toolport.executor.registry.list().map((t) => t.name) }, 'serving tools');

  let stopping = false;
  const stop = (signal: NodeJS.Signals): void => {
    if (stopping) return;
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
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  return app;
}
