/**
 * Load test of the real server process:
 * `npx tsx scripts/load.ts [--duration 5] [--connections 16] [--build]`.
 *
 * Starts `node --import tsx src/server.ts` (with `--build`: compiles with tsc and starts
 * `node dist/server.js`, as `npm start` does, for memory figures without the loader's share)
 * on an ephemeral loopback port (rate limit off, a queue
 * as deep as the connection count so Bash's concurrency cap cannot answer 503), and, as a
 * baseline, a bare node:http server answering a fixed JSON. Drives each with autocannon for
 * `--duration` seconds per phase at `--connections` concurrency: the baseline (GET, then POST), then
 * toolport's GET /tools, POST /tools/Echo, and a mix of GET /tools, Echo, Read and a small Bash.
 * Prints requests per second, p50/p99 latency, status counts, errors and timeouts, the server's
 * RSS before and after, and the throughput ratios to the baseline (ratios, because absolute figures
 * say more about the machine than about the server). Exits 1 on any 5xx, connection error or
 * timeout, or when the server does not exit 0 on SIGTERM.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, open, readFile, rm, writeFile } from 'node:fs/promises';
import { availableParallelism, tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as delay } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';

const ROOT = path.resolve(import.meta.dirname, '..');
const JSON_HEADERS = { 'content-type': 'application/json' };
const START_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 20_000;
const WARM_UP_S = 1;

// The baseline: what node:http alone costs for a small JSON answer (the body is read, as a handler would).
const BASELINE_SERVER = `
const http = require('node:http');
const body = JSON.stringify({ content: [{ type: 'text', text: 'hello' }], isError: false });
const server = http.createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  });
});
server.listen(0, '127.0.0.1', () => console.log(server.address().port));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
`;

interface Route {
  label: string;
  request: autocannon.Request;
}

/** Counts per route of the responses autocannon saw, by status class; 5xx also by error code. */
class RouteCounts {
  readonly #counts = new Map<string, Map<string, number>>();

  /** The route with an `onResponse` that counts into this table. */
  track({ label, request }: Route): autocannon.Request {
    return { ...request, onResponse: (status, body) => this.#add(label, status, body) };
  }

  #add(label: string, status: number, body: string): void {
    let key = `${Math.floor(status / 100)}xx`;
    if (status >= 500) key += ` ${/"code":"([A-Z_]+)"/.exec(body)?.[1] ?? '?'}`;
    else if (status === 200 && body.includes('"isError":true')) key += ' isError';
    const route = this.#counts.get(label) ?? new Map<string, number>();
    route.set(key, (route.get(key) ?? 0) + 1);
    this.#counts.set(label, route);
  }

