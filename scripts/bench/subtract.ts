/**
 * Where the keyed path's time goes, by subtraction (issue 33): `npm run bench:subtract [-- --only a,b]
 * [-- --rounds N] [-- --duration S] [-- --against REV,...] [-- --traced]`. `--against` adds earlier
 * builds, as committed at each revision, to compare today's server with (`--only none` leaves the
 * patches out); `--traced` adds toolport as committed with tracing on, every call and 1% sampled,
 * exporting to a sink that takes every batch.
 *
 * Each `bench/subtraction/<piece>.patch` removes or stubs one piece of toolport's per-request work
 * (the key check, the rate limiter, a hook, ...); each `bench/subtraction/<name>.flags` names Node
 * flags to run toolport as committed with (the garbage collector's settings). For each patch the script checks out HEAD in a
 * throwaway worktree, applies the patch, builds `dist/` there, and measures keyed `POST
 * /tools/Echo` and keyed `GET /tools` on it, beside toolport as committed and the same stack
 * (bench/same-stack.ts). The figure is the server's CPU time per call (user and system, all
 * threads, from /proc over the measured window, divided by the calls wrk completed). Every server
 * runs for the whole measurement and each is loaded in turn for short windows, in a new order
 * each round, many rounds; the figure is the median of its windows, so a burst of other work on
 * the machine moves a window, not a figure. The difference to toolport as committed is what the
 * piece costs, in microseconds per call. Nothing here is shipped: the patches never touch `main`.
 */
import { spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { build, stop } from 'esbuild';
import { BUNDLE_OPTIONS } from '../bundle-options.js';
import { median } from './report.js';
import { startOtlpSink, type OtlpSink } from './otlp-sink.js';
import { choosePinning } from './pinning.js';
import { startServer, stopServer, type RunningServer, type ServerSpec } from './processes.js';
import { ROOT } from './options.js';
import { runWrk, writeWrkScript, type RequestSpec } from './wrk.js';

const PATCHES = path.join(ROOT, 'bench/subtraction');
const BUILDS = path.join(tmpdir(), 'toolport-subtract-builds');
const TICKS_PER_S = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;

const { values } = parseArgs({
  options: {
    only: { type: 'string' },
    against: { type: 'string' },
    traced: { type: 'boolean', default: false },
    rounds: { type: 'string', default: '8' },
    duration: { type: 'string', default: '2' },
    'warm-up': { type: 'string', default: '3' },
    out: { type: 'string', default: path.join(ROOT, 'bench/results/subtraction.json') },
  },
});
const rounds = Number(values.rounds);
const durationS = Number(values.duration);
const warmUpS = Number(values['warm-up']);
const say = (line: string): boolean => process.stderr.write(`${line}\n`);

/** The server's CPU time so far (user + system, every thread), in seconds. */
async function cpuSeconds(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  // The fields after the command name, which may hold spaces, start after its closing bracket.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_S;
}

interface Variant {
  name: string;
  /** The directory whose dist/server.js runs; undefined for the same stack. */
  root: string | undefined;
  /** Node's own flags for it (a `<name>.flags` file: toolport as committed, run with them). */
  flags?: string[];
  /** Environment on top of the bench's (tracing's variables). */
  env?: Record<string, string>;
}

/**
 * A variant's build: HEAD in a worktree with the patch applied, bundled as `npm run build` does.
 * Kept under the temporary directory by revision and patch digest, so a second run reuses it.
 */
async function buildVariant(name: string, patch: string | undefined, at = 'HEAD'): Promise<Variant> {
  const revision = git(['rev-parse', '--verify', `${at}^{commit}`]);
  if (revision === '') throw new Error(`${name}: ${at} names no commit`);
  const digest =
    patch === undefined
      ? 'none'
      : createHash('sha256')
          .update(await readFile(patch))
          .digest('hex')
          .slice(0, 12);
  const root = path.join(BUILDS, revision.slice(0, 12), `${name}-${digest}`);
  if (existsSync(path.join(root, 'dist/server.js'))) return { name, root };
  await rm(root, { recursive: true, force: true });
  spawnSync('git', ['worktree', 'prune'], { cwd: ROOT });
  const run = (command: string, args: string[], cwd: string): void => {
    const done = spawnSync(command, args, { cwd, encoding: 'utf8' });
    if (done.status !== 0) throw new Error(`${name}: ${command} ${args.join(' ')} failed:\n${done.stdout}${done.stderr}`);
  };
  run('git', ['worktree', 'add', '--detach', root, revision], ROOT);
  try {
    if (patch !== undefined) run('git', ['apply', patch], root);
    await symlink(path.join(ROOT, 'node_modules'), path.join(root, 'node_modules'));
    await bundle(root);
  } catch (err) {
    spawnSync('git', ['worktree', 'remove', '--force', root], { cwd: ROOT });
    throw err;
  }
  return { name, root };
}

/**
 * What `npm run build` makes of the server, straight from the sources with esbuild (as
 * scripts/bundle.ts bundles it, with the same options): `dist/server.js`, the bundle it loads, and
 * the Perl helpers beside it. No type check: a variant only has to run.
 */
async function bundle(root: string): Promise<void> {
  await build({
    entryPoints: [path.join(root, 'src/main/run-server.ts')],
    outfile: path.join(root, 'dist/main/run-server.js'),
    ...BUNDLE_OPTIONS,
    logLevel: 'warning',
  });
  await build({
    entryPoints: [path.join(root, 'src/server.ts')],
    outfile: path.join(root, 'dist/server.js'),
    platform: 'node',
    format: 'esm',
    logLevel: 'warning',
  });
  for (const helper of (await readdir(path.join(root, 'src'), { recursive: true })).filter((file) => file.endsWith('.pl'))) {
    await copyFile(path.join(root, 'src', helper), path.join(root, 'dist/main', path.basename(helper)));
  }
}

function git(args: string[]): string {
  return spawnSync('git', args, { cwd: ROOT, encoding: 'utf8' }).stdout.trim();
}

async function main(): Promise<void> {
  const pinning = choosePinning();
  say(`subtract: ${pinning.note}`);
  const only = values.only?.split(',');
  const patches = (await readdir(PATCHES))
    .filter((file) => file.endsWith('.patch'))
    .map((file) => file.slice(0, -'.patch'.length))
    .filter((name) => only === undefined || only.includes(name))
    .sort();
  const flagSets = (await readdir(PATCHES))
    .filter((file) => file.endsWith('.flags'))
    .map((file) => file.slice(0, -'.flags'.length))
    .filter((name) => only === undefined || only.includes(name))
    .sort();
  const dir = await mkdtemp(path.join(tmpdir(), 'toolport-subtract-'));
  const workspace = path.join(dir, 'workspace');
  await mkdir(workspace);
  const apiKey = randomBytes(24).toString('base64url');
  const variants: Variant[] = [];
  const servers = new Map<string, RunningServer>();
  let sink: OtlpSink | undefined;
  try {
    say('subtract: building toolport as committed and each patched variant (kept for the next run)...');
    const committed = await buildVariant('toolport', undefined);
    variants.push(committed);
    for (const name of flagSets) {
      const flags = (await readFile(path.join(PATCHES, `${name}.flags`), 'utf8')).split(/\s+/).filter(Boolean);
      variants.push({ ...committed, name, flags });
    }
    for (const name of patches) {
      try {
        variants.push(await buildVariant(name, path.join(PATCHES, `${name}.patch`)));
      } catch (err) {
        // A patch that no longer applies or builds is left out, and said so: refresh it against HEAD.
        say(`subtract: ${name} left out: ${(err as Error).message.slice(0, 2000)}`);
      }
    }
    if (values.traced) {
      // Tracing's cost as CPU time a call, which other work on the machine moves less than throughput.
      sink = await startOtlpSink();
      const traced = (sampler: string, ratio?: string) => ({
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: sink!.url,
        OTEL_TRACES_SAMPLER: sampler,
        ...(ratio === undefined ? {} : { OTEL_TRACES_SAMPLER_ARG: ratio }),
      });
      variants.push({ ...committed, name: 'traced, every call', env: traced('parentbased_always_on') });
      variants.push({ ...committed, name: 'traced, 1%', env: traced('parentbased_traceidratio', '0.01') });
    }
    // Earlier builds, unpatched: what today's server costs against one before a change (tracing's merge).
    for (const at of values.against?.split(',').filter(Boolean) ?? []) variants.push(await buildVariant(`at ${at}`, undefined, at));
    variants.push({ name: 'same stack', root: undefined });
    // esbuild's service process would otherwise keep running, and take CPU, through the measurement.
    await stop();
    // Interrupted: the servers still go.
    for (const signal of ['SIGINT', 'SIGTERM'] as const) {
      process.once(signal, () => {
        for (const server of servers.values()) server.child.kill('SIGKILL');
        process.exit(130);
      });
    }

    const requests: Record<string, RequestSpec> = {
      'POST /tools/Echo': {
        method: 'POST',
        path: '/tools/Echo',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` },
        body: '{"text":"hello"}',
      },
      'GET /tools': { method: 'GET', path: '/tools', headers: { authorization: `Bearer ${apiKey}` } },
    };
    const scripts = new Map<string, string>();
    for (const [label, request] of Object.entries(requests)) scripts.set(label, await writeWrkScript(dir, label.replace(/\W+/g, '-'), request));
    // The same stack sends toolport's list bytes: record them once from toolport as committed.
    const repliesFile = path.join(dir, 'replies.json');
    {
      const server = await startServer(spec(variants[0]!, dir, workspace, apiKey, repliesFile, 'record'));
      const list = await fetch(`${server.url}/tools`, { headers: requests['GET /tools']!.headers });
      await writeFile(repliesFile, JSON.stringify({ 'GET /tools': { status: 200, contentType: 'application/json; charset=utf-8', body: await list.text() } }));
      await stopServer(server);
    }

    // Every variant's server runs for the whole measurement, each loaded in turn for short windows,
    // many times over: a burst of other work on the machine then moves one window of a variant,
    // not its figure, which is the median of its windows.
    for (const variant of variants) servers.set(variant.name, await startServer(spec(variant, dir, workspace, apiKey, repliesFile, variant.name)));
    const wrk = (server: RunningServer, script: string, seconds: number) =>
      runWrk({ url: server.url, script, seconds, connections: 50, threads: 1, cpu: pinning.loadCpu });
    for (const script of scripts.values()) for (const server of servers.values()) await wrk(server, script, warmUpS);

    const figures = new Map<string, { reqPerS: number[]; cpuUs: number[]; p99Ms: number[] }>();
    const loadAtStart = loadavg();
    for (let round = 1; round <= rounds; round++) {
      for (const [label, script] of scripts) {
        // A new order each round, so that no variant always follows the same one.
        const order = [...variants].sort(() => Math.random() - 0.5);
        const line: string[] = [];
        for (const variant of order) {
          const server = servers.get(variant.name)!;
          const before = await cpuSeconds(server.pid);
          const result = await wrk(server, script, durationS);
          const cpu = (await cpuSeconds(server.pid)) - before;
          const failed = Object.values(result.errors).reduce((a, b) => a + b, 0);
          if (failed > 0 || result.requests === 0) throw new Error(`${variant.name} ${label}: ${failed} errors ${JSON.stringify(result.errors)}`);
          const key = `${label}\t${variant.name}`;
          const entry = figures.get(key) ?? { reqPerS: [], cpuUs: [], p99Ms: [] };
          entry.reqPerS.push(result.requestsPerS);
          entry.cpuUs.push((cpu / result.requests) * 1e6);
          entry.p99Ms.push(result.latencyMs.p99);
          figures.set(key, entry);
          line.push(`${variant.name} ${entry.cpuUs.at(-1)!.toFixed(1)}`);
        }
        say(`round ${round}/${rounds}  ${label}: ${line.join(', ')} (µs CPU a call)`);
      }
    }

    const rows: { path: string; variant: string; reqPerS: number; cpuUs: number; minCpuUs: number; p99Ms: number | undefined; savedUs: number | undefined }[] =
      [];
    for (const label of scripts.keys()) {
      const base = median(figures.get(`${label}\ttoolport`)!.cpuUs)!;
      for (const variant of variants) {
        const entry = figures.get(`${label}\t${variant.name}`)!;
        const cpuUs = median(entry.cpuUs)!;
        rows.push({
          path: label,
          variant: variant.name,
          reqPerS: median(entry.reqPerS)!,
          cpuUs,
          minCpuUs: Math.min(...entry.cpuUs),
          p99Ms: median(entry.p99Ms),
          savedUs: variant.name === 'toolport' ? undefined : base - cpuUs,
        });
      }
    }
    const lines = [
      `| path | variant | req/s | CPU µs a call | lowest window | saved µs a call | p99 ms |`,
      `| --- | --- | --: | --: | --: | --: | --: |`,
      ...rows.map(
        (r) =>
          `| ${r.path} | ${r.variant} | ${Math.round(r.reqPerS).toLocaleString('en-US')} | ${r.cpuUs.toFixed(1)} | ${r.minCpuUs.toFixed(1)} | ${r.savedUs === undefined ? '—' : r.savedUs.toFixed(1)} | ${r.p99Ms?.toFixed(2) ?? '—'} |`,
      ),
    ];
    console.log(lines.join('\n'));
    await writeFile(
      values.out,
      `${JSON.stringify(
        {
          date: new Date().toISOString(),
          revision: git(['rev-parse', '--short', 'HEAD']),
          node: process.version,
          loadAverageAtStart: loadAtStart,
          loadAverageAtEnd: loadavg(),
          rounds,
          durationS,
          warmUpS,
          rows,
          figures: Object.fromEntries(figures),
        },
        null,
        2,
      )}\n`,
    );
    say(`results: ${path.relative(process.cwd(), values.out)}`);
  } finally {
    for (const server of servers.values()) await stopServer(server);
    if (sink !== undefined && sink.received().batches === 0) say('subtract: the traced variants sent no span: their figures measured nothing');
    await sink?.close();
    await rm(dir, { recursive: true, force: true });
  }
}

/** A keyed server of one variant, as the bench runs toolport: info audit lines to a file, the rate limit on but never reached. */
function spec(variant: Variant, dir: string, workspace: string, apiKey: string, repliesFile: string, name: string): ServerSpec {
  const pinning = choosePinning();
  const logFile = path.join(dir, `${name.replace(/\W+/g, '-')}.log`);
  if (variant.root === undefined) {
    return {
      command: process.execPath,
      args: [path.join(ROOT, 'bench/same-stack.ts'), repliesFile],
      cwd: ROOT,
      env: { SAME_STACK_API_KEY: apiKey, SAME_STACK_RATE_LIMIT: '1000000' },
      logFile,
      cpu: pinning.serverCpu,
    };
  }
  return {
    command: process.execPath,
    args: [...(variant.flags ?? []), 'dist/server.js'],
    cwd: variant.root,
    env: {
      LOG_LEVEL: 'info',
      TOOLPORT_WORKSPACE: workspace,
      TOOLPORT_BASH_SANDBOX: 'false',
      TOOLPORT_API_KEYS: apiKey,
      TOOLPORT_RATE_LIMIT: '1000000',
      TOOLPORT_QUEUE_SIZE: '64',
      TOOLPORT_QUEUE_PER_CALLER: '64',
      ...variant.env,
    },
    logFile,
    cpu: pinning.serverCpu,
  };
}

await main();
