/**
 * What one hostile upstream costs everyone else (issue 31, point 4):
 * `npm run bench:upstream-attacks [-- --seconds N] [-- --only churn,bigpage] [-- --out FILE]`.
 *
 * For each attack, `node dist/server.js` runs pinned to one CPU with one upstream, the attacker
 * (scripts/bench/attacker-upstream.mjs, or attacker-http.mjs for `retry0`), and this process,
 * pinned to the other CPU, calls the built-in Echo one call after another for the window: the
 * latency of Echo during the attack against the same server whose upstream is quiet, measured in
 * the same run. Where the attack needs a caller (results of 30 MiB), this process makes those calls
 * too, 16 at once. Also reported: the server's peak RSS, Echo's non-200 answers, the listings the
 * upstream answered, and the upstream's state in /readyz at the end.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { Agent, request } from 'undici';
import { machine, revision } from './bench/machine.js';
import { ROOT } from './bench/options.js';
import { choosePinning, pinned } from './bench/pinning.js';
import { rssOf, startServer, stopServer } from './bench/processes.js';
import { percentile } from './bench/report.js';

const ATTACKS = ['quiet', 'churn', 'bigpage', 'unknown', 'bigresult', 'bigstructured', 'retry0'] as const;
type Attack = (typeof ATTACKS)[number];
/** Calls made at once to the attacker's own tool, for the attacks that need a caller. */
const ATTACK_CALLERS = 16;
const ATTACKER_TOOL: Partial<Record<Attack, string>> = { bigresult: 'attacker__big', bigstructured: 'attacker__structured' };

interface Row {
  attack: Attack;
  echoCalls: number;
  echoErrors: number;
  p50Ms: number | undefined;
  p99Ms: number | undefined;
  maxMs: number | undefined;
  /** p99 during the attack over p99 with the quiet upstream. */
  p99Ratio?: number;
  peakRssBytes: number | undefined;
  listings: number;
  attackCalls: number;
  attackCallStatuses: Record<string, number>;
  streamGets?: number;
  upstreamAtEnd: unknown;
}

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '8' },
    only: { type: 'string' },
    out: { type: 'string', default: 'bench/results/upstream-attacks.json' },
    // Another checkout's build to measure (its dist/server.js), for a before-and-after.
    root: { type: 'string', default: ROOT },
  },
});
const seconds = Number(values.seconds);
const only = values.only?.split(',') as Attack[] | undefined;
const say = (line: string): boolean => process.stderr.write(`${line}\n`);