  toString(): string {
    return [...this.#counts].map(([label, counts]) => `    ${label.padEnd(18)} ${[...counts].map(([k, n]) => `${k}: ${n}`).join(', ')}`).join('\n');
  }
}

interface Phase {
  name: string;
  result: autocannon.Result;
  counts: RouteCounts;
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      duration: { type: 'string', default: '5' },
      connections: { type: 'string', default: '16' },
      build: { type: 'boolean', default: false },
    },
  });
  const duration = positiveInteger('--duration', values.duration);
  const connections = positiveInteger('--connections', values.connections);

  const dir = await mkdtemp(path.join(tmpdir(), 'toolport-load-'));
  const workspace = path.join(dir, 'workspace');
  await mkdir(workspace);
  await writeFile(path.join(workspace, 'small.txt'), Array.from({ length: 20 }, (_, i) => `line ${i + 1} of a small file`).join('\n'));

  let entry = ['--import', 'tsx', 'src/server.ts'];
  if (values.build) {
    process.stderr.write('building with tsc...\n');
    const built = spawnSync(process.execPath, [path.join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'], {
      cwd: ROOT,
      stdio: 'inherit',
    });
    if (built.status !== 0) throw new Error(`the build failed with status ${built.status}`);
    entry = ['dist/server.js'];
  }
  const baseline = await startBaseline();
  const toolport = await startToolport(entry, workspace, path.join(dir, 'server.log'), connections);
  const phases: Phase[] = [];
  let failed = false;
  try {
    const warmUps: Phase[] = [];
    const run = async (name: string, url: string, routes: Route[], seconds: number): Promise<Phase> => {
      process.stderr.write(`${name}: ${seconds} s...\n`);
      const counts = new RouteCounts();
      const result = await autocannon({ url, connections, duration: seconds, requests: routes.map((r) => counts.track(r)) });
      return { name, result, counts };
    };
    // Each phase first runs unmeasured for a moment, so the JIT has optimised its path.
    const drive = async (name: string, url: string, routes: Route[]): Promise<Phase> => {
      warmUps.push(await run(`${name} (warm-up)`, url, routes, WARM_UP_S));
      return run(name, url, routes, duration);
    };
    const rssBefore = await rss(toolport.pid);
    const get: Route = { label: 'GET /tools', request: { method: 'GET', path: '/tools' } };
    const echo: Route = { label: 'POST /tools/Echo', request: { method: 'POST', path: '/tools/Echo', headers: JSON_HEADERS, body: '{"text":"hello"}' } };
    const read: Route = {
      label: 'POST /tools/Read',
      request: { method: 'POST', path: '/tools/Read', headers: JSON_HEADERS, body: '{"file_path":"small.txt"}' },
    };
    const bash: Route = { label: 'POST /tools/Bash', request: { method: 'POST', path: '/tools/Bash', headers: JSON_HEADERS, body: '{"command":"echo hi"}' } };
    const baseGet: Route = { label: 'GET /', request: { method: 'GET', path: '/' } };
    const basePost: Route = { label: 'POST /', request: { ...echo.request, path: '/' } };

    // Each ratio's two sides run back to back, so a change in the machine's load skews both alike.
    phases.push(await drive('baseline GET (node:http)', baseline.url, [baseGet]));
    phases.push(await drive('toolport GET /tools', toolport.url, [get]));
    phases.push(await drive('baseline POST (node:http)', baseline.url, [basePost]));
    phases.push(await drive('toolport POST Echo', toolport.url, [echo]));
    phases.push(await drive('toolport mix', toolport.url, [get, echo, read, bash]));
    const rssAfter = await rss(toolport.pid);
    process.stderr.write('stopping...\n');

    report(phases, { duration, connections, entry: entry.join(' ') });
    const ratio = (a: number, b: number): string => (phases[b]!.result.requests.average / phases[a]!.result.requests.average).toFixed(2);
    console.log(
      `\nthroughput ratio to the bare node:http baseline: GET /tools ${ratio(0, 1)}, POST /tools/Echo ${ratio(2, 3)} (load generator and server share the CPUs: not the benchmark's ratios, which npm run bench measures)`,
    );
    console.log(`toolport RSS: before ${mib(rssBefore.rss)}, after ${mib(rssAfter.rss)} (peak ${mib(rssAfter.peak)})`);

    for (const { name, result } of [...warmUps, ...phases]) {
      if (result['5xx'] > 0 || result.errors > 0 || result.timeouts > 0) {
        console.error(`FAIL ${name}: ${result['5xx']} 5xx, ${result.errors} connection errors, ${result.timeouts} timeouts`);
        failed = true;
      }
    }
  } finally {
    baseline.child.kill('SIGTERM');
    const code = await stop(toolport.child);
    if (code !== 0) {
      console.error(`FAIL toolport exited with ${code} on SIGTERM; its log is ${path.join(dir, 'server.log')}`);
      failed = true;
    } else {
      console.log('toolport exited 0 on SIGTERM');
    }
    if (!failed) await rm(dir, { recursive: true, force: true });
  }
  console.log(failed ? '\nFAIL' : '\nOK: no 5xx, no connection errors, no timeouts');
  return failed ? 1 : 0;
}

