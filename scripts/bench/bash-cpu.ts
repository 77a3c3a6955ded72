/**
 * Where a Bash call's cost goes, by sandbox: `tsx scripts/bench/bash-cpu.ts [calls] [rounds] [pauseMs] [modes]`
 * (default 200 calls, 3 rounds, back to back, `raw,off,landlock,bubblewrap`). Not a row of
 * `npm run bench`: a profile of what its Bash rows measure.
 *
 * For each mode, in interleaved rounds, a fresh server on the server CPU (as the bench's Bash
 * slots: `targets.ts`) answers `calls` sequential `Bash true` calls, and the CPU time of its whole
 * process tree (the server, the resident reaper, the call reapers and commands, living or reaped:
 * utime, stime, cutime and cstime from /proc) is read before and after. CPU time per call moves
 * much less than wall time when other work shares the CPUs. After the calls, the tree's CPU time
 * over 3 s with nobody calling is what the shells waiting for the next calls cost.
 *
 * Modes: `raw` (the bare spawn behind node:http), `off`, `landlock`, `bubblewrap`
 * (TOOLPORT_BASH_SANDBOX), and each with `-nocg`: the server in a mount namespace of its own with
 * an empty tmpfs over /sys/fs/cgroup, so that no cgroup per call can be made, as in a container
 * without delegation (root only: `unshare -m`).
 */
import { mkdir, mkdtemp, readdir, readFile, writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { parseOptions } from './options.js';
import { choosePinning } from './pinning.js';
import { startServer, stopServer, type ServerSpec } from './processes.js';
import { median, percentile } from './report.js';
import { BASH_REQUEST } from './rows.js';
import { sequentialLatencies } from './sequential.js';
import { rawSpec, toolportSpec, type BenchContext } from './targets.js';

// /proc counts CPU time in clock ticks of 10 ms (USER_HZ 100).
const TICK_MS = 10;
const IDLE_S = 3;
const SANDBOX: Record<string, string> = { off: 'false', landlock: 'landlock', bubblewrap: 'bubblewrap' };

interface Figures {
  p50: number[];
  p99: number[];
  cpuMs: number[];
  serverMs: number[];
  idleMsPerS: number[];
}

/** utime + stime of a process, with cutime + cstime (its reaped children's) unless `own`. */
async function ticks(pid: number, own = false): Promise<number> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    const fields = stat
      .slice(stat.lastIndexOf(')') + 2)
      .split(' ')
      .map(Number);
    // Fields 14 to 17 of proc(5), counted here from field 3 (the state).
    const [utime = 0, stime = 0, cutime = 0, cstime = 0] = fields.slice(11, 15);
    return utime + stime + (own ? 0 : cutime + cstime);
  } catch {
    return 0;
  }
}

async function childrenOf(pid: number): Promise<number[]> {
  const found: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, 'utf8').catch(() => '');
    if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid) found.push(Number(entry));
  }
  return found;
}

/** CPU ticks of a process and of every living descendant, each with its reaped children. */
async function treeTicks(pid: number): Promise<number> {
  let total = await ticks(pid);
  for (const child of await childrenOf(pid)) total += await treeTicks(child);
  return total;
}

function specFor(ctx: BenchContext, mode: string): ServerSpec {
  const base = mode.replace(/-nocg$/, '');
  const sandbox = SANDBOX[base];
  if (base !== 'raw' && sandbox === undefined) throw new Error(`unknown mode ${mode}: raw, off, landlock, bubblewrap, each with -nocg`);
  const spec = base === 'raw' ? rawSpec(ctx, 'bash') : toolportSpec(ctx, `bash-cpu-${mode}`, { TOOLPORT_BASH_SANDBOX: sandbox! });
  if (!mode.endsWith('-nocg')) return spec;
  return { ...spec, command: 'unshare', args: ['-m', 'sh', '-c', 'mount -t tmpfs none /sys/fs/cgroup && exec "$@"', 'sh', spec.command, ...spec.args] };
}

