/**
 * The performance benchmark of issue 10: `npm run bench [-- --quick] [-- --out FILE]`.
 *
 * Builds `dist/` (unless `--skip-build`), records toolport's answers to each benchmarked request,
 * then runs interleaved rounds in which every slot gets a fresh server process pinned to one CPU,
 * loaded by `wrk` pinned to another: per round, each path against toolport, then against a bare raw
 * node:http server sending the same bytes and against one doing toolport's per-call work too (key
 * check, counts, audit lines; raw-server.ts), with wrk's requests counted per second; sequential Bash `true` against toolport
 * and against a bare spawn; cold starts of `node dist/server.js` and of a bare Fastify. Prints the
 * medians with their ratios and issue 10's goals, and writes everything as JSON for comparison
 * between commits. Exits 1 when any path answered with an error (or toolport did not exit 0 on
 * SIGTERM); goals not met are reported, never a failure. `--quick` (CI) is one round of 1 s slots.
 * Issue 19's rows (upstreams.ts) time sequential MCP `tools/call`s proxied by toolport to the
 * reference everything server, over stdio and over HTTP, against the SDK client calling it directly.
 * Issue 22's tool-count rows (tool-count.ts; `--only tools-10,tools-100,tools-1000`) start toolport
 * with 10, 100 and 1,000 generated tools and time start-up, RSS, the lists and one call.
 * Issue 29's rows (`--only bash-landlock,bash-landlock-spaced`) time Bash under Landlock and seccomp
 * (TOOLPORT_BASH_SANDBOX=landlock), back to back and 100 ms apart, against the bare spawn of the
 * same round; `--quick` runs them too, with its 20 (and 10) calls a slot.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { machine, revision } from './machine.js';
import { parseOptions, ROOT, selected } from './options.js';
import { choosePinning } from './pinning.js';
import { median, mib, percentile, summariseColdStart, summariseLatency, summariseThroughput, table, type RowSummary } from './report.js';
import { BASH_DEFAULT_GOAL, BASH_GOAL, BASH_LANDLOCK_GOAL, BASH_LANDLOCK_SPACED_GOAL, COLD_START_GOAL, READ_FILE, TEN_RULES, THROUGHPUT_ROWS } from './rows.js';
import { bashSlot, coldStartSlot, throughputSlot, throughputTargets, type BashTarget, type LatencySlot, type StartSlot, type ThroughputSlot } from './slots.js';
import { recordReplies, rowRequest, type BenchContext } from './targets.js';
import { stdioStartSlot, summariseStdioStart, type StdioStartSlot } from './stdio-start.js';
import { summariseUpstream, UPSTREAM_ROWS, upstreamSlot } from './upstreams.js';
import { perSecondSpread, writeWrkScript, wrkVersion, type WrkResult } from './wrk.js';
import { startTokenRow, TOKEN_ROW } from './token-row.js';
import { RSS_ROW, rssSlot, summariseRss, type RssSlot } from './rss-row.js';
import { summariseToolCounts, TOOL_COUNT_ROWS, toolCountSlot, type ToolCountSlot } from './tool-count.js';
import { REDIS_ROW, startRedisRow } from './redis-row.js';
import { startOtlpSink } from './otlp-sink.js';

// The rows that are not wrk's, named for --only.
const BASH_ROW = { id: 'bash', label: 'Bash `true`, sequential, median (sandbox off)' };
const BASH_DEFAULT_ROW = { id: 'bash-default', label: 'Bash `true`, sequential, median (default: sandbox on)' };
// An agent's calls come after a model's turn, which takes longer than this: a sandbox started ahead is waiting.
const BASH_PAUSE_MS = 100;
const BASH_SPACED_ROW = { id: 'bash-spaced', label: `Bash \`true\`, ${BASH_PAUSE_MS} ms apart, median (default: sandbox on)` };
// Issue 29 point 7: the sandbox `auto` picks where bubblewrap cannot run (containers), forced here, where bubblewrap may work.
const BASH_LANDLOCK_ROW = { id: 'bash-landlock', label: 'Bash `true`, sequential, median (Landlock and seccomp)' };
const BASH_LANDLOCK_SPACED_ROW = { id: 'bash-landlock-spaced', label: `Bash \`true\`, ${BASH_PAUSE_MS} ms apart, median (Landlock and seccomp)` };
const COLD_START_ROW = { id: 'cold-start', label: 'cold start to first /healthz 200' };
const STDIO_START_ROW = { id: 'mcp-stdio-start', label: 'toolport mcp: spawn to the server/discover answer' };

const say = (line: string): boolean => process.stderr.write(`${line}\n`);

async function main(): Promise<number> {
  const options = parseOptions(process.argv.slice(2));
  const wrk = wrkVersion();
  if (wrk === undefined) {
    console.error('wrk is not installed: run scripts/install-system-deps.sh (Debian/Ubuntu: apt-get install wrk)');
    return 1;
  }
  const nproc = availableParallelism();
  const loadAtStart = loadavg();
  const pinning = choosePinning();
  say(`bench: ${pinning.note}`);
  if (!options.skipBuild) {
    // What npm run build does: tsc, then the server bundled into one file as it runs in production.
    say('bench: building dist/ (tsc -p tsconfig.build.json, scripts/bundle.ts)...');
    for (const step of [
      [path.join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'],
      ['--import', 'tsx', path.join(ROOT, 'scripts/bundle.ts')],
    ]) {
      const built = spawnSync(process.execPath, step, { cwd: ROOT, stdio: 'inherit' });
      if (built.status !== 0) throw new Error(`the build failed with status ${built.status}`);
    }
  }

  const dir = await mkdtemp(path.join(tmpdir(), 'toolport-bench-'));
  const workspace = path.join(dir, 'workspace');
  await mkdir(workspace);
  const ctx: BenchContext = { options, pinning, dir, workspace, repliesFile: path.join(dir, 'replies.json'), apiKey: randomBytes(24).toString('base64url') };
  const failures: string[] = [];
  await prepareRowFiles(ctx);

  say("bench: recording toolport's answers for the raw baseline...");
  const ids = [
    ...THROUGHPUT_ROWS.map((row) => row.id),
    BASH_ROW.id,
    BASH_DEFAULT_ROW.id,
    BASH_SPACED_ROW.id,
    BASH_LANDLOCK_ROW.id,
    BASH_LANDLOCK_SPACED_ROW.id,
    COLD_START_ROW.id,
    STDIO_START_ROW.id,
    ...UPSTREAM_ROWS.map((row) => row.id),
    TOKEN_ROW.id,
    REDIS_ROW.id,
    ...TOOL_COUNT_ROWS.map((row) => row.id),
    RSS_ROW.id,
  ];
  const rows = THROUGHPUT_ROWS.filter((row) => selected(options, row, ids));
  // Issue 34's traced rows export to a sink in this process: a collector that is never the slow part.
  const otlpSink = rows.some((row) => row.id.includes('-traced')) ? await startOtlpSink() : undefined;
  if (otlpSink !== undefined) ctx.otlpTracesUrl = otlpSink.url;
  // Started only when selected: a real authorization server, and one access token from it.
  const token = selected(options, TOKEN_ROW, ids) ? await startTokenRow() : undefined;
  if (token !== undefined) rows.splice(rows.findIndex((row) => row.id === 'echo-keyed') + 1, 0, token.row);
  // Issue 22 part 5 (redis-row.ts): keyed Echo counted in Redis against the same counting in the process; its own redis-server.
  const redisRow = selected(options, REDIS_ROW, ids) ? await startRedisRow(pinning, say) : undefined;
  if (redisRow !== undefined) rows.push(redisRow.row);
  const runBash = selected(options, BASH_ROW, ids) || selected(options, BASH_DEFAULT_ROW, ids);
  const runSpacedBash = selected(options, BASH_SPACED_ROW, ids);
  const runLandlock = selected(options, BASH_LANDLOCK_ROW, ids);
  const runSpacedLandlock = selected(options, BASH_LANDLOCK_SPACED_ROW, ids);
  const runStarts = selected(options, COLD_START_ROW, ids);
  const runStdioStarts = selected(options, STDIO_START_ROW, ids);
  const upstreamRows = UPSTREAM_ROWS.filter((row) => selected(options, row, ids));
  const toolCountRows = TOOL_COUNT_ROWS.filter((row) => selected(options, row, ids));
  const runRss = selected(options, RSS_ROW, ids);
  if (
    rows.length === 0 &&
    token === undefined &&
    !runBash &&
    !runSpacedBash &&
    !runLandlock &&
    !runSpacedLandlock &&
    !runStarts &&
    !runStdioStarts &&
    upstreamRows.length === 0 &&
    toolCountRows.length === 0 &&
    !runRss
  )
    throw new Error(`--only ${options.only.join(', ')} selects no row; the ids are ${ids.join(', ')}`);
  const recorded = await recordReplies(ctx, rows);
  failures.push(...recorded.failures);
  const scripts = new Map<string, string>();
  for (const row of recorded.served) scripts.set(row.id, await writeWrkScript(dir, row.id, rowRequest(ctx, row)));

  const throughput = new Map<string, ThroughputSlot[]>(recorded.served.map((row) => [row.id, []]));
  const bash = { toolport: [] as LatencySlot[], sandbox: [] as LatencySlot[], landlock: [] as LatencySlot[], raw: [] as LatencySlot[] };
  const spacedBash = { sandbox: [] as LatencySlot[], landlock: [] as LatencySlot[], raw: [] as LatencySlot[] };
  // Each round's Bash slots, in this order; the bare spawn once per round for every row it is the baseline of.
  const bashTargets: (readonly [BashTarget, LatencySlot[]])[] = [
    ...(runBash ? ([['toolport', bash.toolport]] as const) : []),
    ...(runBash || runLandlock ? ([['raw', bash.raw]] as const) : []),
    ...(runBash ? ([['toolport-default', bash.sandbox]] as const) : []),
    ...(runLandlock ? ([['toolport-landlock', bash.landlock]] as const) : []),
  ];
  const spacedBashTargets: (readonly [BashTarget, LatencySlot[]])[] = [
    ...(runSpacedBash || runSpacedLandlock ? ([['raw', spacedBash.raw]] as const) : []),
    ...(runSpacedBash ? ([['toolport-default', spacedBash.sandbox]] as const) : []),
    ...(runSpacedLandlock ? ([['toolport-landlock', spacedBash.landlock]] as const) : []),
  ];
  const starts: StartSlot[] = [];
  const stdioStarts: StdioStartSlot[] = [];
  const upstreams = new Map(upstreamRows.map((row) => [row.id, { toolport: [] as LatencySlot[], direct: [] as LatencySlot[] }]));
  const toolCounts: ToolCountSlot[] = [];
  const collect = <T extends { failures: string[] }>(slot: T): T => {
    failures.push(...slot.failures);
    return slot;
  };
  for (let round = 1; round <= options.rounds; round++) {
    const tag = `round ${round}/${options.rounds}`;
    for (const row of recorded.served) {
      for (const target of throughputTargets(row)) {
        const slot = collect(await throughputSlot(ctx, row, scripts.get(row.id)!, target, round));
        throughput.get(row.id)!.push(slot);
        say(`${tag}  ${row.label}  ${target}: ${describeRun(slot.result)}${rssChange(slot)}${slot.failures.length > 0 ? '  FAILED' : ''}`);
      }
    }
    for (const [target, into] of bashTargets) {
      const slot = collect(await bashSlot(ctx, target, round));
      into.push(slot);
      say(
        `${tag}  Bash true x${slot.latenciesMs.length}  ${target}${sandboxNote(slot)}: median ${fixed(median(slot.latenciesMs))} ms, p99 ${fixed(percentile(slot.latenciesMs, 99))} ms${rssChange(slot)}${slot.failures.length > 0 ? '  FAILED' : ''}`,
      );
    }
    for (const [target, into] of spacedBashTargets) {
      const slot = collect(await bashSlot(ctx, target, round, BASH_PAUSE_MS));
      into.push(slot);
      say(
        `${tag}  Bash true x${slot.latenciesMs.length}, ${BASH_PAUSE_MS} ms apart  ${target}${sandboxNote(slot)}: median ${fixed(median(slot.latenciesMs))} ms, p99 ${fixed(percentile(slot.latenciesMs, 99))} ms${slot.failures.length > 0 ? '  FAILED' : ''}`,
      );
    }
    for (let i = 0; i < (runStarts ? options.starts : 0); i++) {
      for (const target of ['toolport', 'fastify'] as const) {
        const slot = collect(await coldStartSlot(ctx, target, round));
        starts.push(slot);
        say(`${tag}  cold start  ${target}: ${fixed(slot.readyMs)} ms`);
      }
    }
    for (let i = 0; i < (runStdioStarts ? options.starts : 0); i++) {
      for (const target of ['toolport', 'node'] as const) {
        const slot = collect(await stdioStartSlot(ctx, target, round));
        stdioStarts.push(slot);
        say(`${tag}  mcp stdio start  ${target}: ${fixed(slot.answerMs)} ms, CPU ${fixed(slot.cpuMs)} ms`);
      }
    }
    for (const row of upstreamRows) {
      for (const target of ['toolport', 'direct'] as const) {
        const slot = collect(await upstreamSlot(ctx, row, target, round));
        upstreams.get(row.id)![target].push(slot);
        const p90 = percentile(slot.latenciesMs, 90);
        const front = slot.frontHopMs === undefined ? '' : `, own Echo median ${fixed(median(slot.frontHopMs))} ms`;
        say(
          `${tag}  ${row.id} x${slot.latenciesMs.length}  ${target}: median ${fixed(median(slot.latenciesMs))} ms, p90 ${fixed(p90)} ms${front}${rssChange(slot)}${slot.failures.length > 0 ? '  FAILED' : ''}`,
        );
      }
    }
    for (const row of toolCountRows) {
      const slot = collect(await toolCountSlot(ctx, row, round));
      toolCounts.push(slot);
      const call = median(slot.latenciesMs.call ?? []);
      say(
        `${tag}  ${row.id}: start ${fixed(slot.readyMs)} ms, list ${slot.listBytes?.identity ?? '?'} B (br ${slot.listBytes?.br ?? '?'} B), call median ${fixed(call)} ms${rssChange(slot)}${slot.failures.length > 0 ? '  FAILED' : ''}`,
      );
    }
  }

  // Once per run, after the rounds: one server through --rss-calls keyed calls (about 17 minutes by default).
  let rss: RssSlot | undefined;
  if (runRss) {
    const echoKeyed = THROUGHPUT_ROWS.find((row) => row.id === 'echo-keyed')!;
    const script = await writeWrkScript(dir, RSS_ROW.id, rowRequest(ctx, echoKeyed));
    say(`${RSS_ROW.id}: ${options.rssCalls.toLocaleString('en-US')} keyed Echo calls through one server...`);
    rss = collect(await rssSlot(ctx, echoKeyed, script, options.rssCalls));
    for (const sample of rss.samples) {
      say(
        `${RSS_ROW.id}  ${sample.atS} s  ${sample.calls.toLocaleString('en-US')} calls  RSS ${mib(sample.rssBytes)} MiB  heap ${mib(sample.heapUsedBytes)} MiB`,
      );
    }
  }

  const sandboxMode = bash.sandbox.find((s) => s.sandbox !== undefined)?.sandbox ?? 'unknown';
  const summaries: RowSummary[] = [
    ...recorded.served.map((row) => summariseThroughput(row.id, row.label, row.goal, throughput.get(row.id)!, row.baseline?.name, row.p99Goal)),
    ...recorded.notServed.map((row): RowSummary => ({ id: row.id, label: row.label, kind: 'throughput', baselineName: 'raw node:http', note: 'not served' })),
    ...(runBash
      ? [
          summariseLatency(BASH_ROW.id, BASH_ROW.label, BASH_GOAL, bash.toolport, bash.raw),
          summariseLatency(
            BASH_DEFAULT_ROW.id,
            `Bash \`true\`, sequential, median (default: sandbox ${sandboxMode})`,
            BASH_DEFAULT_GOAL,
            bash.sandbox,
            bash.raw,
          ),
        ]
      : []),
    ...(runSpacedBash
      ? [
          summariseLatency(
            BASH_SPACED_ROW.id,
            `Bash \`true\`, ${BASH_PAUSE_MS} ms apart, median (default: sandbox ${spacedBash.sandbox.find((s) => s.sandbox !== undefined)?.sandbox ?? 'unknown'})`,
            undefined,
            spacedBash.sandbox,
            spacedBash.raw,
          ),
        ]
      : []),
    ...(runLandlock ? [summariseLatency(BASH_LANDLOCK_ROW.id, BASH_LANDLOCK_ROW.label, BASH_LANDLOCK_GOAL, bash.landlock, bash.raw)] : []),
    ...(runSpacedLandlock
      ? [summariseLatency(BASH_LANDLOCK_SPACED_ROW.id, BASH_LANDLOCK_SPACED_ROW.label, BASH_LANDLOCK_SPACED_GOAL, spacedBash.landlock, spacedBash.raw)]
      : []),
    ...(runStarts ? [summariseColdStart(COLD_START_ROW.id, COLD_START_ROW.label, COLD_START_GOAL, starts)] : []),
    ...(runStdioStarts ? [summariseStdioStart(STDIO_START_ROW.id, STDIO_START_ROW.label, stdioStarts)] : []),
    ...upstreamRows.map((row) => summariseUpstream(row, upstreams.get(row.id)!.toolport, upstreams.get(row.id)!.direct)),
    ...summariseToolCounts(toolCounts),
    ...(rss === undefined ? [] : [summariseRss(rss, options.rssCalls)]),
  ];
  const about = machine(nproc, wrk, pinning.note);
  const printed = [
    '',
    `toolport benchmark${options.quick ? ' (--quick: one short round, a check that every path answers, not a measurement)' : ''}`,
    `${about.cpuModel}, ${about.cpus} CPUs; Node ${about.node}; ${about.wrk}; ${pinning.note}`,
    `wrk -t${options.threads} -c${options.connections} -d${options.durationS}s after ${options.warmUpS} s unmeasured, fresh server per slot, ${options.rounds} interleaved round(s), medians; ` +
      `Bash: ${options.bashCalls} sequential calls per slot over one kept-alive connection; cold start: ${options.starts * options.rounds} starts each; ` +
      `upstreams: ${options.upstreamCalls} sequential SDK-client calls per slot`,
    `load average (1, 5, 15 min) at the start ${loadAtStart.map((n) => n.toFixed(2)).join(' ')}, at the end ${about.loadAverage.map((n) => n.toFixed(2)).join(' ')}: ` +
      'the benchmark accounts for about 2 (server and wrk); more means other work shared the CPUs and skewed the figures',
    '',
    table(summaries),
    '',
    'ratio bare: toolport req/s / baseline req/s (the bare raw node:http server replaying the answer, or the toolport baseline the row names),',
    '  or toolport ms / baseline ms for the Bash, cold-start and upstream rows (medians over the rounds);',
    'ratio same work: toolport req/s / req/s of the raw server doing the same work (key check, counts, one audit line per call written as toolport writes it);',
    'ratio same stack: toolport req/s / req/s of Fastify doing the same duties plainly (bench/same-stack.ts: key, rate limit, request id, Host guard, Ajv, pino audit line, prom-client);',
    "p99 vs same stack: toolport's p99 / the same stack's p99 (each the median over the rounds);",
    'rounds: the lowest and highest ratio of a single round (a wide range means other work on the machine moved the figures);',
    "ratio p99: of the sequential rows, toolport's p99 / the baseline's p99 (given in brackets after the baseline's p50), each the median over the rounds;",
    "slowest s: toolport's slowest whole second as a share of its median second (per-second counts of every slot are in the JSON)",
    ...(upstreamRows.length > 0
      ? [
          "upstream rows: own Echo is the median of toolport's own Echo over the same client, the hop in front of the upstream that the direct call does not make",
        ]
      : []),
  ];
  console.log(printed.join('\n'));

  await mkdir(path.dirname(options.out), { recursive: true });
  const results = {
    date: new Date().toISOString(),
    revision: revision(),
    machine: { ...about, loadAverageAtStart: loadAtStart },
    options: { ...options, out: path.relative(ROOT, options.out) },
    rows: summaries,
    notServed: recorded.notServed.map((r) => r.label),
    failures,
    slots: {
      throughput: Object.fromEntries(throughput),
      bash: {
        toolport: bash.toolport.map(latencyFigures),
        sandbox: bash.sandbox.map(latencyFigures),
        landlock: bash.landlock.map(latencyFigures),
        raw: bash.raw.map(latencyFigures),
      },
      bashSpaced: {
        sandbox: spacedBash.sandbox.map(latencyFigures),
        landlock: spacedBash.landlock.map(latencyFigures),
        raw: spacedBash.raw.map(latencyFigures),
      },
      coldStart: starts,
      stdioStart: stdioStarts,
      upstreams: Object.fromEntries(
        [...upstreams].map(([id, { toolport, direct }]) => [id, { toolport: toolport.map(latencyFigures), direct: direct.map(latencyFigures) }]),
      ),
      toolCounts: toolCounts.map(({ latenciesMs, ...slot }) => ({
        ...slot,
        p50Ms: Object.fromEntries(Object.entries(latenciesMs).map(([measure, values]) => [measure, median(values)])),
      })),
      rss: rss?.samples,
    },
  };
  await writeFile(options.out, `${JSON.stringify(results, null, 2)}\n`);
  await token?.issuer.close();
  if (otlpSink !== undefined) {
    const { batches, bytes } = otlpSink.received();
    console.log(`OTLP sink: ${batches} batches, ${mib(bytes)} MiB of spans received from the traced rows`);
    if (batches === 0) failures.push('the traced rows exported no spans to the OTLP sink');
    await otlpSink.close();
  }
  await redisRow?.stop();
  console.log(`results: ${path.relative(process.cwd(), options.out)}`);

  if (failures.length > 0) {
    console.error(`\nFAIL: ${failures.length} problem(s); logs kept in ${dir}`);
    for (const failure of failures) console.error(`- ${failure}`);
    return 1;
  }
  await rm(dir, { recursive: true, force: true });
  console.log('OK: every path answered without errors');
  return 0;
}

/** A sequential slot for the JSON: its percentiles rather than every call's latency. */
function latencyFigures({ latenciesMs, frontHopMs, ...slot }: LatencySlot) {
  const us = (ms: number | undefined): number | undefined => (ms === undefined ? undefined : Math.round(ms * 1000) / 1000);
  const at = (p: number): number | undefined => us(percentile(latenciesMs, p));
  const front = frontHopMs === undefined ? {} : { frontHopP50Ms: us(median(frontHopMs)), frontHopP90Ms: us(percentile(frontHopMs, 90)) };
  return { ...slot, calls: latenciesMs.length, p50Ms: us(median(latenciesMs)), p90Ms: at(90), p99Ms: at(99), maxMs: at(100), ...front };
}

