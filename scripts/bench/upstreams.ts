import { open, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { Client, StreamableHTTPClientTransport, type Transport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { ROOT } from './options.js';
import { pinned } from './pinning.js';
import { rssOf, type ServerSpec } from './processes.js';
import { median, summariseLatency, type RowSummary } from './report.js';
import { UPSTREAM_GOAL } from './rows.js';
import { withServer, type LatencySlot } from './slots.js';
import { logFile, toolportSpec, type BenchContext } from './targets.js';

/** An upstream row: `tools/call echo` of the reference everything server, through toolport and directly. */
export interface UpstreamRow {
  id: string;
  label: string;
  transport: 'stdio' | 'http';
}

/** The rows of issue 19, in the order the table shows them. */
export const UPSTREAM_ROWS: readonly UpstreamRow[] = [
  { id: 'upstream-stdio', label: 'MCP tools/call through toolport to a stdio upstream (everything echo), sequential', transport: 'stdio' },
  { id: 'upstream-http', label: 'MCP tools/call through toolport to an HTTP upstream (everything echo), sequential', transport: 'http' },
];

// What the upstream rows are measured against.
const UPSTREAM_BASELINE = 'the SDK client calling the same upstream directly';

const EVERYTHING = createRequire(import.meta.url).resolve('@modelcontextprotocol/server-everything/dist/index.js');
// What toolport calls the upstream; its tools are served as `<name>__<tool>`.
const SERVER_NAME = { stdio: 'every', http: 'web' } as const;
const UPSTREAM_CALL: Call = { arguments: { message: 'hello' }, text: 'Echo: hello' };
const OWN_ECHO: Call = { tool: 'Echo', arguments: { text: 'hello' }, text: 'hello' };
const CLIENT_INFO = { name: 'toolport-bench', version: '1.0.0' };

let configs = 0;

/** One tool call and the text its answer must carry. */
interface Call {
  tool?: string;
  arguments: Record<string, unknown>;
  text: string;
}

/**
 * One slot of sequential `tools/call echo`: `toolport` is a fresh `node dist/server.js` with the
 * upstream in its TOOLPORT_UPSTREAMS, called over `POST /mcp`; `direct` is the same upstream
 * called by the same SDK client without toolport (over stdio, or over its Streamable HTTP). The
 * upstream always runs on the server's CPU: as toolport's child it inherits toolport's, and
 * otherwise `taskset` puts it there, so what differs is only toolport's hop in between (reached
 * over HTTP). The client (this process) runs on the load generator's CPU.
 */
export async function upstreamSlot(ctx: BenchContext, row: UpstreamRow, target: 'toolport' | 'direct', round: number): Promise<LatencySlot> {
  const slot: LatencySlot = { target, round, rssStartBytes: undefined, rssEndBytes: undefined, failures: [], latenciesMs: [] };
  const throughToolport = async (server: Record<string, unknown>): Promise<void> => {
    const file = path.join(ctx.dir, `upstreams-${++configs}.json`);
    await writeFile(file, JSON.stringify({ mcpServers: { [SERVER_NAME[row.transport]]: server } }));
    await withServer(toolportSpec(ctx, row.id, { TOOLPORT_UPSTREAMS: file }), 'toolport', slot.failures, (toolport) =>
      measure(ctx, slot, httpTransport(toolport.url), { ...UPSTREAM_CALL, tool: `${SERVER_NAME[row.transport]}__echo` }, toolport.pid),
    );
  };
  if (row.transport === 'stdio') {
    if (target === 'toolport') await throughToolport({ command: process.execPath, args: [EVERYTHING, 'stdio'] });
    else {
      const log = await open(logFile(ctx, `everything-${row.id}`), 'w');
      try {
        const { command, args } = pinned(ctx.pinning.serverCpu, process.execPath, [EVERYTHING, 'stdio']);
        const transport = new StdioClientTransport({
          command,
          args,
          cwd: ROOT,
          env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/' },
          stderr: log.fd,
        });
        await measure(ctx, slot, transport, { ...UPSTREAM_CALL, tool: 'echo' }, () => transport.pid);
      } catch (err) {
        slot.failures.push(`direct ${row.id}: ${(err as Error).message}`);
      } finally {
        await log.close();
      }
    }
    return slot;
  }
  await withServer(everythingHttpSpec(ctx, row.id), 'direct', slot.failures, async (upstream) => {
    if (target === 'toolport') await throughToolport({ url: `${upstream.url}/mcp` });
    else await measure(ctx, slot, httpTransport(upstream.url), { ...UPSTREAM_CALL, tool: 'echo' }, upstream.pid);
  });
  return slot;
}

/** The everything server in its Streamable HTTP mode; it has no health route, and `GET /mcp` without a session answers 400 once it listens. */
function everythingHttpSpec(ctx: BenchContext, name: string): ServerSpec {
  return {
    command: process.execPath,
    args: [EVERYTHING, 'streamableHttp'],
    cwd: ROOT,
    env: {},
    logFile: logFile(ctx, `everything-${name}`),
    cpu: ctx.pinning.serverCpu,
    ready: { path: '/mcp', status: 400 },
  };
}

/**
 * Node's fetch adds an abort listener per request to the transport's one long-lived signal and
 * removes it only once the request is collected; past 1,500 calls Node warns of a leak that is
 * none (and lifts the bound back to 1,500 itself). Each request gets a signal of its own that
 * follows the transport's, which a source holds weakly, with no listener.
 */
const quietFetch: typeof fetch = (input, init) => fetch(input, init?.signal ? { ...init, signal: AbortSignal.any([init.signal]) } : init);

function httpTransport(url: string): Transport {
  return new StreamableHTTPClientTransport(new URL('/mcp', url), { fetch: quietFetch });
}

/** An upstream row: toolport's medians against the direct calls', and toolport's own Echo (the hop in front) as a note. */
export function summariseUpstream(row: UpstreamRow, toolport: readonly LatencySlot[], direct: readonly LatencySlot[]): RowSummary {
  const summary = summariseLatency(row.id, row.label, UPSTREAM_GOAL, toolport, direct, UPSTREAM_BASELINE);
  const front = median(toolport.flatMap((s) => (s.frontHopMs === undefined ? [] : [median(s.frontHopMs) ?? NaN])));
  return front === undefined ? summary : { ...summary, note: `own Echo ${front.toFixed(2)} ms`, frontHopMs: Math.round(front * 1000) / 1000 };
}

/**
 * Connects an SDK client (its default: the 2025 `initialize` handshake, as toolport's own client
 * to an upstream), lists the tools once as a client does, then times `calls` calls one after
 * another after as many unmeasured (the JIT's warm-up on every side). Through toolport, as many
 * calls of toolport's own Echo follow, timed apart (`frontHopMs`). A call counts as failed unless
 * it answers its text without `isError`.
 */
async function measure(ctx: BenchContext, slot: LatencySlot, transport: Transport, call: Call, pid: number | (() => number | null | undefined)): Promise<void> {
  const client = new Client(CLIENT_INFO);
  const pidOf = (): number | undefined => (typeof pid === 'number' ? pid : (pid() ?? undefined));
  const rss = async (): Promise<number | undefined> => {
    const id = pidOf();
    return id === undefined ? undefined : rssOf(id);
  };
  const failed: string[] = [];
  const calls = ctx.options.upstreamCalls;
  const timed = async ({ tool = '', arguments: args, text }: Call, count: number, warmUp: number, into: number[]): Promise<void> => {
    for (let i = 0; i < warmUp + count; i++) {
      const started = performance.now();
      const result = await client.callTool({ name: tool, arguments: args });
      const ms = performance.now() - started;
      const answered = (result.content as Array<{ type: string; text?: string }> | undefined)?.[0]?.text;
      if (result.isError === true || answered !== text) failed.push(`${tool} answered ${JSON.stringify(result).slice(0, 200)}`);
      if (i >= warmUp) into.push(Math.round(ms * 1000) / 1000);
    }
  };
  try {
    await client.connect(transport);
    await client.listTools();
    slot.rssStartBytes = await rss();
    // A fresh toolport's path takes about a thousand calls to be optimised: as many unmeasured first.
    await timed(call, calls, calls, slot.latenciesMs);
    slot.rssEndBytes = await rss();
    if (slot.target === 'toolport') await timed(OWN_ECHO, calls, 0, (slot.frontHopMs = []));
  } finally {
    await client.close().catch(() => undefined);
  }
  if (failed.length > 0) slot.failures.push(`${slot.target}: ${failed.length} failed calls, the first: ${failed[0]}`);
}
