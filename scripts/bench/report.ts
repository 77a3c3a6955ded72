import type { Goal } from './rows.js';
import type { LatencySlot, StartSlot, ThroughputSlot } from './slots.js';
import { perSecondSpread } from './wrk.js';

/** One line of the table, every figure a median over the rounds. */
export interface RowSummary {
  id: string;
  label: string;
  /** `throughput`: req/s, higher is better; `latency`: ms, lower is better; `memory`: bytes, lower is better. */
  kind: 'throughput' | 'latency' | 'memory';
  requestsPerS?: number;
  p50Ms?: number;
  p90Ms?: number;
  p99Ms?: number;
  /** The baseline's req/s (throughput) or median ms (latency). */
  baseline?: number;
  /** Sequential rows: the baseline's p90 and p99 ms. */
  baselineP90Ms?: number;
  baselineP99Ms?: number;
  baselineName: string;
  /** toolport / baseline: of req/s for throughput, of the median ms for latency. */
  ratio?: number;
  /** Sequential rows: toolport's p99 / the baseline's p99 (each the median over the rounds). */
  ratioP99?: number;
  /** The lowest and highest ratio of a single round: how much the machine's other work moved the figures. */
  ratioRange?: [number, number];
  /** Throughput rows against raw servers: the req/s of the raw server doing toolport's per-call work too (raw-server.ts). */
  sameWork?: number;
  /** toolport req/s / sameWork req/s, and its range over the rounds. */
  ratioSameWork?: number;
  ratioSameWorkRange?: [number, number];
  /** Throughput rows: the req/s and p99 of the same stack (Fastify doing toolport's duties plainly, bench/same-stack.ts). */
  sameStack?: number;
  sameStackP99Ms?: number;
  /** toolport req/s / sameStack req/s, its range over the rounds, and toolport's p99 / the same stack's. */
  ratioSameStack?: number;
  ratioSameStackRange?: [number, number];
  ratioP99SameStack?: number;
  /** Issue 33: the bound on ratioP99SameStack, and whether it held. */
  p99Goal?: Goal;
  p99GoalMet?: boolean;
  /**
   * Throughput rows: toolport's slowest whole second as a share of its median second (the median
   * over the rounds); well below 1 with a steady median means a periodic cost, a sawtooth.
   */
  slowestSecond?: number;
  goal?: Goal;
  goalMet?: boolean;
  rssStartBytes?: number;
  rssEndBytes?: number;
  /** Upstream rows: the median of toolport's own Echo over the same client, the hop in front of the upstream. */
  frontHopMs?: number;
  note?: string;
}

