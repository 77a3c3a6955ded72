import { readFile } from 'node:fs/promises';
import { rssOf, startServer, stopServer, tail, type RunningServer, type ServerSpec } from './processes.js';
import { BASH_REQUEST, type ThroughputRow } from './rows.js';
import { sequentialLatencies } from './sequential.js';
import { bareFastifySpec, rawSpec, sameStackSpec, rowRequest, toolportDefaultsSpec, toolportSpec, type BenchContext } from './targets.js';
import { errorTotal, runWrk, type WrkResult } from './wrk.js';

/**
 * Which server a slot measured; `raw-same-work`: the raw server doing toolport's per-call work too
 * (raw-server.ts); `same-stack`: Fastify doing the same duties plainly (bench/same-stack.ts);
 * `direct`: an upstream MCP server called without toolport.
 */
export type Target = 'toolport' | 'raw' | 'raw-same-work' | 'same-stack' | 'fastify' | 'direct';

/** The servers a throughput row is measured on. */
export type ThroughputTarget = 'toolport' | 'raw' | 'raw-same-work' | 'same-stack';

/** The servers of a throughput row: a row with a toolport baseline of its own has no raw or same-stack ones. */
export function throughputTargets(row: ThroughputRow): readonly ThroughputTarget[] {
  return row.baseline === undefined ? ['toolport', 'same-stack', 'raw', 'raw-same-work'] : ['toolport', 'raw'];
}

interface SlotBase {
  target: Target;
  round: number;
  /** Resident memory of the server once it answered /healthz, and after the measured run. */
  rssStartBytes: number | undefined;
  rssEndBytes: number | undefined;
  failures: string[];
}

export interface ThroughputSlot extends SlotBase {
  warmUp: WrkResult | undefined;
  result: WrkResult | undefined;
}

export interface LatencySlot extends SlotBase {
  latenciesMs: number[];
  /** For toolport: how its Bash ran (`on` or `off`, from its log). */
  sandbox?: string;
  /** For toolport with its sandbox on: what confined Bash (`bubblewrap` or `landlock`, from its log). */
  mechanism?: string;
  /**
   * For toolport in an upstream row: its own Echo over the same client, timed after the upstream
   * calls, as many: the hop in front of the upstream, which the direct call does not make.
   */
  frontHopMs?: number[];
}

export interface StartSlot {
  target: Target;
  round: number;
  readyMs: number | undefined;
  failures: string[];
}

/**
 * Runs `measure` against a fresh server, then stops it. Every failure (start, measurement, a
 * toolport that does not exit 0 on SIGTERM) is recorded, never thrown, so one bad slot does not
 * lose the rest of the run.
 */
export async function withServer<T>(
  spec: ServerSpec,
  target: Target,
  failures: string[],
  measure: (server: RunningServer) => Promise<T>,
): Promise<T | undefined> {
  let server: RunningServer;
  try {
    server = await startServer(spec);
  } catch (err) {
    failures.push((err as Error).message);
    return undefined;
  }
  let value: T | undefined;
  try {
    value = await measure(server);
  } catch (err) {
    failures.push((err as Error).message);
  }
  const end = await stopServer(server);
  if (target === 'toolport' && (end.code !== 0 || end.timedOut)) {
    failures.push(
      `toolport ended with ${end.timedOut ? 'SIGKILL after a timeout' : `code ${end.code}, signal ${end.signal}`} on SIGTERM: ${await tail(spec.logFile)}`,
    );
  }
  return value;
}

