import { Console } from 'node:console';
import type { Readable, Writable } from 'node:stream';
import { loadConfig, workspaceWarning } from '../config/config.js';
import { ANYONE } from '../core/gateway.js';
import { createLogger, logDestination } from '../infra/logger.js';
import { McpDispatcher } from '../mcp/dispatcher.js';
import { gatewayBackend } from '../mcp/gateway-backend.js';
import { serveStdio } from '../mcp/stdio.js';
import { VERSION } from '../infra/version.js';
import { openRuntime, type Runtime } from './runtime.js';

/** The transport label of calls that come through `toolport mcp`. */
export const STDIO_TRANSPORT = 'stdio';

/**
 * Owns the process for `toolport mcp`: MCP over stdio, one JSON-RPC message per line, with the
 * configuration `serve` reads (TOOLPORT_TOOLS, TOOLPORT_WORKSPACE, plug-ins, the Bash sandbox,
 * deadlines and limits) and through the same gateway, so every call has its audit line. Standard
 * output carries the protocol alone: logs go to standard error. The caller is the local user who
 * launched the process, so every served tool is available (no keys). Resolves to the exit code:
 * 0 once the input has ended (or SIGTERM or SIGINT aborted the calls in flight), every call has
 * answered and the output has taken the answers; 1 when start-up fails, with the reason on
 * standard error. After SIGTERM or SIGINT, output not taken within TOOLPORT_SHUTDOWN_GRACE_MS
 * (a reader that stopped reading) is given up: `exit(1)` ends the process, whose pending writes
 * to a pipe would otherwise keep it alive for as long as the reader does not read.
 */
export async function serveMcpStdio(
  env: Record<string, string | undefined> = process.env,
  input: Readable = process.stdin,
  output: Writable = process.stdout,
  exit: (code: number) => void = (code) => process.exit(code),
): Promise<number> {
  let dispatcher: McpDispatcher<typeof ANYONE>;
  let logger: ReturnType<typeof createLogger>;
  let graceMs: number;
  let runtime: Runtime | undefined;
  if (output === process.stdout) consoleToStderr();
  // A SIGTERM or SIGINT during start-up (an upstream's handshake can take a while) exits through
  // `exit`, whose exit hook ends the process groups started so far; the default action would not.
  const stopEarly = (): void => exit(0);
  process.once('SIGTERM', stopEarly);
  process.once('SIGINT', stopEarly);
  try {
    const config = loadConfig(env);
    graceMs = config.shutdownGraceMs;
    logger = createLogger(config.logLevel, { destination: logDestination(2), pretty: false, traced: config.tracing !== undefined });
    const rootWarning = workspaceWarning(config);
    if (rootWarning !== undefined) logger.warn({ workspace: config.workspace }, rootWarning);
    runtime = await openRuntime(config, { kind: 'stdio', logger, env });
    dispatcher = new McpDispatcher(
      gatewayBackend(runtime.gateway, { transport: STDIO_TRANSPORT, serverInfo: { name: 'toolport', version: VERSION }, tasks: runtime.callTasks }),
      {
        listChanged: runtime.upstreams !== undefined,
      },
    );
    logger.info({ tools: runtime.registry.list().map((t) => t.name), transport: STDIO_TRANSPORT }, 'serving tools');
  } catch (err) {
    await runtime?.close();
    process.stderr.write(`toolport: ${(err as Error).message}\n`);
    return 1;
  } finally {
    process.off('SIGTERM', stopEarly);
    process.off('SIGINT', stopEarly);
  }
  const { registry, upstreams } = runtime;

  const shutdown = new AbortController();
  let givenUp: (() => void) | undefined;
  const gaveUp = new Promise<void>((resolve) => (givenUp = resolve));
  let graceTimer: NodeJS.Timeout | undefined;
  const stop = (signal: NodeJS.Signals): void => {
    logger.info({ signal, graceMs }, 'shutting down: aborting calls in flight');
    shutdown.abort(new Error('the server is shutting down'));
    graceTimer = setTimeout(() => {
      logger.warn({ graceMs, unsentBytes: output.writableLength }, 'the output was not taken within the shutdown grace; exiting');
      exit(1);
      givenUp?.();
    }, graceMs);
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  try {
    const onToolsChanged = upstreams !== undefined ? (listener: () => void) => registry.onChange(listener) : undefined;
    await Promise.race([
      serveStdio(dispatcher, input, output, { caller: ANYONE, signal: shutdown.signal, ...(onToolsChanged ? { onToolsChanged } : {}) }),
      gaveUp,
    ]);
  } finally {
    await runtime.close();
    process.off('SIGTERM', stop);
    process.off('SIGINT', stop);
    // After a signal the input is still open, and an open stdin keeps the process alive.
    input.destroy();
  }
  const outcome = await Promise.race([drained(output).then(() => 'drained' as const), gaveUp.then(() => 'given up' as const)]);
  if (graceTimer) clearTimeout(graceTimer);
  if (outcome === 'given up') return 1;
  logger.info('stopped');
  return 0;
}

/** Resolves once the stream has handed on everything written to it, or can take nothing more. */
function drained(output: Writable): Promise<void> {
  if (output.writableLength === 0 || output.destroyed || output.writableEnded) return Promise.resolve();
  // Writes are handed on in order, so an empty one is done when everything before it is.
  return new Promise((resolve) => {
    output.once('close', resolve);
    output.write('', () => {
      output.off('close', resolve);
      resolve();
    });
  });
}

/**
 * Sends what `console.*` writes to standard error: standard output carries the protocol alone, and
 * a library's `console.log` or `console.debug` there would reach the client as a broken message.
 */
function consoleToStderr(): void {
  const toStderr = new Console({ stdout: process.stderr, stderr: process.stderr });
  for (const method of ['log', 'info', 'debug', 'dir', 'dirxml', 'table', 'group', 'groupCollapsed', 'count', 'timeLog', 'timeEnd'] as const) {
    (console as unknown as Record<string, unknown>)[method] = toStderr[method].bind(toStderr);
  }
}
