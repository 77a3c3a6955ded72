/**
 * Issue 22's memory goal: RSS flat (within 10%) from the first to the tenth million keyed calls.
 * One toolport, keyed Echo with the audit line, the metrics and the rate limit (the `echo-keyed`
 * row's request and settings), driven by wrk in runs of `CHUNK_S` seconds until the server has
 * counted `--rss-calls` calls; after each run, the calls it counted (`toolport_tool_calls_total`
 * from /metrics), its RSS (/proc) and its heap in use. The figure compared is the median RSS of
 * the second tenth of the calls against that of the last tenth (`summariseRss`).
 */
import { rssOf } from './processes.js';
import { median, type RowSummary } from './report.js';
import type { ThroughputRow } from './rows.js';
import { withServer } from './slots.js';
import { rowRequest, toolportSpec, type BenchContext } from './targets.js';
import { errorTotal, runWrk } from './wrk.js';

export const RSS_ROW = { id: 'rss-keyed', label: 'RSS over keyed POST /tools/Echo calls' };

// Issue 22: at most 10% more at the end than after the first tenth.
const RSS_GOAL = { text: '1.1x', bound: 'at most', ratio: 1.1 } as const;
const CHUNK_S = 10;
const QUICK_CHUNK_S = 1;

export interface RssSample {
  /** Seconds since the first wrk run began. */
  atS: number;
  /** Calls the server counted so far. */
  calls: number;
  rssBytes: number | undefined;
  heapUsedBytes: number | undefined;
}

export interface RssSlot {
  samples: RssSample[];
  failures: string[];
}

/** Drives one toolport until it has counted `calls` keyed Echo calls, sampling its memory after every wrk run. */
export async function rssSlot(ctx: BenchContext, row: ThroughputRow, script: string, calls: number): Promise<RssSlot> {
  const slot: RssSlot = { samples: [], failures: [] };
  const spec = toolportSpec(ctx, RSS_ROW.id, { TOOLPORT_RATE_LIMIT: String(row.rateLimit), TOOLPORT_API_KEYS: ctx.apiKey });
  const chunkS = ctx.options.quick ? QUICK_CHUNK_S : CHUNK_S;
  await withServer(spec, 'toolport', slot.failures, async (server) => {
    const request = rowRequest(ctx, row);
    const auth = { authorization: `Bearer ${ctx.apiKey}` };
    const sample = async (atS: number): Promise<RssSample> => {
      const metrics = await (await fetch(`${server.url}/metrics`, { headers: auth })).text();
      return { atS, calls: counted(metrics), rssBytes: await rssOf(server.pid), heapUsedBytes: gauge(metrics, 'nodejs_heap_size_used_bytes') };
    };
    const first = await fetch(`${server.url}${request.path}`, { method: request.method, headers: request.headers, body: request.body ?? null });
    if (!first.ok) throw new Error(`toolport answered ${first.status} to ${row.label}: ${(await first.text()).slice(0, 300)}`);
    const started = performance.now();
    slot.samples.push(await sample(0));
    while (slot.samples.at(-1)!.calls < calls) {
      const result = await runWrk({
        url: server.url,
        script,
        seconds: chunkS,
        connections: ctx.options.connections,
        threads: ctx.options.threads,
        cpu: ctx.pinning.loadCpu,
      });
      if (errorTotal(result) > 0 || result.requests === 0) {
        throw new Error(`${RSS_ROW.id}: ${result.requests} requests, errors ${JSON.stringify(result.errors)} (status: answers of 400 or more)`);
      }
      slot.samples.push(await sample(Math.round((performance.now() - started) / 1000)));
    }
  });
  return slot;
}

/**
 * The row: the median RSS of the samples of the second tenth of the calls (the first million of
 * ten, once the warm-up's growth is over) against the median of the last tenth's, so that one
 * sample taken at a high or low point of the garbage collector's cycle decides nothing.
 */
export function summariseRss(slot: RssSlot, calls: number): RowSummary {
  const within = (from: number, to: number): number[] =>
    slot.samples.filter((s) => s.calls >= from && s.calls < to && s.rssBytes !== undefined).map((s) => s.rssBytes!);
  const tenth = calls / 10;
  // A short run (--quick) may have no sample inside a window: its last sample stands in.
  const last = slot.samples.at(-1)?.rssBytes;
  const early = median(within(tenth, 2 * tenth)) ?? last;
  const late = median(within(calls - tenth, Infinity)) ?? last;
  const ratio = early !== undefined && late !== undefined ? late / early : undefined;
  const millions = (n: number): string => `${(n / 1e6).toFixed(1)}M`;
  return {
    id: RSS_ROW.id,
    label: `${RSS_ROW.label} (medians of the samples from ${millions(tenth)} to ${millions(2 * tenth)} calls and from ${millions(calls - tenth)} to the end)`,
    kind: 'memory',
    baseline: early,
    baselineName: `median RSS from ${millions(tenth)} to ${millions(2 * tenth)} calls`,
    ratio,
    goal: RSS_GOAL,
    goalMet: ratio === undefined ? undefined : ratio <= RSS_GOAL.ratio,
    rssStartBytes: early,
    rssEndBytes: late,
  };
}

/** The calls counted so far: every series of `toolport_tool_calls_total`, summed. */
function counted(metrics: string): number {
  let total = 0;
  for (const line of metrics.split('\n')) if (line.startsWith('toolport_tool_calls_total{')) total += Number(line.slice(line.lastIndexOf(' ') + 1));
  return total;
}

function gauge(metrics: string, name: string): number | undefined {
  const line = metrics.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.slice(name.length + 1));
}
