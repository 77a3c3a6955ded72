import { writeFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { API_FORMATS, isAPIFormat } from '../core/formats.js';
import type { Runtime } from './runtime.js';

// Each command loads only what it uses: `toolport mcp` never loads the HTTP stack, so a desktop
// client's first message is answered in a fraction of the time.

const USAGE = `Usage: toolport <command>

Commands:
  serve                     Serve the tools over HTTP (configured by the environment)
  mcp                       Serve the tools over MCP on stdin/stdout (for Claude Desktop and other local clients)
  list [--format F]         Print the tool definitions (F: ${API_FORMATS.join(', ')}; default anthropic)
  call <name> [json]        Run a tool in-process and print its ToolResult; exit 1 when isError
  openapi [--out FILE]      Print (or write) the OpenAPI document
  reload <pid>              Make the server with this process id reload its API keys (sends it SIGHUP)
  upstreams lock            Pin the upstream MCP servers' tool definitions in the lock file
  upstreams diff            Show how the upstreams' tool definitions differ from the lock file; exit 1 when they do

Options:
  --workspace DIR           The directory the file tools and Bash work in (TOOLPORT_WORKSPACE; default:
                            the working directory, unless that is / or the home directory)
  --upstreams FILE          MCP servers whose tools to serve too: a JSON file with an "mcpServers" object,
                            as Claude Desktop, Claude Code and Cursor write it (TOOLPORT_UPSTREAMS)

Configuration comes from the environment: PORT, HOST, LOG_LEVEL, TOOLPORT_TOOLS,
TOOLPORT_TOOL_TIMEOUT_MS, TOOLPORT_BODY_LIMIT, TOOLPORT_PLUGINS, TOOLPORT_UPSTREAMS, TOOLPORT_WORKSPACE, ...
`;

const CLI_TRANSPORT = 'cli';

class UsageError extends Error {
  override readonly name = 'UsageError';
}

/** Runs one CLI command; resolves to the process exit code. */
export async function main(argv: string[], env: Record<string, string | undefined> = process.env): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      format: { type: 'string' },
      out: { type: 'string' },
      workspace: { type: 'string' },
      upstreams: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  // The option wins over the variable, as a flag given on the command line should.
  if (values.workspace !== undefined) env = { ...env, TOOLPORT_WORKSPACE: values.workspace };
  if (values.upstreams !== undefined) env = { ...env, TOOLPORT_UPSTREAMS: values.upstreams };
  const [command, ...rest] = positionals;
  if (values.help || command === undefined || command === 'help') {
    process.stdout.write(USAGE);
    return command === undefined && !values.help ? 2 : 0;
  }
  if (command === 'serve') {
    // As server.ts does: a SIGHUP while the modules load must not end the server (nothing to reload yet).
    process.on('SIGHUP', () => {});
    return (await (await import('./serve.js')).serve(env)) ? 0 : 1;
  }
  if (command === 'mcp') return (await import('./serve-stdio.js')).serveMcpStdio(env);
  if (command === 'reload') return reload(rest);
  if (command === 'upstreams') {
    const [action, ...extra] = rest;
    if ((action !== 'lock' && action !== 'diff') || extra.length > 0) throw new UsageError('upstreams needs an action: toolport upstreams lock|diff');
    return (await import('../upstreams/lock/command.js')).runLockCommand(action, env);
  }

  if (!['list', 'call', 'openapi'].includes(command)) throw new UsageError(`unknown command "${command}"`);
  const [{ loadConfig }, { openRuntime }, { pino }, { createLogger }] = await Promise.all([
    import('../config/config.js'),
    import('./runtime.js'),
    import('pino'),
    import('../infra/logger.js'),
  ]);
  const config = loadConfig(env);
  // Logs go to standard error, which the command's output never shares; warnings only unless LOG_LEVEL asks.
  const logger = createLogger(env.LOG_LEVEL ? config.logLevel : 'warn', { destination: pino.destination(2) });
  // The upstreams' tools too, as a server serves them: started for this command, stopped after it.
  const runtime = await openRuntime(config, { kind: 'command', logger, env });
  try {
    return await runCommand(command, rest, values, runtime);
  } finally {
    await runtime.close();
  }
}

async function runCommand(
  command: string,
  rest: string[],
  values: { format?: string | undefined; out?: string | undefined },
  runtime: Runtime,
): Promise<number> {
  const { registry, gateway } = runtime;
  switch (command) {
    case 'list': {
      const format = values.format ?? 'anthropic';
      if (!isAPIFormat(format)) throw new UsageError(`unknown format "${format}"; valid formats: ${API_FORMATS.join(', ')}`);
      print(registry.toAPI(format));
      return 0;
    }
    case 'call': {
      const [name, json = '{}'] = rest;
      if (name === undefined) throw new UsageError('call needs a tool name: toolport call <name> [json]');
      const [{ errorBody, ToolportError }, { ANYONE }] = await Promise.all([import('../core/errors.js'), import('../core/gateway.js')]);
      // In-process, through the same gateway as the server: the same checks and audit lines.
      const call = { caller: ANYONE, tool: name, requestId: 'cli', transport: CLI_TRANSPORT };
      let input: unknown;
      try {
        input = JSON.parse(json);
      } catch {
        const refusal = new ToolportError('INVALID_JSON', `The input is not valid JSON: ${json}`);
        gateway.refused(call, refusal);
        print(errorBody(refusal.code, refusal.message));
        return 1;
      }
      const controller = new AbortController();
      const abort = (): void => controller.abort(new Error('interrupted'));
      process.once('SIGINT', abort);
      try {
        const result = await gateway.callSafe({ ...call, input, signal: controller.signal, inputBytes: Buffer.byteLength(json) });
        print(result);
        return result.isError ? 1 : 0;
      } finally {
        process.off('SIGINT', abort);
      }
    }
    case 'openapi': {
      const [{ buildApp }, { httpRuntime }] = await Promise.all([import('../http/app.js'), import('./runtime.js')]);
      const app = await buildApp(httpRuntime(runtime));
      await app.ready();
      const document = `${JSON.stringify(app.openapiDocument(), null, 2)}\n`;
      await app.close();
      if (values.out) await writeFile(values.out, document);
      else process.stdout.write(document);
      return 0;
    }
    default:
      throw new UsageError(`unknown command "${command}"`);
  }
}

/**
 * Sends SIGHUP, as `kill -HUP <pid>` does: the operating system lets only the server's own user
 * (or root) do it, so a reload needs no key and no route of its own. The outcome is in the
 * server's log, which the signal cannot carry back.
 */
function reload(args: string[]): number {
  const [pid, ...extra] = args;
  // Process ids are positive 32-bit numbers; kill() would read 0 or -1 as "a whole group".
  if (pid === undefined || extra.length > 0 || !/^[1-9]\d{0,9}$/.test(pid) || Number(pid) > 2 ** 31 - 1) {
    throw new UsageError('reload needs the process id of the server: toolport reload <pid>');
  }
  try {
    process.kill(Number(pid), 'SIGHUP');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new Error(
      code === 'ESRCH'
        ? `no process has the id ${pid}`
        : code === 'EPERM'
          ? `not permitted to signal process ${pid} (it runs as another user)`
          : (err as Error).message,
    );
  }
  process.stdout.write(`Sent SIGHUP to process ${pid}; its log says whether the keys were reloaded or kept.\n`);
  return 0;
}

function print(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    const usage = err instanceof UsageError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS');
    process.stderr.write(`toolport: ${(err as Error).message}\n${usage ? `\n${USAGE}` : ''}`);
    process.exitCode = usage ? 2 : 1;
  },
);
