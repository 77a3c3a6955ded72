/**
 * What a hostile caller's background tasks cost a well-behaved caller, in latency:
 * `npm run bench:hostile-latency [-- --calls 200]`.
 *
 * Starts the real server (`node --import tsx src/server.ts`, rate limit off) pinned with taskset
 * to CPU 0, and pins itself, the load generator, to CPU 1. The commands the server runs inherit
 * its CPU, so a hostile task competes with the server for its one core, as it would on a replica
 * sized to one CPU. The well-behaved key makes `--calls` foreground calls one after another of
 * each kind (Echo, which starts no process, and `Bash {command: "echo hi"}`), in phases of the
 * same run: quiet; with one hostile task printing without end past its 1 MiB output cap; with one
 * forking without end against a bound of 32 processes; with the whole attack at the hostile key's
 * cap of 4 (those two, one that ignores SIGTERM, and a sleeper; a fifth is refused); and quiet
 * again after TaskStop ended them. Prints p50 and p99 per phase and kind, and the ratios of the
 * whole attack to quiet.
 * Exits 1 when a well-behaved call fails, or the server does not exit 0 on SIGTERM.
 */
import { spawn, spawnSync } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as delay } from 'node:timers/promises';
import { parseArgs } from 'node:util';

const ROOT = path.resolve(import.meta.dirname, '..');
const GOOD = 'good-secret-0123456789abcdef';
const HOSTILE = 'hostile-secret-0123456789abcdef';
const CAP = 4;
const MAX_PROCESSES = 32;
const STARTED = /^Command running in background with ID: (b[\w-]{12})\. /;

interface Answer {
  status: number;
  text: string;
  isError?: boolean;
}

