import { spawn, type ChildProcess } from 'node:child_process';
import { open, readFile } from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { pinned } from './pinning.js';

const START_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 20_000;
// The cold-start figure is only as fine as this.
const POLL_INTERVAL_MS = 2;

/** A server process under measurement, started on a port chosen for it. */
export interface RunningServer {
  child: ChildProcess;
  pid: number;
  url: string;
  logFile: string;
  /** From spawn to the first `GET /healthz` answered 200, in ms. */
  readyMs: number;
}

export interface ServerSpec {
  command: string;
  args: readonly string[];
  env: Record<string, string>;
  cwd: string;
  /** Standard output and error go here: a file, never a pipe this busy process might not drain. */
  logFile: string;
  cpu: number | undefined;
  /** When the server is up: this path answers this status (default: `/healthz` answers 200). */
  ready?: { path: string; status: number };
}

/** Starts a server on a free loopback port (its `PORT`) and waits until it is ready (`spec.ready`; default: `/healthz` answers 200). */
export async function startServer(spec: ServerSpec): Promise<RunningServer> {
  const port = await freePort();
  const log = await open(spec.logFile, 'w');
  const { command, args } = pinned(spec.cpu, spec.command, spec.args);
  const started = performance.now();
  const child = spawn(command, args, {
    cwd: spec.cwd,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/', HOST: '127.0.0.1', PORT: String(port), ...spec.env },
    stdio: ['ignore', log.fd, log.fd],
  });
  await log.close();
  let exited = false;
  child.once('exit', () => (exited = true));
  const url = `http://127.0.0.1:${port}`;
  const deadline = started + START_TIMEOUT_MS;
  const ready = spec.ready ?? { path: '/healthz', status: 200 };
  while (performance.now() < deadline) {
    if (exited) throw new Error(`${spec.command} ${spec.args.join(' ')} exited during start-up: ${await tail(spec.logFile)}`);
    if ((await statusOf(url, ready.path)) === ready.status) return { child, pid: child.pid!, url, logFile: spec.logFile, readyMs: performance.now() - started };
    await delay(POLL_INTERVAL_MS);
  }
  child.kill('SIGKILL');
  throw new Error(`${spec.command} ${spec.args.join(' ')} did not answer GET ${ready.path} within ${START_TIMEOUT_MS} ms; see ${spec.logFile}`);
}

/** SIGTERM, then how it ended; SIGKILL (and `timed out`) when it does not exit in time. */
export async function stopServer(server: RunningServer): Promise<{ code: number | null; signal: NodeJS.Signals | null; timedOut: boolean }> {
  const { child } = server;
  if (child.exitCode !== null || child.signalCode !== null) return { code: child.exitCode, signal: child.signalCode, timedOut: false };
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  child.kill('SIGTERM');
  const outcome = await Promise.race([exited, delay(STOP_TIMEOUT_MS, undefined, { ref: false })]);
  if (outcome !== undefined) return { ...outcome, timedOut: false };
  child.kill('SIGKILL');
  return { ...(await exited), timedOut: true };
}

/** Resident memory of a process in bytes, from /proc (Linux); undefined elsewhere. */
export async function rssOf(pid: number): Promise<number | undefined> {
  try {
    const kib = /^VmRSS:\s+(\d+) kB/m.exec(await readFile(`/proc/${pid}/status`, 'utf8'))?.[1];
    return kib === undefined ? undefined : Number(kib) * 1024;
  } catch {
    return undefined;
  }
}

/** The last lines of a log, for an error message. */
export async function tail(file: string, lines = 5): Promise<string> {
  const text = await readFile(file, 'utf8').catch(() => '');
  return text.trimEnd().split('\n').slice(-lines).join('\n') || '(no output)';
}

/** The status of one `GET` of `path` on a fresh connection, or undefined when nothing answers yet. */
function statusOf(url: string, path: string): Promise<number | undefined> {
  return new Promise((resolve) => {
    const request = http.get(`${url}${path}`, { agent: false }, (response) => {
      response.resume();
      resolve(response.statusCode);
    });
    request.on('error', () => resolve(undefined));
  });
}

/** A loopback port nothing listens on now (the server binds it a moment later). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as net.AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}
