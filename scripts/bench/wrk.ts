import { spawn, spawnSync } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { pinned } from './pinning.js';

/** One HTTP request, sent over and over by wrk. */
export interface RequestSpec {
  method: 'GET' | 'POST';
  path: string;
  headers: Readonly<Record<string, string>>;
  body?: string;
}

/** What wrk's `done` hook reports for one run, in seconds and milliseconds. */
export interface WrkResult {
  requests: number;
  durationS: number;
  requestsPerS: number;
  /** Socket errors and timeouts, and `status`: responses with a status of 400 or more. */
  errors: { connect: number; read: number; write: number; status: number; timeout: number };
  latencyMs: { p50: number; p90: number; p99: number; max: number };
  /**
   * Requests sent in each wall-clock second of the run, in order (the first and last seconds are
   * partial): a periodic cost (batched log writes, garbage collection, timers) shows as a sawtooth.
   * A request is sent when the connection's previous answer arrived, so a second's count is its
   * answers to within the number of connections.
   */
  perSecond: number[];
}

export interface WrkRun {
  url: string;
  /** The Lua script of the request (see `writeWrkScript`). */
  script: string;
  seconds: number;
  connections: number;
  threads: number;
  cpu: number | undefined;
}

const MARKER = 'BENCH_RESULT ';

/** wrk's version line, or undefined when it is not installed. */
export function wrkVersion(): string | undefined {
  const run = spawnSync('wrk', ['--version'], { encoding: 'utf8' });
  if (run.error) return undefined;
  return /wrk \S+/.exec(`${run.stdout}${run.stderr}`)?.[0] ?? 'wrk (version unknown)';
}

/**
 * A wrk Lua script that sends `request` and prints the run's figures as one JSON line. Values go
 * in Lua long brackets, which take any text without escaping (spaced inside an index, where `[[`
 * would open one). No `response` hook: with one, wrk parses every response's headers and body in
 * Lua and would measure itself. The throughput per second is counted in the `request` hook
 * instead, which returns the request wrk built once (`wrk.request`) and adds one to the current
 * second's count: a Lua call and `os.time()` per request. `done` gathers each thread's counts.
 */
export async function writeWrkScript(dir: string, name: string, request: RequestSpec): Promise<string> {
  const literal = (text: string): string => {
    if (text.includes(']==]')) throw new Error(`cannot put ${JSON.stringify(text)} in a wrk script`);
    return `[==[${text}]==]`;
  };
  const lines = [
    `wrk.method = ${literal(request.method)}`,
    `wrk.path = ${literal(request.path)}`,
    ...Object.entries(request.headers).map(([header, value]) => `wrk.headers[ ${literal(header)} ] = ${literal(value)}`),
    ...(request.body === undefined ? [] : [`wrk.body = ${literal(request.body)}`]),
    'counts = {}',
    'local threads = {}',
    'function setup(thread) table.insert(threads, thread) end',
    'function request()',
    '  local now = os.time()',
    '  counts[now] = (counts[now] or 0) + 1',
    '  return wrk.request()',
    'end',
    'function done(summary, latency, requests)',
    '  local total, first, last = {}, nil, nil',
    '  for _, thread in ipairs(threads) do',
    '    for second, n in pairs(thread:get("counts")) do',
    '      total[second] = (total[second] or 0) + n',
    '      if first == nil or second < first then first = second end',
    '      if last == nil or second > last then last = second end',
    '    end',
    '  end',
    '  local seconds = {}',
    '  if first ~= nil then for second = first, last do table.insert(seconds, string.format("%.0f", total[second] or 0)) end end',
    '  local e = summary.errors',
    `  io.write(string.format('${MARKER}{"requests":%.0f,"durationUs":%.0f,"connect":%.0f,"read":%.0f,"write":%.0f,"status":%.0f,"timeout":%.0f,' ..`,
    `    '"p50":%.0f,"p90":%.0f,"p99":%.0f,"max":%.0f,"perSecond":[%s]}\\n', summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,`,
    '    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, table.concat(seconds, ",")))',
    'end',
  ];
  const file = path.join(dir, `${name}.lua`);
  await writeFile(file, `${lines.join('\n')}\n`);
  return file;
}

/** Runs wrk once and returns its figures; throws when wrk fails or prints none. */
export function runWrk(run: WrkRun): Promise<WrkResult> {
  const wrkArgs = ['-t', String(run.threads), '-c', String(run.connections), '-d', `${run.seconds}s`, '--timeout', '5s', '-s', run.script, run.url];
  const { command, args } = pinned(run.cpu, 'wrk', wrkArgs);
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (err += chunk));
    child.once('error', reject);
    child.once('close', (code) => {
      const line = out.split('\n').find((l) => l.startsWith(MARKER));
      if (code !== 0 || line === undefined) {
        reject(new Error(`wrk ${wrkArgs.join(' ')} failed (exit ${code}): ${err.trim() || out.trim()}`));
        return;
      }
      const raw = JSON.parse(line.slice(MARKER.length)) as Record<string, number> & { perSecond: number[] };
      const n = (key: string): number => raw[key] ?? NaN;
      const durationS = n('durationUs') / 1e6;
      resolve({
        requests: n('requests'),
        durationS,
        requestsPerS: n('requests') / durationS,
        errors: { connect: n('connect'), read: n('read'), write: n('write'), status: n('status'), timeout: n('timeout') },
        latencyMs: { p50: n('p50') / 1000, p90: n('p90') / 1000, p99: n('p99') / 1000, max: n('max') / 1000 },
        perSecond: raw.perSecond,
      });
    });
  });
}

/**
 * The spread of the whole seconds of a run (the partial first and last left out): the lowest and
 * highest count and the median; undefined when the run had fewer than three seconds.
 */
export function perSecondSpread(perSecond: readonly number[]): { min: number; max: number; median: number } | undefined {
  const whole = perSecond.slice(1, -1).sort((a, b) => a - b);
  if (whole.length === 0) return undefined;
  const mid = Math.floor(whole.length / 2);
  return { min: whole[0]!, max: whole[whole.length - 1]!, median: whole.length % 2 === 1 ? whole[mid]! : (whole[mid - 1]! + whole[mid]!) / 2 };
}

/** Errors of every kind in one wrk run. */
export function errorTotal({ errors }: WrkResult): number {
  return errors.connect + errors.read + errors.write + errors.status + errors.timeout;
}
