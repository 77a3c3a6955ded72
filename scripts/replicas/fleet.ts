/**
 * The parts of `npm run test:replicas`, each a real process of its own: redis-server, toolport
 * replicas (`node dist/server.js`), and HAProxy in front of them. Every process started here is
 * tracked by its pid and killed by `stopAll`, whatever happened.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as delay } from 'node:timers/promises';

export const ROOT = path.resolve(import.meta.dirname, '../..');
const START_TIMEOUT_MS = 30_000;

/** A process started here, with its parsed JSON log lines (toolport) or raw lines (others). */
export interface Managed {
  name: string;
  child: ChildProcess;
  lines: Array<Record<string, unknown>>;
  exited: Promise<number | null>;
}

const started: Managed[] = [];

/** Why a part cannot run here, or undefined when every program is installed. */
export function missingPrograms(): string | undefined {
  const missing = ['redis-server', 'haproxy'].filter((program) => spawnSync(program, ['-v'], { stdio: 'ignore' }).error !== undefined);
  return missing.length === 0
    ? undefined
    : `${missing.join(' and ')} not installed (Debian: apt-get install redis-server haproxy; scripts/install-system-deps.sh does it)`;
}

/** `count` distinct loopback ports nothing listens on right now (held together while chosen, so none repeats). */
export async function freePorts(count: number): Promise<number[]> {
  const servers = Array.from({ length: count }, () => createServer());
  await Promise.all(servers.map((server) => new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))));
  const ports = servers.map((server) => (server.address() as { port: number }).port);
  await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
  return ports;
}

/** Starts a program, logging its output to `<logDir>/<name>.log`, and resolves once a line matches `ready` (at once without it). */
export async function launch(
  name: string,
  file: string,
  args: string[],
  options: { env?: NodeJS.ProcessEnv; logDir: string; ready?: (line: string) => boolean },
): Promise<Managed> {
  const child = spawn(file, args, { cwd: ROOT, env: options.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
  const log = createWriteStream(path.join(options.logDir, `${name}.log`), { flags: 'a' });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const managed: Managed = { name, child, lines: [], exited };
  started.push(managed);
  let readyLine: (() => void) | undefined;
  const onLine = (text: string): void => {
    log.write(`${text}\n`);
    let line: Record<string, unknown>;
    try {
      line = JSON.parse(text) as Record<string, unknown>;
    } catch {
      line = { msg: text };
    }
    managed.lines.push(line);
    if (readyLine && options.ready?.(text)) readyLine();
  };
  createInterface({ input: child.stdout! }).on('line', onLine);
  createInterface({ input: child.stderr! }).on('line', onLine);
  if (options.ready === undefined) return managed;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} did not start within ${START_TIMEOUT_MS / 1000} s; see ${name}.log`)), START_TIMEOUT_MS);
    readyLine = () => {
      clearTimeout(timer);
      readyLine = undefined;
      resolve();
    };
    void exited.then((code) => {
      clearTimeout(timer);
      if (readyLine) reject(new Error(`${name} exited with ${code} before it was ready; see ${name}.log`));
    });
  });
  return managed;
}

/** redis-server on `port`, without persistence. */
export function startRedis(port: number, logDir: string): Promise<Managed> {
  return launch('redis', 'redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    logDir,
    ready: (line) => line.includes('Ready to accept connections'),
  });
}

/** A toolport replica: the built server on `port`, with `env` on top of a bare environment. */
export function startToolport(name: string, port: number, env: Record<string, string>, logDir: string): Promise<Managed> {
  return launch(name, process.execPath, ['dist/server.js'], {
    env: { PATH: process.env.PATH, HOME: process.env.HOME, HOST: '127.0.0.1', PORT: String(port), ...env },
    logDir,
    ready: (line) => line.includes('Server listening at'),
  });
}

/**
 * HAProxy in front of the replicas, configured as docs/deployment.md says: requests go to a
 * replica by a consistent hash of their Authorization header, so every call of one key (its
 * background tasks' TaskOutput and TaskStop among them) reaches the replica that holds its tasks,
 * and a replica that goes away or comes back moves only its own keys. Requests without the header
 * (health checks, /readyz) go round robin. A readiness check on /readyz every 250 ms (two failures
 * take a replica out, two successes put it back; a slow answer under load is no failure), and a
 * request that finds a replica gone or draining (no connection, an empty response, a 503
 * SHUTTING_DOWN) is sent to another: `option redispatch` breaks the hash's persistence for that
 * retry. Those are safe to repeat: such a call never ran. The Host the check sends is a local
 * one, which a server on loopback requires.
 */
export async function startHaproxy(port: number, replicas: readonly number[], dir: string): Promise<Managed> {
  const config = path.join(dir, 'haproxy.cfg');
  await writeFile(
    config,
    [
      'global',
      '  maxconn 512',
      'defaults',
      '  mode http',
      '  timeout connect 1s',
      '  timeout client 60s',
      '  timeout server 60s',
      '  timeout check 2s',
      '  retries 3',
      '  option redispatch 1',
      '  retry-on conn-failure empty-response 503',
      '  option http-buffer-request',
      'frontend toolport',
      `  bind 127.0.0.1:${port}`,
      '  default_backend replicas',
      'backend replicas',
      '  balance hdr(Authorization)',
      '  hash-type consistent',
      '  option httpchk',
      '  http-check send meth GET uri /readyz ver HTTP/1.1 hdr Host localhost',
      '  http-check expect status 200',
      '  default-server inter 250ms fall 2 rise 2',
      ...replicas.map((replica, i) => `  server r${i + 1} 127.0.0.1:${replica} check`),
      '',
    ].join('\n'),
  );
  const haproxy = await launch('haproxy', 'haproxy', ['-f', config, '-db'], { logDir: dir });
  // No line says "ready"; the port answering does, while haproxy still runs (it exits when it cannot bind).
  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    const up = await fetch(`http://127.0.0.1:${port}/healthz`).then(
      (res) => res.ok,
      () => false,
    );
    await delay(100);
    if (haproxy.child.exitCode !== null) throw new Error(`haproxy exited with ${haproxy.child.exitCode}; see haproxy.log`);
    if (up) return haproxy;
    if (Date.now() > deadline) throw new Error('haproxy did not answer within 30 s; see haproxy.log');
    await delay(100);
  }
}

/** Kills every process started here that is still running, by its pid. */
export async function stopAll(): Promise<void> {
  for (const { child } of started) {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGCONT');
      child.kill('SIGKILL');
    }
  }
  await Promise.all(started.map((m) => m.exited));
}