const range = (values: number[]): string => `${Math.min(...values).toFixed(2)}–${Math.max(...values).toFixed(2)}`;

async function main(): Promise<void> {
  const [calls = 200, rounds = 3, pauseMs = 0] = process.argv.slice(2, 5).map(Number);
  const modes = (process.argv[5] ?? 'raw,off,landlock,bubblewrap').split(',');
  const pinning = choosePinning();
  const dir = await mkdtemp(path.join(tmpdir(), 'toolport-bash-cpu-'));
  const workspace = path.join(dir, 'workspace');
  await mkdir(workspace);
  const repliesFile = path.join(dir, 'replies.json');
  // The raw server answers /healthz from its replies, and Bash by spawning.
  await writeFile(repliesFile, JSON.stringify({ 'GET /healthz': { status: 200, contentType: 'application/json', body: '{"status":"ok"}' } }));
  const ctx: BenchContext = { options: parseOptions([]), pinning, dir, workspace, repliesFile, apiKey: '' };
  const load = (): string =>
    loadavg()
      .map((n) => n.toFixed(2))
      .join(' ');
  console.log(`${calls} calls a slot, ${pauseMs} ms apart, ${rounds} rounds; ${pinning.note}; load average ${load()}`);
  const results = new Map<string, Figures>();
  for (let round = 1; round <= rounds; round++) {
    for (const mode of modes) {
      const server = await startServer(specFor(ctx, mode));
      await delay(1000);
      const [before, serverBefore] = [await treeTicks(server.pid), await ticks(server.pid, true)];
      const { latenciesMs, failures } = await sequentialLatencies(server.url, BASH_REQUEST, calls, 0, pauseMs);
      const [after, serverAfter] = [await treeTicks(server.pid), await ticks(server.pid, true)];
      await delay(500);
      const idleBefore = await treeTicks(server.pid);
      await delay(IDLE_S * 1000);
      const idleAfter = await treeTicks(server.pid);
      await stopServer(server);
      if (failures.length > 0) throw new Error(`${mode}: ${failures.length} calls failed, the first: ${failures[0]}`);
      const figures = results.get(mode) ?? { p50: [], p99: [], cpuMs: [], serverMs: [], idleMsPerS: [] };
      results.set(mode, figures);
      const p50 = median(latenciesMs)!;
      figures.p50.push(p50);
      figures.p99.push(percentile(latenciesMs, 99)!);
      figures.cpuMs.push(((after - before) * TICK_MS) / calls);
      figures.serverMs.push(((serverAfter - serverBefore) * TICK_MS) / calls);
      figures.idleMsPerS.push(((idleAfter - idleBefore) * TICK_MS) / IDLE_S);
      const slow = latenciesMs.filter((ms) => ms > p50 + 50).length;
      console.log(
        `round ${round}  ${mode.padEnd(13)} p50 ${p50.toFixed(2)} ms, p99 ${figures.p99.at(-1)!.toFixed(2)} ms, ${slow} over p50 + 50 ms; ` +
          `CPU a call ${figures.cpuMs.at(-1)!.toFixed(2)} ms (server process ${figures.serverMs.at(-1)!.toFixed(2)}); idle ${figures.idleMsPerS.at(-1)!.toFixed(1)} ms/s; load ${load()}`,
      );
    }
  }
  console.log('\nmedians over the rounds (range):');
  for (const [mode, f] of results) {
    console.log(
      `${mode.padEnd(13)} p50 ${median(f.p50)!.toFixed(2)} ms (${range(f.p50)}), p99 ${median(f.p99)!.toFixed(2)} ms; ` +
        `CPU a call ${median(f.cpuMs)!.toFixed(2)} ms (${range(f.cpuMs)}), of which the server process ${median(f.serverMs)!.toFixed(2)} ms; ` +
        `idle ${median(f.idleMsPerS)!.toFixed(1)} ms/s`,
    );
  }
  console.log(`load average at the end ${load()}; logs in ${dir}`);
}

await main();