/** How a toolport Bash slot ran, from its log: ` (sandbox on, landlock)`. */
function sandboxNote(slot: LatencySlot): string {
  if (slot.sandbox === undefined) return '';
  return ` (sandbox ${slot.sandbox}${slot.mechanism === undefined ? '' : `, ${slot.mechanism}`})`;
}

function fixed(n: number | undefined): string {
  return n === undefined ? '—' : n.toFixed(2);
}

function describeRun(result: WrkResult | undefined): string {
  if (result === undefined) return 'no result';
  const spread = perSecondSpread(result.perSecond);
  const seconds = spread === undefined ? '' : `, per second ${spread.min}–${spread.max}`;
  return `${Math.round(result.requestsPerS)} req/s, p50 ${fixed(result.latencyMs.p50)} ms, p99 ${fixed(result.latencyMs.p99)} ms${seconds}`;
}

function rssChange(slot: { rssStartBytes: number | undefined; rssEndBytes: number | undefined }): string {
  return `, RSS ${mib(slot.rssStartBytes)} → ${mib(slot.rssEndBytes)} MiB`;
}

process.exitCode = await main();

/** The files rows name: the workspace file the Read rows read, and the keys files of the rules row (one key, with and without rules). */
async function prepareRowFiles(ctx: BenchContext): Promise<void> {
  await mkdir(path.join(ctx.workspace, path.dirname(READ_FILE)), { recursive: true });
  await writeFile(path.join(ctx.workspace, READ_FILE), Array.from({ length: 40 }, (_, i) => `line ${i + 1} of the notes`).join('\n'));
  for (const [name, permissions] of [
    ['plain', undefined],
    ['rules', TEN_RULES],
  ] as const) {
    const key = { label: 'bench', key: ctx.apiKey, ...(permissions && { permissions }) };
    await writeFile(path.join(ctx.dir, `keys-${name}.json`), JSON.stringify([key]));
  }
}