function report(phases: Phase[], { duration, connections, entry }: { duration: number; connections: number; entry: string }): void {
  console.log(`\nnode ${entry}: ${connections} connections, ${duration} s per phase (after ${WARM_UP_S} s unmeasured)`);
  console.log(`Node ${process.version}, ${availableParallelism()} CPUs shared with the load generator\n`);
  const head = ['phase', 'req/s', 'p50 ms', 'p99 ms', 'requests', '2xx', '4xx', '5xx', 'non-2xx', 'errors', 'timeouts'];
  const rows = phases.map(({ name, result: r }) => [
    name,
    r.requests.average.toFixed(0),
    r.latency.p50.toFixed(1),
    r.latency.p99.toFixed(1),
    String(r.requests.total),
    String(r['2xx']),
    String(r['4xx']),
    String(r['5xx']),
    String(r.non2xx),
    String(r.errors),
    String(r.timeouts),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  for (const row of [head, ...rows]) console.log(row.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join('  '));
  console.log('\nresponses by route (2xx isError: the tool ran and reported a failure):');
  for (const { name, counts } of phases) console.log(`  ${name}\n${counts}`);
}

/** The bare node:http server, in a process of its own like the server it is compared with. */
async function startBaseline(): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, ['-e', BASELINE_SERVER], { stdio: ['ignore', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout! });
  const port = await Promise.race([
    new Promise<string>((resolve) => lines.once('line', resolve)),
    delay(START_TIMEOUT_MS, undefined, { ref: false }).then(() => {
      throw new Error('the baseline server did not start');
    }),
  ]);
  return { child, url: `http://127.0.0.1:${port.trim()}` };
}

/**
 * The real server. Its log goes to a file, not a pipe: this process runs the load generator, and a
 * pipe it is too busy to drain would hold the server's synchronous log writes up.
 */
async function startToolport(
  entry: string[],
  workspace: string,
  logFile: string,
  connections: number,
): Promise<{ child: ChildProcess; url: string; pid: number }> {
  const log = await open(logFile, 'w');
  const child = spawn(process.execPath, entry, {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      PORT: '0',
      HOST: '127.0.0.1',
      TOOLPORT_WORKSPACE: workspace,
      TOOLPORT_RATE_LIMIT: '0',
      // Every connection may wait on Bash at once; the queue must hold them all or calls get 503 QUEUE_FULL.
      TOOLPORT_QUEUE_SIZE: String(Math.max(64, connections)),
    },
    stdio: ['ignore', log.fd, 'inherit'],
  });
  await log.close();
  let exit: number | null | undefined;
  child.once('exit', (code) => (exit = code));
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (exit !== undefined) throw new Error(`toolport exited with ${exit} during start-up; see ${logFile}`);
    const listening = /"msg":"Server listening at (http:\/\/[^"]+)"/.exec(await readFile(logFile, 'utf8'));
    if (listening) return { child, url: listening[1]!, pid: child.pid! };
    await delay(50);
  }
  child.kill('SIGKILL');
  throw new Error(`toolport did not log "Server listening" within ${START_TIMEOUT_MS} ms; see ${logFile}`);
}

/** SIGTERM, then the exit code; SIGKILL and null when it does not exit in time. */
async function stop(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null) return child.exitCode;
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  child.kill('SIGTERM');
  const code = await Promise.race([exited, delay(STOP_TIMEOUT_MS, undefined, { ref: false }).then(() => 'timeout' as const)]);
  if (code !== 'timeout') return code;
  child.kill('SIGKILL');
  return null;
}

/** Resident and peak resident memory of a process, in bytes, from /proc (Linux). */
async function rss(pid: number): Promise<{ rss: number; peak: number }> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string): number => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN) * 1024;
  return { rss: kib('VmRSS'), peak: kib('VmHWM') };
}

function mib(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

function positiveInteger(flag: string, value: string | undefined): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${flag} must be a positive integer, got ${JSON.stringify(value)}`);
  return n;
}

process.exitCode = await main();