async function main(): Promise<void> {
  const pinning = choosePinning();
  say(pinning.note);
  const dir = await mkdtemp(path.join(tmpdir(), 'toolport-attacks-'));
  const rows: Row[] = [];
  try {
    for (const attack of ATTACKS) {
      if (only !== undefined && attack !== 'quiet' && !only.includes(attack)) continue;
      say(`${attack}: ${seconds} s`);
      rows.push(await runAttack(attack, dir, pinning.serverCpu, pinning.loadCpu));
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  const quiet = rows.find((r) => r.attack === 'quiet');
  for (const row of rows) if (quiet?.p99Ms && row.p99Ms !== undefined) row.p99Ratio = row.p99Ms / quiet.p99Ms;
  const fmt = (n: number | undefined): string => (n === undefined ? '?' : n.toFixed(2));
  say('\nattack         Echo p50 ms  p99 ms  max ms  p99/quiet  errors  peak RSS MiB  listings  attack calls');
  for (const r of rows) {
    say(
      `${r.attack.padEnd(14)} ${fmt(r.p50Ms).padStart(11)} ${fmt(r.p99Ms).padStart(7)} ${fmt(r.maxMs).padStart(7)} ${fmt(r.p99Ratio).padStart(10)} ${String(r.echoErrors).padStart(7)} ${((r.peakRssBytes ?? 0) / 1048576).toFixed(0).padStart(13)} ${String(r.listings).padStart(9)}  ${JSON.stringify(r.attackCallStatuses)}${r.streamGets !== undefined ? ` GETs ${r.streamGets}` : ''}`,
    );
  }
  const nproc = (await import('node:os')).availableParallelism();
  await writeFile(
    path.resolve(ROOT, values.out),
    `${JSON.stringify({ date: new Date().toISOString(), revision: revision(), machine: machine(nproc, 'none', pinning.note), seconds, rows }, null, 2)}\n`,
  );
}

async function runAttack(attack: Attack, dir: string, serverCpu: number | undefined, loadCpu: number | undefined): Promise<Row> {
  let http: { stop(): void; url: string; gets(): Promise<number> } | undefined;
  let spec: Record<string, unknown>;
  if (attack === 'retry0') {
    http = await startHttpAttacker(dir, loadCpu);
    spec = { type: 'http', url: http.url };
  } else {
    spec = { command: process.execPath, args: [path.join(ROOT, 'scripts/bench/attacker-upstream.mjs'), attack] };
  }
  const upstreams = path.join(dir, `${attack}.json`);
  await writeFile(upstreams, JSON.stringify({ mcpServers: { attacker: spec } }));
  const server = await startServer({
    command: process.execPath,
    args: ['dist/server.js'],
    cwd: values.root,
    env: { LOG_LEVEL: 'info', TOOLPORT_UPSTREAMS: upstreams, TOOLPORT_RATE_LIMIT: '0', TOOLPORT_WORKSPACE: dir, TOOLPORT_BASH_SANDBOX: 'false' },
    logFile: path.join(dir, `${attack}-server.log`),
    cpu: serverCpu,
    ready: { path: '/readyz', status: 200 },
  });
  const agent = new Agent({ connections: ATTACK_CALLERS + 2 });
  let peak = 0;
  const sampler = setInterval(() => void rssOf(server.pid).then((rss) => (peak = Math.max(peak, rss ?? 0))), 100);
  const statuses: Record<string, number> = {};
  let attackCalls = 0;
  const until = performance.now() + seconds * 1000;
  const attackers =
    ATTACKER_TOOL[attack] === undefined
      ? []
      : Array.from({ length: ATTACK_CALLERS }, async () => {
          while (performance.now() < until) {
            const answer = await request(`${server.url}/tools/${ATTACKER_TOOL[attack]}`, {
              method: 'POST',
              dispatcher: agent,
              headers: { 'content-type': 'application/json' },
              body: '{}',
            }).catch(() => undefined);
            attackCalls++;
            const text = await answer?.body.text().catch(() => undefined);
            // A 200 may hold an error result: the upstream refused or went away.
            const key = `${answer?.statusCode ?? 'failed'}${text?.includes('"isError":true') === true ? ' isError' : ''}`;
            statuses[key] = (statuses[key] ?? 0) + 1;
          }
        });
  const latencies: number[] = [];
  let errors = 0;
  // Echo waits for the attack to begin (a churn's listings, a flood's first messages).
  await delay(500);
  while (performance.now() < until) {
    const started = performance.now();
    const answer = await request(`${server.url}/tools/Echo`, {
      method: 'POST',
      dispatcher: agent,
      headers: { 'content-type': 'application/json' },
      body: '{"text":"hi"}',
    }).catch(() => undefined);
    await answer?.body.text().catch(() => undefined);
    latencies.push(performance.now() - started);
    if (answer?.statusCode !== 200) errors++;
  }
  await Promise.all(attackers);
  clearInterval(sampler);
  const readyz = await request(`${server.url}/readyz`, { dispatcher: agent })
    .then((r) => r.body.json())
    .catch(() => undefined);
  const streamGets = await http?.gets();
  await stopServer(server);
  http?.stop();
  await agent.close();
  // The attacker's last `listings N` on its stderr, as toolport logged it.
  const said = [...(await readFile(server.logFile, 'utf8')).matchAll(/"stderr":"listings (\d+)"/g)];
  const listings = Number(said.at(-1)?.[1] ?? 0);
  return {
    attack,
    echoCalls: latencies.length,
    echoErrors: errors,
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
    maxMs: percentile(latencies, 100),
    peakRssBytes: peak,
    listings,
    attackCalls,
    attackCallStatuses: statuses,
    ...(streamGets !== undefined ? { streamGets } : {}),
    upstreamAtEnd: (readyz as { upstreams?: Record<string, unknown> } | undefined)?.upstreams?.['attacker'],
  };
}

async function startHttpAttacker(dir: string, cpu: number | undefined): Promise<{ stop(): void; url: string; gets(): Promise<number> }> {
  const portFile = path.join(dir, 'http-port');
  const { command, args } = pinned(cpu, process.execPath, [path.join(ROOT, 'scripts/bench/attacker-http.mjs'), portFile]);
  const child = spawn(command, args, { stdio: 'ignore' });
  for (let i = 0; i < 200; i++) {
    const port = await readFile(portFile, 'utf8').catch(() => '');
    if (port !== '') {
      const url = `http://127.0.0.1:${port}`;
      return { url: `${url}/mcp`, stop: () => child.kill(), gets: async () => Number(await request(`${url}/count`).then((r) => r.body.text())) };
    }
    await delay(25);
  }
  child.kill();
  throw new Error('the HTTP attacker did not start');
}

await main();