/** One throughput slot: a fresh server, one request checked by hand, an unmeasured wrk run, the measured one. */
export async function throughputSlot(ctx: BenchContext, row: ThroughputRow, script: string, target: ThroughputTarget, round: number): Promise<ThroughputSlot> {
  // A keyed row's key, unless the row's environment names a keys file of its own.
  const withKey = (own: Record<string, string>): Record<string, string> =>
    row.keyed && own.TOOLPORT_API_KEYS_FILE === undefined ? { TOOLPORT_API_KEYS: ctx.apiKey, ...own } : own;
  const env: Record<string, string> = { TOOLPORT_RATE_LIMIT: String(row.rateLimit), ...withKey(row.env?.(ctx) ?? {}) };
  // A row with a baseline of its own compares toolport with toolport under the baseline's environment.
  const spec =
    target === 'toolport'
      ? toolportSpec(ctx, row.id, env)
      : target === 'same-stack'
        ? sameStackSpec(ctx, row.id, row.keyed ? { apiKey: ctx.apiKey, rateLimit: row.rateLimit } : undefined)
        : target === 'raw-same-work'
          ? rawSpec(ctx, `${row.id}-same-work`, { apiKey: row.keyed ? ctx.apiKey : undefined })
          : row.baseline === undefined
            ? rawSpec(ctx, row.id)
            : toolportSpec(ctx, `${row.id}-baseline`, { TOOLPORT_RATE_LIMIT: String(row.rateLimit), ...withKey(row.baseline.env(ctx)) });
  const slot: ThroughputSlot = { target, round, rssStartBytes: undefined, rssEndBytes: undefined, failures: [], warmUp: undefined, result: undefined };
  const { options, pinning } = ctx;
  await withServer(spec, target, slot.failures, async (server) => {
    const request = rowRequest(ctx, row);
    const response = await fetch(`${server.url}${request.path}`, { method: request.method, headers: request.headers, body: request.body ?? null });
    const text = await response.text();
    if (!response.ok) throw new Error(`${target} answered ${response.status} to ${row.label}: ${text.slice(0, 300)}`);
    slot.rssStartBytes = await rssOf(server.pid);
    const wrk = (seconds: number): Promise<WrkResult> =>
      runWrk({ url: server.url, script, seconds, connections: options.connections, threads: options.threads, cpu: pinning.loadCpu });
    if (options.warmUpS > 0) slot.warmUp = await wrk(options.warmUpS);
    slot.result = await wrk(options.durationS);
    slot.rssEndBytes = await rssOf(server.pid);
  });
  for (const [phase, result] of [
    ['warm-up', slot.warmUp],
    ['measured run', slot.result],
  ] as const) {
    if (result && (errorTotal(result) > 0 || result.requests === 0)) {
      slot.failures.push(
        `${target} ${row.label}, ${phase}: ${result.requests} requests, errors ${JSON.stringify(result.errors)} (status: answers of 400 or more)`,
      );
    }
  }
  return slot;
}

/** The servers of the Bash rows: toolport with the sandbox off, its default (`auto`), Landlock forced; the bare spawn. */
export type BashTarget = 'toolport' | 'toolport-default' | 'toolport-landlock' | 'raw';

const BASH_SPECS = {
  toolport: { name: 'bash', env: {} },
  'toolport-default': { name: 'bash-sandbox', env: { TOOLPORT_BASH_SANDBOX: 'auto' } },
  // `auto` takes bubblewrap wherever it works; `landlock` makes toolport use Landlock and seccomp or not start.
  'toolport-landlock': { name: 'bash-landlock', env: { TOOLPORT_BASH_SANDBOX: 'landlock' } },
} as const;

/**
 * One slot of sequential Bash `true` calls: toolport (sandbox off, its default, or Landlock), or
 * the raw spawn; back to back, or `pauseMs` apart (half as many calls then).
 */
export async function bashSlot(ctx: BenchContext, target: BashTarget, round: number, pauseMs = 0): Promise<LatencySlot> {
  const spec = target === 'raw' ? rawSpec(ctx, 'bash') : toolportSpec(ctx, BASH_SPECS[target].name, BASH_SPECS[target].env);
  const slot: LatencySlot = {
    target: target === 'raw' ? 'raw' : 'toolport',
    round,
    rssStartBytes: undefined,
    rssEndBytes: undefined,
    failures: [],
    latenciesMs: [],
  };
  await withServer(spec, slot.target, slot.failures, async (server) => {
    slot.rssStartBytes = await rssOf(server.pid);
    const calls = pauseMs > 0 ? Math.ceil(ctx.options.bashCalls / 2) : ctx.options.bashCalls;
    const { latenciesMs, failures } = await sequentialLatencies(server.url, BASH_REQUEST, calls, Math.ceil(calls / 10), pauseMs);
    slot.latenciesMs = latenciesMs;
    slot.rssEndBytes = await rssOf(server.pid);
    if (failures.length > 0) slot.failures.push(`${target} Bash: ${failures.length} failed calls, the first: ${failures[0]}`);
    if (slot.target === 'toolport') {
      const log = await readFile(server.logFile, 'utf8');
      slot.sandbox = /"bashSandbox":"(\w+)"/.exec(log)?.[1] ?? 'unknown';
      slot.mechanism = /"bashSandbox":"on","mechanism":"(\w+)"/.exec(log)?.[1];
    }
  });
  if (target === 'toolport-landlock' && slot.latenciesMs.length > 0 && slot.mechanism !== 'landlock') {
    slot.failures.push(`TOOLPORT_BASH_SANDBOX=landlock, but toolport's log names the sandbox ${slot.mechanism ?? slot.sandbox ?? 'unknown'}`);
  }
  return slot;
}

/** One cold start: from spawn to the first `/healthz` 200, of toolport with its defaults or of a bare Fastify. */
export async function coldStartSlot(ctx: BenchContext, target: 'toolport' | 'fastify', round: number): Promise<StartSlot> {
  const spec = target === 'toolport' ? toolportDefaultsSpec(ctx, 'cold-start') : bareFastifySpec(ctx, 'cold-start');
  const slot: StartSlot = { target, round, readyMs: undefined, failures: [] };
  await withServer(spec, target, slot.failures, async (server) => {
    slot.readyMs = server.readyMs;
  });
  return slot;
}