async function call(url: string, key: string, tool: string, input: Record<string, unknown>): Promise<Answer> {
  const res = await fetch(`${url}/tools/${tool}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(input),
  });
  const body = (await res.json()) as { content?: Array<{ text?: string }>; isError?: boolean };
  return { status: res.status, text: (body.content ?? []).map((c) => c.text ?? '').join('\n'), isError: body.isError };
}

function quantile(sorted: readonly number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
}

interface Stats {
  p50: number;
  p99: number;
}

/** `calls` calls of one kind, one after another; the failures are counted, not timed. */
async function measure(calls: number, once: () => Promise<boolean>, failures: { count: number }): Promise<Stats> {
  const ms: number[] = [];
  for (let i = 0; i < calls; i++) {
    const started = performance.now();
    const ok = await once();
    ms.push(performance.now() - started);
    if (!ok) failures.count++;
  }
  ms.sort((a, b) => a - b);
  return { p50: quantile(ms, 0.5), p99: quantile(ms, 0.99) };
}

async function main(): Promise<number> {
  const { values } = parseArgs({ options: { calls: { type: 'string', default: '200' } } });
  const calls = Number(values.calls);
  if (!Number.isInteger(calls) || calls < 10) throw new Error('--calls takes an integer of 10 or more');
  if (availableParallelism() < 2 || spawnSync('taskset', ['-V']).error) throw new Error('needs two CPUs and taskset (util-linux)');
  // This process, the load generator, on CPU 1; the server on CPU 0.
  spawnSync('taskset', ['-a', '-pc', '1', String(process.pid)], { stdio: 'ignore' });

  const base = await mkdtemp('/var/tmp/toolport-hostile-');
  // The keys file outside the workspace, which the server insists on.
  const workspace = path.join(base, 'workspace');
  await mkdir(workspace);
  const keys = path.join(base, 'keys.json');
  await writeFile(
    keys,
    JSON.stringify([
      { label: 'good', key: GOOD },
      { label: 'hostile', key: HOSTILE },
    ]),
  );
  const child = spawn('taskset', ['-c', '0', process.execPath, '--import', 'tsx', 'src/server.ts'], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      PORT: '0',
      HOST: '127.0.0.1',
      TOOLPORT_WORKSPACE: workspace,
      TOOLPORT_API_KEYS_FILE: keys,
      TOOLPORT_RATE_LIMIT: '0',
      TOOLPORT_BASH_TASKS_PER_CALLER: String(CAP),
      TOOLPORT_BASH_TASK_MAX_OUTPUT: String(1024 ** 2),
      TOOLPORT_BASH_MAX_PROCESSES: String(MAX_PROCESSES),
      TOOLPORT_SHUTDOWN_GRACE_MS: '1000',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the server did not listen within 30 s')), 30_000);
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const at = /Server listening at (http:\/\/[\d.]+:\d+)/.exec(line);
      if (at) {
        clearTimeout(timer);
        resolve(at[1]!);
      }
    });
    void exited.then((code) => reject(new Error(`the server exited with ${code}`)));
  }).catch(async (err: unknown) => {
    child.kill('SIGKILL');
    await exited;
    await rm(base, { recursive: true, force: true });
    throw err;
  });

  const failures = { count: 0 };
  const echo = (): Promise<boolean> => call(url, GOOD, 'Echo', { text: 'hi' }).then((a) => a.status === 200 && a.text === 'hi');
  const bash = (): Promise<boolean> => call(url, GOOD, 'Bash', { command: 'echo hi' }).then((a) => a.status === 200 && a.text === 'hi' && a.isError === false);
  const phase = async (): Promise<{ echo: Stats; bash: Stats }> => ({ echo: await measure(calls, echo, failures), bash: await measure(calls, bash, failures) });

  let code = 0;
  const ids: string[] = [];
  const start = async (command: string): Promise<string> => {
    const answer = await call(url, HOSTILE, 'Bash', { command, run_in_background: true });
    const id = STARTED.exec(answer.text)?.[1];
    if (id === undefined) throw new Error(`the hostile task did not start: ${answer.text}`);
    ids.push(id);
    return id;
  };
  const stopAll = async (): Promise<void> => {
    for (const id of ids.splice(0)) await call(url, HOSTILE, 'TaskStop', { task_id: id });
  };
  const floodStopped = async (id: string): Promise<boolean> =>
    (await call(url, HOSTILE, 'TaskOutput', { task_id: id, block: false })).text.includes('[Output stopped at');
  const forksAtBound = async (): Promise<boolean> =>
    Number(spawnSync('pgrep', ['-fc', 'sleep 1000.4242'], { encoding: 'utf8' }).stdout.trim()) >= MAX_PROCESSES / 2;
  const until = async (what: string, condition: () => Promise<boolean>): Promise<void> => {
    for (const deadline = Date.now() + 30_000; !(await condition()); await delay(100))
      if (Date.now() > deadline) throw new Error(`the hostile load did not build up: ${what}`);
  };
  const FLOOD = 'yes flood';
  const FORKS = 'while true; do sleep 1000.4242 & done';
  const rows: Array<[string, { echo: Stats; bash: Stats }]> = [];
  try {
    // Warm up: the loader's first compile, the sandbox's first start, the JIT (10 rounds left the
    // first quiet phase about twice as slow as the last).
    for (let i = 0; i < 100; i++) await Promise.all([echo(), bash()]);
    rows.push(['quiet', await phase()]);

    const flood = await start(FLOOD);
    await until('the flood past its cap', () => floodStopped(flood));
    rows.push(['a task printing without end', await phase()]);
    await stopAll();

    await start(FORKS);
    await until('the fork loop at its bound', forksAtBound);
    rows.push(['a task forking without end', await phase()]);
    await stopAll();

    // The whole attack: at the cap (a fifth is refused), all four running.
    const all = await start(FLOOD);
    await start(FORKS);
    await start("trap '' TERM; sleep 1000.4343 & sleep 1000.4343; wait");
    await start('sleep 1000.4444');
    const refused = await call(url, HOSTILE, 'Bash', { command: 'true', run_in_background: true });
    if (!refused.text.startsWith('Too many background tasks')) throw new Error(`the fifth hostile task was not refused: ${refused.text}`);
    await until('the flood past its cap and the fork loop at its bound', async () => (await floodStopped(all)) && (await forksAtBound()));
    const hostile = await phase();
    rows.push(['all four at the cap (flood, forks, deaf to SIGTERM, sleeper)', hostile]);
    await stopAll();
    rows.push(['quiet again', await phase()]);

    const quiet = rows[0]![1];
    const row = (name: string, s: { echo: Stats; bash: Stats }): string =>
      `| ${name} | ${s.echo.p50.toFixed(2)} | ${s.echo.p99.toFixed(2)} | ${s.bash.p50.toFixed(2)} | ${s.bash.p99.toFixed(2)} |`;
    const ratio = (a: number, b: number): string => (a / b).toFixed(2);
    console.log(`\n${calls} calls of each kind per phase, one at a time; server on CPU 0, load generator on CPU 1; ms\n`);
    console.log('| phase | Echo p50 | Echo p99 | Bash p50 | Bash p99 |\n| --- | ---: | ---: | ---: | ---: |');
    console.log(rows.map(([name, stats]) => row(name, stats)).join('\n'));
    const again = rows.at(-1)![1];
    const ratios = (name: string, base: { echo: Stats; bash: Stats }): string =>
      `| ${name} | ${ratio(hostile.echo.p50, base.echo.p50)} | ${ratio(hostile.echo.p99, base.echo.p99)} | ${ratio(hostile.bash.p50, base.bash.p50)} | ${ratio(hostile.bash.p99, base.bash.p99)} |`;
    console.log(ratios('all four / quiet', quiet));
    console.log(ratios('all four / quiet again', again));
    console.log(`\nwell-behaved calls that failed: ${failures.count}`);
    if (failures.count > 0) code = 1;
  } finally {
    child.kill('SIGTERM');
    const exit = await exited;
    if (exit !== 0) {
      console.log(`the server exited with ${exit}`);
      code = 1;
    }
    await rm(base, { recursive: true, force: true });
  }
  return code;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(err instanceof Error ? err.message : String(err));
    process.exit(1);
  },
);
