import type { Readable, Writable } from 'node:stream';
import { loadConfig } from './config.js';
import { ANYONE, Gateway } from './core/gateway.js';
import { createLogger, logDestination } from './logger.js';
import { McpDispatcher } from './mcp/dispatcher.js';
import { gatewayBackend } from './mcp/gateway-backend.js';
import { serveStdio } from './mcp/stdio.js';
import { createToolset } from './toolset.js';
import { VERSION } from './version.js';

/** The transport label of calls that come through `toolport mcp`. */
export const STDIO_TRANSPORT = 'stdio';

/**
 * Owns the process for `toolport mcp`: MCP over stdio, one JSON-RPC message per line, with the
 * configuration `serve` reads (TOOLPORT_TOOLS, TOOLPORT_WORKSPACE, plug-ins, the Bash sandbox,
 * deadlines and limits) and through the same gateway, so every call has its audit line. Standard
 * output carries the protocol alone: logs go to standard error. The caller is the local user who
 * launched the process, so every served tool is available (no keys). Resolves to the exit code:
 * 0 once the input has ended (or SIGTERM or SIGINT aborted the calls in flight) and every call
 * has answered; 1 when start-up fails, with the reason on standard error.
 */
export async function serveMcpStdio(
  env: Record<string, string | undefined> = process.env,
  input: Readable = process.stdin,
  output: Writable = process.stdout,
): Promise<number> {
  let dispatcher: McpDispatcher<typeof ANYONE>;
  let logger: ReturnType<typeof createLogger>;
  try {
    const config = loadConfig(env);
    logger = createLogger(config.logLevel, { destination: logDestination(2), pretty: false });
    const registry = await createToolset(config, process.cwd(), logger);
    const gateway = new Gateway({
      registry,
      logger,
      defaultTimeoutMs: config.toolTimeoutMs,
      maxConcurrency: config.maxConcurrency,
      queueSize: config.queueSize,
    });
    dispatcher = new McpDispatcher(gatewayBackend(gateway, { transport: STDIO_TRANSPORT, serverInfo: { name: 'toolport', version: VERSION } }));
    logger.info({ tools: registry.list().map((t) => t.name), transport: STDIO_TRANSPORT }, 'serving tools');
  } catch (err) {
    process.stderr.write(`toolport: ${(err as Error).message}\n`);
    return 1;
  }

  const shutdown = new AbortController();
  const stop = (signal: NodeJS.Signals): void => {
    logger.info({ signal }, 'shutting down: aborting calls in flight');
    shutdown.abort(new Error('the server is shutting down'));
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  try {
    await serveStdio(dispatcher, input, output, { caller: ANYONE, signal: shutdown.signal });
  } finally {
    process.off('SIGTERM', stop);
    process.off('SIGINT', stop);
    // After a signal the input is still open, and an open stdin keeps the process alive.
    input.destroy();
  }
  logger.info('stopped');
  return 0;
}
