import { open, readFile, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { Client, StreamableHTTPClientTransport, type Transport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { ROOT } from './options.js';
import { pinned } from './pinning.js';
import { rssOf, type ServerSpec } from './processes.js';
import { median, percentile, summariseLatency, type RowSummary } from './report.js';
import { UPSTREAM_GOAL } from './rows.js';
import { withServer, type LatencySlot } from './slots.js';
import { logFile, toolportSpec, type BenchContext } from './targets.js';

/**
 * An upstream row: a tool of the reference everything server called through toolport and
 * directly. `front` is how the client reaches toolport (`http`: `node dist/server.js` over
 * `POST /mcp`; `stdio`: `toolport mcp`), `transport` how toolport (and the direct client)
 * reaches the upstream; `tool` is `echo`, or `slow` (a 10 ms operation, to show toolport's part as
 * a constant); `relay` adds the floor of one more process hop: the same client through a trivial
 * relay of the same kind (pipes, or an HTTP proxy) that parses nothing.
 */
export interface UpstreamRow {
  id: string;
  label: string;
  front: 'http' | 'stdio';
  transport: 'stdio' | 'http';
  tool: 'echo' | 'slow';
  relay: boolean;
}

/** The rows of issue 19, in the order the table shows them: the first two compare unlike clients (see the labels); the rest like with like. */
export const UPSTREAM_ROWS: readonly UpstreamRow[] = [
  row('upstream-stdio', 'HTTP client → toolport → stdio upstream, vs stdio client → upstream', 'http', 'stdio', 'echo', false),
  row('upstream-http', 'HTTP client → toolport → HTTP upstream, vs HTTP client → upstream', 'http', 'http', 'echo', true),
  row('upstream-stdio-mcp', 'stdio client → toolport mcp → stdio upstream, vs stdio client → upstream', 'stdio', 'stdio', 'echo', true),
  row('upstream-stdio-mcp-slow', 'stdio client → toolport mcp → stdio upstream, vs stdio client → upstream', 'stdio', 'stdio', 'slow', true),
  row('upstream-http-slow', 'HTTP client → toolport → HTTP upstream, vs HTTP client → upstream', 'http', 'http', 'slow', true),
];

function row(
  id: string,
  label: string,
  front: UpstreamRow['front'],
  transport: UpstreamRow['transport'],
  tool: UpstreamRow['tool'],
  relay: boolean,
): UpstreamRow {
  const what = tool === 'echo' ? 'everything echo' : 'everything 10 ms operation';
  return { id, label: `MCP tools/call, ${label} (${what}), sequential`, front, transport, tool, relay };
}

/**
 * An upstream slot's figures besides the latencies: the CPU time per timed call of the servers'
 * processes (toolport with what it started, and the upstream; or the upstream alone), which other
 * work on the machine moves far less than it moves latencies; a direct slot also times the relay
 * (its median, p90 and CPU: the JSON keeps no slot's every call).
 */
export interface UpstreamSlot extends LatencySlot {
  cpuPerCallMs?: number;
  relayP50Ms?: number;
  relayP90Ms?: number;
  relayCpuPerCallMs?: number;
}

/** An upstream row's line: what toolport adds to the direct call, the relay's figures, and the servers' CPU per call on each path. */
export interface UpstreamSummary extends RowSummary {
  /** toolport's median minus the direct call's. */
  addedMs?: number;
  relayMs?: number;
  relayRatio?: number;
  cpuPerCallMs?: number;
  baselineCpuPerCallMs?: number;
  relayCpuPerCallMs?: number;
}

const UPSTREAM_BASELINE = 'the SDK client calling the same upstream directly';
const EVERYTHING = createRequire(import.meta.url).resolve('@modelcontextprotocol/server-everything/dist/index.js');
// What toolport calls the upstream; its tools are served as `<name>__<tool>`.
const SERVER_NAME = { stdio: 'every', http: 'web' } as const;
const CALLS = {
  echo: { tool: 'echo', arguments: { message: 'hello' }, text: 'Echo: hello' },
  slow: {
    tool: 'trigger-long-running-operation',
    arguments: { duration: 0.01, steps: 1 },
    text: 'Long running operation completed. Duration: 0.01 seconds, Steps: 1.',
  },
} as const;
const OWN_ECHO: Call = { tool: 'Echo', arguments: { text: 'hello' }, text: 'hello' };
const CLIENT_INFO = { name: 'toolport-bench', version: '1.0.0' };
/** A slow call takes 10 ms: this share of `--upstream-calls` is timed, after as many echo calls unmeasured. */
const SLOW_SHARE = 10;

// The relays: the least one more process in the path does, in the language of every server here.
const STDIO_RELAY = `const child = require('node:child_process').spawn(process.argv[1], process.argv.slice(2), { stdio: ['pipe', 'pipe', 'inherit'] });
process.stdin.pipe(child.stdin); child.stdout.pipe(process.stdout); child.on('exit', (code) => process.exit(code ?? 1));`;
const HTTP_RELAY = `const http = require('node:http'); const target = new URL(process.argv[1]); const agent = new http.Agent({ keepAlive: true });
http.createServer((req, res) => {
  const out = http.request({ host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers, agent }, (answer) => {
    res.writeHead(answer.statusCode, answer.headers); answer.pipe(res);
  });
  out.on('error', () => res.destroy()); req.pipe(out);
}).listen(Number(process.env.PORT), process.env.HOST);`;

let configs = 0;

/** One tool call and the text its answer must carry. */
interface Call {
  tool: string;
  arguments: Record<string, unknown>;
  text: string;
}

/**
 * One slot of sequential calls. `toolport`: a fresh toolport with the upstream in its
 * TOOLPORT_UPSTREAMS, reached as `row.front` says; `direct`: the same client kind calling the
 * upstream without toolport, then (`row.relay`) through the relay. toolport, the relay and the
 * upstream run on the server's CPU (a child inherits its parent's; `taskset` puts the others
 * there), the client (this process) on the load generator's, so what differs is the hop in between.
 */
export async function upstreamSlot(ctx: BenchContext, row: UpstreamRow, target: 'toolport' | 'direct', round: number): Promise<LatencySlot> {
  const slot: UpstreamSlot = { target, round, rssStartBytes: undefined, rssEndBytes: undefined, failures: [], latenciesMs: [] };
  const call = CALLS[row.tool];
  const name = SERVER_NAME[row.transport];
  const proxied = (through: Call): Call => ({ ...through, tool: `${name}__${through.tool}` });
  const into = (measured: Measured | undefined): void => {
    slot.latenciesMs = measured?.latencies ?? [];
    slot.cpuPerCallMs = measured?.cpuPerCallMs;
  };
  const relayed = (measured: Measured | undefined): void => {
    slot.relayP50Ms = median(measured?.latencies ?? []);
    slot.relayP90Ms = percentile(measured?.latencies ?? [], 90);
    slot.relayCpuPerCallMs = measured?.cpuPerCallMs;
  };
  const throughToolport = async (server: Record<string, unknown>, upstreamPid?: number): Promise<void> => {
    const file = path.join(ctx.dir, `upstreams-${++configs}.json`);
    await writeFile(file, JSON.stringify({ mcpServers: { [name]: server } }));
    const plan = { warm: proxied(CALLS.echo), timed: proxied(call), front: true };
    const report = { label: 'toolport', failures: slot.failures, slot, ...(upstreamPid !== undefined ? { upstreamPid } : {}) };
    const measured =
      row.front === 'stdio'
        ? await viaStdio(ctx, `toolport-mcp-${row.id}`, [path.join(ROOT, 'dist/cli.js'), 'mcp'], { TOOLPORT_UPSTREAMS: file }, plan, report)
        : await withServer(toolportSpec(ctx, row.id, { TOOLPORT_UPSTREAMS: file }), 'toolport', slot.failures, (toolport) =>
            measure(ctx, httpTransport(toolport.url), plan, { ...report, pid: toolport.pid }),
          );
    into(measured);
  };
  const plain = { warm: CALLS.echo, timed: call, front: false };
  const direct = { label: 'direct', failures: slot.failures, slot };
  const relay = { label: 'relay', failures: slot.failures };
  if (row.transport === 'stdio') {
    if (target === 'toolport') await throughToolport({ command: process.execPath, args: [EVERYTHING, 'stdio'] });
    else {
      into(await viaStdio(ctx, `everything-${row.id}`, [EVERYTHING, 'stdio'], {}, plain, direct));
      if (row.relay) relayed(await viaStdio(ctx, `relay-${row.id}`, ['-e', STDIO_RELAY, process.execPath, EVERYTHING, 'stdio'], {}, plain, relay));
    }
    return slot;
  }
  await withServer(everythingHttpSpec(ctx, row.id), 'direct', slot.failures, async (upstream) => {
    if (target === 'toolport') return throughToolport({ url: `${upstream.url}/mcp` }, upstream.pid);
    into(await measure(ctx, httpTransport(upstream.url), plain, { ...direct, pid: upstream.pid }));
    if (!row.relay) return;
    relayed(
      await withServer(relaySpec(ctx, row.id, upstream.url), 'direct', slot.failures, (server) =>
        measure(ctx, httpTransport(server.url), plain, { ...relay, pid: server.pid, upstreamPid: upstream.pid }),
      ),
    );
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

/** The HTTP relay in front of `url`; ready once the upstream's 400 comes through it. */
function relaySpec(ctx: BenchContext, name: string, url: string): ServerSpec {
  return { ...everythingHttpSpec(ctx, name), args: ['-e', HTTP_RELAY, url], logFile: logFile(ctx, `relay-${name}`) };
}

/**
 * Runs `node args` on the server's CPU as a stdio MCP server (its stderr to a log file) and
 * measures `plan` through it; `report.slot` is the slot whose server this is (its RSS), if any.
 */
async function viaStdio(
  ctx: BenchContext,
  name: string,
  args: string[],
  env: Record<string, string>,
  plan: Plan,
  report: Report,
): Promise<Measured | undefined> {
  const log = await open(logFile(ctx, name), 'w');
  try {
    const { command, args: argv } = pinned(ctx.pinning.serverCpu, process.execPath, args);
    const transport = new StdioClientTransport({
      command,
      args: argv,
      cwd: ctx.workspace,
      // As toolportSpec: info logs (an audit line a call), to a file.
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/', TOOLPORT_WORKSPACE: ctx.workspace, LOG_LEVEL: 'info', ...env },
      stderr: log.fd,
    });
    return await measure(ctx, transport, plan, { ...report, pid: () => transport.pid });
  } catch (err) {
    report.failures.push(`${report.label} (${name}): ${(err as Error).message}`);
    return undefined;
  } finally {
    await log.close();
  }
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

/**
 * An upstream row: toolport's medians against the direct calls', what toolport adds to the
 * direct median, the relay's, toolport's own Echo (the hop in front), and the servers' CPU per call
 * on each path (medians over the rounds).
 */
export function summariseUpstream(row: UpstreamRow, toolport: readonly LatencySlot[], direct: readonly LatencySlot[]): UpstreamSummary {
  const goal = row.tool === 'echo' ? UPSTREAM_GOAL : undefined;
  const summary: UpstreamSummary = summariseLatency(row.id, row.label, goal, toolport, direct, UPSTREAM_BASELINE);
  const figure = (slots: readonly LatencySlot[], of: (slot: UpstreamSlot) => number | undefined): number | undefined =>
    median(slots.map((s) => of(s)).filter((v): v is number => v !== undefined));
  const front = figure(toolport, (s) => (s.frontHopMs === undefined ? undefined : median(s.frontHopMs)));
  const relay = figure(direct, (s) => s.relayP50Ms);
  const cpu = {
    toolport: figure(toolport, (s) => s.cpuPerCallMs),
    direct: figure(direct, (s) => s.cpuPerCallMs),
    relay: figure(direct, (s) => s.relayCpuPerCallMs),
  };
  const { p50Ms, baseline } = summary;
  const added = p50Ms !== undefined && baseline !== undefined ? p50Ms - baseline : undefined;
  const notes = [
    added === undefined ? undefined : `${signed(added)} ms`,
    relay === undefined || baseline === undefined ? undefined : `relay ${signed(relay - baseline)} ms`,
    cpu.toolport === undefined || cpu.direct === undefined
      ? undefined
      : `CPU ${cpu.toolport.toFixed(2)} vs ${cpu.direct.toFixed(2)}${cpu.relay === undefined ? '' : ` (relay ${cpu.relay.toFixed(2)})`} ms`,
    front === undefined ? undefined : `own Echo ${front.toFixed(2)} ms`,
  ].filter((note) => note !== undefined);
  return {
    ...summary,
    ...(notes.length > 0 ? { note: notes.join(', ') } : {}),
    ...(added !== undefined ? { addedMs: round3(added) } : {}),
    ...(relay !== undefined && baseline ? { relayMs: round3(relay), relayRatio: relay / baseline } : {}),
    ...(cpu.toolport !== undefined ? { cpuPerCallMs: cpu.toolport } : {}),
    ...(cpu.direct !== undefined ? { baselineCpuPerCallMs: cpu.direct } : {}),
    ...(cpu.relay !== undefined ? { relayCpuPerCallMs: cpu.relay } : {}),
    ...(front !== undefined ? { frontHopMs: round3(front) } : {}),
  };
}

function round3(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}

function signed(ms: number): string {
  return `${ms < 0 ? '−' : '+'}${Math.abs(ms).toFixed(2)}`;
}

/** What a measurement calls: `warm` unmeasured (the JIT's warm-up on every side), then `timed`; `front`: toolport's own Echo after. */
interface Plan {
  warm: Call;
  timed: Call;
  front: boolean;
}

/**
 * Where a measurement reports: failures (named `label`); for the server at `pid` its CPU per
 * timed call with what it started and the process at `upstreamPid` (an HTTP upstream it calls),
 * and with `slot`, the slot's own server, its RSS and, for toolport, its own Echo.
 */
interface Report {
  label: string;
  failures: string[];
  slot?: UpstreamSlot;
  pid?: number | (() => number | null | undefined);
  upstreamPid?: number;
}

/** The timed calls' latencies, and the servers' CPU time per call (undefined where /proc is not). */
interface Measured {
  latencies: number[];
  cpuPerCallMs: number | undefined;
}

/**
 * Connects an SDK client (its default: the 2025 `initialize` handshake, as toolport's own client
 * to an upstream), lists the tools once as a client does, makes `--upstream-calls` calls of
 * `plan.warm` unmeasured (the JIT's warm-up on every side), then times calls of `plan.timed` one
 * after another (as many of echo, a tenth as many of the slow tool). With `report.slot`, the
 * server's RSS is read before and after and, for toolport (`plan.front`), as many calls of its own
 * Echo follow, timed apart (`frontHopMs`). A call counts as failed unless it answers its text
 * without `isError`. Resolves to the timed latencies.
 */
async function measure(ctx: BenchContext, transport: Transport, plan: Plan, report: Report): Promise<Measured> {
  const client = new Client(CLIENT_INFO);
  const { slot, pid, upstreamPid } = report;
  const server = (): number | undefined => (typeof pid === 'function' ? (pid() ?? undefined) : pid);
  const rss = async (): Promise<number | undefined> => {
    const id = server();
    return id === undefined ? undefined : rssOf(id);
  };
  const cpu = (): Promise<number | undefined> => cpuMsOf([server(), upstreamPid].filter((id) => id !== undefined));
  const failed: string[] = [];
  const calls = ctx.options.upstreamCalls;
  const timed = async ({ tool, arguments: args, text }: Call, count: number, into?: number[]): Promise<void> => {
    for (let i = 0; i < count; i++) {
      const started = performance.now();
      const result = await client.callTool({ name: tool, arguments: args });
      const ms = performance.now() - started;
      const answered = (result.content as Array<{ type: string; text?: string }> | undefined)?.[0]?.text;
      if (result.isError === true || answered !== text) failed.push(`${tool} answered ${JSON.stringify(result).slice(0, 200)}`);
      into?.push(Math.round(ms * 1000) / 1000);
    }
  };
  const latencies: number[] = [];
  let cpuPerCallMs: number | undefined;
  try {
    await client.connect(transport);
    await client.listTools();
    if (slot !== undefined) slot.rssStartBytes = await rss();
    // A fresh toolport's path takes about a thousand calls to be optimised: as many unmeasured first.
    await timed(plan.warm, calls);
    const before = await cpu();
    await timed(plan.timed, plan.timed.tool.endsWith(CALLS.slow.tool) ? Math.max(1, Math.round(calls / SLOW_SHARE)) : calls, latencies);
    const after = await cpu();
    if (before !== undefined && after !== undefined && latencies.length > 0) cpuPerCallMs = round3((after - before) / latencies.length);
    if (slot !== undefined) slot.rssEndBytes = await rss();
    if (slot !== undefined && plan.front) await timed(OWN_ECHO, calls, (slot.frontHopMs = []));
  } finally {
    await client.close().catch(() => undefined);
  }
  if (failed.length > 0) report.failures.push(`${report.label}: ${failed.length} failed calls, the first: ${failed[0]}`);
  return { latencies, cpuPerCallMs };
}

/** CPU time (user and system, ms) so far of the processes `pids` and every process below them, from /proc; undefined where it cannot be read. */
async function cpuMsOf(pids: readonly number[]): Promise<number | undefined> {
  const ticks = await Promise.all(pids.map(ticksBelow));
  // Clock ticks: 100 a second on Linux.
  return ticks.includes(undefined) ? undefined : ticks.reduce((sum: number, n) => sum + n!, 0) * 10;
}

async function ticksBelow(pid: number): Promise<number | undefined> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
  if (stat === undefined) return undefined;
  // Past the command name, which may hold spaces: utime and stime are fields 14 and 15.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const children = (await readFile(`/proc/${pid}/task/${pid}/children`, 'utf8').catch(() => '')).split(' ').filter((child) => child !== '');
  // A child that ended meanwhile (a helper) counts as nothing.
  const below = await Promise.all(children.map((child) => ticksBelow(Number(child))));
  return Number(fields[11]) + Number(fields[12]) + below.reduce((sum: number, n) => sum + (n ?? 0), 0);
}