/** The middle value (the mean of the middle two for an even count), ignoring non-finite values. */
export function median(values: readonly number[]): number | undefined {
  const sorted = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  if (sorted.length === 0) return undefined;
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** The value below which `p` percent of the values lie (nearest rank). */
export function percentile(values: readonly number[], p: number): number | undefined {
  const sorted = [...values].sort((a, b) => a - b);
  if (sorted.length === 0) return undefined;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

/** Bytes in MiB, for the table and the progress lines. */
export function mib(bytes: number | undefined, digits = 1): string {
  return bytes === undefined ? '?' : (bytes / 1024 / 1024).toFixed(digits);
}

const defined = <T>(values: readonly (T | undefined)[]): T[] => values.filter((v): v is T => v !== undefined);

/** The range of per-round ratios, `toolport(round) / baseline(round)`, over the rounds where both have a figure. */
function rangeOfRounds(
  rounds: readonly number[],
  toolport: (round: number) => number | undefined,
  baseline: (round: number) => number | undefined,
): [number, number] | undefined {
  const ratios = rounds.flatMap((round) => {
    const [t, b] = [toolport(round), baseline(round)];
    return t !== undefined && b ? [t / b] : [];
  });
  return ratios.length === 0 ? undefined : [Math.min(...ratios), Math.max(...ratios)];
}

const roundsOf = (slots: readonly { round: number }[]): number[] => [...new Set(slots.map((s) => s.round))];

const meets = (goal: Goal, ratio: number): boolean => (goal.bound === 'at least' ? ratio >= goal.ratio : ratio <= goal.ratio);

function judged(summary: RowSummary): RowSummary {
  const { goal, p99Goal } = summary;
  const ratio = goal?.against === 'same work' ? summary.ratioSameWork : goal?.against === 'same stack' ? summary.ratioSameStack : summary.ratio;
  const judgedP99 = p99Goal !== undefined && summary.ratioP99SameStack !== undefined ? { p99GoalMet: meets(p99Goal, summary.ratioP99SameStack) } : {};
  if (goal === undefined || ratio === undefined) return { ...summary, ...judgedP99 };
  return { ...summary, goalMet: meets(goal, ratio), ...judgedP99 };
}

/**
 * A wrk row: toolport's medians over the rounds, the bare raw baseline's median req/s (or the
 * row's own toolport baseline's), the raw server doing the same work's, and the ratios to each.
 */
export function summariseThroughput(
  id: string,
  label: string,
  goal: Goal | undefined,
  slots: readonly ThroughputSlot[],
  baselineName = 'raw node:http',
  p99Goal?: Goal,
): RowSummary {
  const of = (target: string) => slots.filter((s) => s.target === target);
  const toolport = of('toolport');
  const requestsPerS = median(defined(toolport.map((s) => s.result?.requestsPerS)));
  const baseline = median(defined(of('raw').map((s) => s.result?.requestsPerS)));
  const sameWork = median(defined(of('raw-same-work').map((s) => s.result?.requestsPerS)));
  const sameStack = median(defined(of('same-stack').map((s) => s.result?.requestsPerS)));
  const sameStackP99Ms = median(defined(of('same-stack').map((s) => s.result?.latencyMs.p99)));
  const p99Ms = median(defined(toolport.map((s) => s.result?.latencyMs.p99)));
  const roundRatio = (target: string) =>
    rangeOfRounds(
      roundsOf(slots),
      (round) => toolport.find((s) => s.round === round)?.result?.requestsPerS,
      (round) => of(target).find((s) => s.round === round)?.result?.requestsPerS,
    );
  const slowest = defined(
    toolport.map((s) => {
      const spread = perSecondSpread(s.result?.perSecond ?? []);
      return spread && spread.median > 0 ? spread.min / spread.median : undefined;
    }),
  );
  return judged({
    id,
    label,
    kind: 'throughput',
    requestsPerS,
    p50Ms: median(defined(toolport.map((s) => s.result?.latencyMs.p50))),
    p90Ms: median(defined(toolport.map((s) => s.result?.latencyMs.p90))),
    p99Ms,
    baseline,
    baselineName,
    ratio: requestsPerS !== undefined && baseline ? requestsPerS / baseline : undefined,
    ratioRange: roundRatio('raw'),
    sameWork,
    ratioSameWork: requestsPerS !== undefined && sameWork ? requestsPerS / sameWork : undefined,
    ratioSameWorkRange: roundRatio('raw-same-work'),
    sameStack,
    sameStackP99Ms,
    ratioSameStack: requestsPerS !== undefined && sameStack ? requestsPerS / sameStack : undefined,
    ratioSameStackRange: roundRatio('same-stack'),
    ratioP99SameStack: p99Ms !== undefined && sameStackP99Ms ? p99Ms / sameStackP99Ms : undefined,
    p99Goal,
    slowestSecond: median(slowest),
    goal,
    rssStartBytes: median(defined(toolport.map((s) => s.rssStartBytes))),
    rssEndBytes: median(defined(toolport.map((s) => s.rssEndBytes))),
  });
}

/** A sequential row: the median over the rounds of each slot's median (p90, p99) latency, against the baseline's median. */
export function summariseLatency(
  id: string,
  label: string,
  goal: Goal | undefined,
  toolport: readonly LatencySlot[],
  raw: readonly LatencySlot[],
  baselineName = "bare spawn('bash', ['-c', 'true']) behind node:http",
): RowSummary {
  const p50Ms = median(defined(toolport.map((s) => median(s.latenciesMs))));
  const baseline = median(defined(raw.map((s) => median(s.latenciesMs))));
  const p99Ms = median(defined(toolport.map((s) => percentile(s.latenciesMs, 99))));
  const baselineP99Ms = median(defined(raw.map((s) => percentile(s.latenciesMs, 99))));
  return judged({
    id,
    label,
    kind: 'latency',
    p50Ms,
    p90Ms: median(defined(toolport.map((s) => percentile(s.latenciesMs, 90)))),
    p99Ms,
    baseline,
    baselineP90Ms: median(defined(raw.map((s) => percentile(s.latenciesMs, 90)))),
    baselineP99Ms,
    baselineName,
    ratio: p50Ms !== undefined && baseline ? p50Ms / baseline : undefined,
    ratioP99: p99Ms !== undefined && baselineP99Ms ? p99Ms / baselineP99Ms : undefined,
    ratioRange: rangeOfRounds(
      roundsOf(toolport),
      (round) => median(toolport.find((s) => s.round === round)?.latenciesMs ?? []),
      (round) => median(raw.find((s) => s.round === round)?.latenciesMs ?? []),
    ),
    goal,
    rssStartBytes: median(defined(toolport.map((s) => s.rssStartBytes))),
    rssEndBytes: median(defined(toolport.map((s) => s.rssEndBytes))),
  });
}

/** The cold-start row: the median time to the first `/healthz` 200 of all starts of each kind. */
export function summariseColdStart(id: string, label: string, goal: Goal | undefined, slots: readonly StartSlot[]): RowSummary {
  const of = (target: string, round?: number) =>
    defined(slots.filter((s) => s.target === target && (round === undefined || s.round === round)).map((s) => s.readyMs));
  const p50Ms = median(of('toolport'));
  const baseline = median(of('fastify'));
  return judged({
    id,
    label,
    kind: 'latency',
    p50Ms,
    baseline,
    baselineName: 'bare Fastify 5, one route',
    ratio: p50Ms !== undefined && baseline ? p50Ms / baseline : undefined,
    ratioRange: rangeOfRounds(
      roundsOf(slots),
      (round) => median(of('toolport', round)),
      (round) => median(of('fastify', round)),
    ),
    goal,
  });
}

function goalText(goal: Goal | undefined, met: boolean | undefined): string | undefined {
  if (goal === undefined) return undefined;
  const verdict = met === undefined ? '' : met ? ' (met)' : ' (not met)';
  return `${goal.bound === 'at most' ? '≤' : '≥'} ${goal.text}${goal.against === undefined ? '' : ` ${goal.against}`}${verdict}`;
}

/** The table as Markdown, which reads in a terminal as well as in the README. */
export function table(rows: readonly RowSummary[]): string {
  const fixed = (n: number | undefined, digits: number): string => (n === undefined ? '—' : n.toFixed(digits));
  const range = (r: [number, number] | undefined): string => (r === undefined ? '—' : `${r[0].toFixed(2)}–${r[1].toFixed(2)}`);
  const head = [
    'path',
    'req/s',
    'p50 ms',
    'p90 ms',
    'p99 ms',
    'slowest s',
    'baseline',
    'ratio bare',
    'rounds',
    'ratio p99',
    'same work',
    'ratio same work',
    'rounds',
    'same stack',
    'ratio same stack',
    'rounds',
    'same stack p99 ms',
    'p99 vs same stack',
    'goal',
    'RSS MiB before → after',
  ];
  const lines = rows.map((r) => [
    r.label,
    r.note ?? (r.requestsPerS === undefined ? '—' : Math.round(r.requestsPerS).toLocaleString('en-US')),
    fixed(r.p50Ms, 2),
    fixed(r.p90Ms, 2),
    fixed(r.p99Ms, 2),
    fixed(r.slowestSecond, 2),
    r.baseline === undefined
      ? '—'
      : r.kind === 'throughput'
        ? `${Math.round(r.baseline).toLocaleString('en-US')} req/s`
        : r.kind === 'memory'
          ? `${mib(r.baseline, 0)} MiB`
          : `${r.baseline.toFixed(2)} ms${r.baselineP99Ms === undefined ? '' : ` (p99 ${r.baselineP99Ms.toFixed(2)})`}`,
    r.ratio === undefined ? '—' : `${r.ratio.toFixed(2)}x`,
    range(r.ratioRange),
    r.ratioP99 === undefined ? '—' : `${r.ratioP99.toFixed(2)}x`,
    r.sameWork === undefined ? '—' : `${Math.round(r.sameWork).toLocaleString('en-US')} req/s`,
    r.ratioSameWork === undefined ? '—' : `${r.ratioSameWork.toFixed(2)}x`,
    range(r.ratioSameWorkRange),
    r.sameStack === undefined ? '—' : `${Math.round(r.sameStack).toLocaleString('en-US')} req/s`,
    r.ratioSameStack === undefined ? '—' : `${r.ratioSameStack.toFixed(2)}x`,
    range(r.ratioSameStackRange),
    fixed(r.sameStackP99Ms, 2),
    r.ratioP99SameStack === undefined ? '—' : `${r.ratioP99SameStack.toFixed(2)}x`,
    [goalText(r.goal, r.goalMet), r.p99Goal === undefined ? undefined : `p99 ${goalText(r.p99Goal, r.p99GoalMet)}`].filter(Boolean).join('; ') || '—',
    r.rssStartBytes === undefined ? '—' : `${mib(r.rssStartBytes, 0)} → ${mib(r.rssEndBytes, 0)}`,
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i]!.length)));
  const format = (cells: string[]): string => `| ${cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join(' | ')} |`;
  const rule = `| ${widths.map((w, i) => (i === 0 ? '-'.repeat(w) : `${'-'.repeat(w - 1)}:`)).join(' | ')} |`;
  return [format(head), rule, ...lines.map(format)].join('\n');
}
