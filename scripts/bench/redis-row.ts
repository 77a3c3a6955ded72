import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { cpus } from 'node:os';
import { createInterface } from 'node:readline';
import { freePort } from '../../test/support/ports.js';
import { pinned, type Pinning } from './pinning.js';
import { HIGH_RATE_LIMIT, type ThroughputRow } from './rows.js';

/** The row's id and label, for --only, before the redis-server it needs is started. */
export const REDIS_ROW = { id: 'echo-keyed-redis', label: 'POST /tools/Echo, key, audit line, metrics, rate limit counted in Redis' };

/** The Redis row and what it needs: the row, a line on where Redis runs, and how to stop it. */
export interface RedisRow {
  /**
   * `POST /tools/Echo` with the key of `echo-keyed`, counted in Redis (TOOLPORT_REDIS_URL), against
   * the same toolport counting in the process: issue 22 asks for no more than 10% between them.
   */
  row: ThroughputRow;
  /** Where redis-server runs: a CPU of its own, or why not. */
  note: string;
  stop(): Promise<void>;
}

/**
 * Starts a redis-server of the bench's own (no persistence, loopback) on a CPU that neither the
 * server under test nor the load generator uses, when the machine has one; on two CPUs it shares
 * them. Says where it runs through `say`; resolves to undefined, saying why, when redis-server is
 * not installed (the row is then left out).
 */
export async function startRedisRow(pinning: Pinning, say: (line: string) => void): Promise<RedisRow | undefined> {
  if (spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).error !== undefined) {
    say(`bench: ${REDIS_ROW.id} left out: redis-server is not installed (scripts/install-system-deps.sh installs it)`);
    return undefined;
  }
  const port = await freePort();
  const cpu = cpus()
    .map((_, i) => i)
    .find((i) => pinning.serverCpu !== undefined && i !== pinning.serverCpu && i !== pinning.loadCpu);
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'no'];
  let child = cpu === undefined ? undefined : await launch(pinned(cpu, 'redis-server', args));
  let note = `redis-server on CPU ${cpu} of its own (taskset)`;
  if (child === undefined) {
    // No spare CPU, or taskset may not use it (a cpuset): run it where the scheduler puts it.
    child = await launch({ command: 'redis-server', args });
    if (child === undefined) throw new Error('redis-server did not start');
    const why =
      cpu !== undefined
        ? `taskset could not use CPU ${cpu}`
        : pinning.serverCpu === undefined
          ? 'nothing is pinned'
          : 'no CPU is left beside the server and the load generator';
    note = `redis-server not pinned: ${why}; it shares the CPUs with them`;
  }
  say(`bench: ${REDIS_ROW.id}: ${note}`);
  const url = `redis://127.0.0.1:${port}`;
  const keyed = (ctx: { apiKey: string }): Record<string, string> => ({ TOOLPORT_API_KEYS: ctx.apiKey });
  const running = child;
  return {
    row: {
      ...REDIS_ROW,
      request: { method: 'POST', path: '/tools/Echo', headers: { 'content-type': 'application/json' }, body: '{"text":"hello"}' },
      keyed: true,
      rateLimit: HIGH_RATE_LIMIT,
      goal: { text: '0.9x, counting in the process', bound: 'at least', ratio: 0.9 },
      env: (ctx) => ({ ...keyed(ctx), TOOLPORT_REDIS_URL: url }),
      baseline: { name: 'toolport counting in the process', env: keyed },
    },
    note,
    async stop() {
      if (running.exitCode !== null || running.signalCode !== null) return;
      const exited = new Promise((resolve) => running.once('exit', resolve));
      running.kill('SIGTERM');
      await exited;
    },
  };
}

/** Spawns redis-server and resolves once it accepts connections, or undefined when it exits first (or stays silent 10 s). */
async function launch({ command, args }: { command: string; args: string[] }): Promise<ChildProcess | undefined> {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'ignore'] });
  const ready = await new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(false), 10_000);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve(false);
    });
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if (!line.includes('Ready to accept connections')) return;
      clearTimeout(timer);
      resolve(true);
    });
  });
  if (ready) return child;
  child.kill('SIGKILL');
  return undefined;
}
