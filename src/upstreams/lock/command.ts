import { pino } from 'pino';
import { loadConfig } from '../../config/config.js';
import { createLogger } from '../../infra/logger.js';
import { VERSION } from '../../infra/version.js';
import { checkDefinitions, type DefinitionRefusal, type UpstreamToolDefinition } from '../definitions.js';
import { diffLock, lockOf, readLock, writeLock } from './lock.js';
import { lockPath, readUpstreamSpecs } from '../open.js';
import { Upstream } from '../upstream.js';

/**
 * `toolport upstreams lock`: lists every upstream's tools now and pins their definitions in the
 * lock file (all upstreams must answer: a lock missing one would hold its tools back unseen).
 * `toolport upstreams diff`: shows how what they list now differs from the lock, and the tools the
 * checks refuse, hidden characters written out; exit 1 when anything is shown.
 */
export async function runLockCommand(action: 'lock' | 'diff', env: Record<string, string | undefined>): Promise<number> {
  const config = loadConfig(env);
  if (config.upstreams === undefined) throw new Error('no upstreams are configured: set TOOLPORT_UPSTREAMS or pass --upstreams FILE');
  const specs = await readUpstreamSpecs(config, env);
  const file = lockPath(config)!;
  // Its failures are the command's own message; the log says more only when LOG_LEVEL asks.
  const log = createLogger(env.LOG_LEVEL ? config.logLevel : 'error', { destination: pino.destination(2) });
  const current = new Map<string, UpstreamToolDefinition[]>();
  const refusals = new Map<string, DefinitionRefusal[]>();
  const failures: string[] = [];
  await Promise.all(
    specs.map(async (spec) => {
      let listed: readonly unknown[] = [];
      const upstream = new Upstream(spec, {
        log: log.child({ upstream: spec.name }),
        version: VERSION,
        onTools: (tools) => (listed = tools),
        relistMs: 0,
        baseEnv: env,
      });
      try {
        await upstream.start();
        const { tools, refused } = checkDefinitions(spec, [...listed]);
        for (const { upstreamName, reason } of refused) process.stderr.write(`toolport: upstream "${spec.name}": tool ${upstreamName} left out: ${reason}\n`);
        current.set(spec.name, tools);
        refusals.set(spec.name, refused);
      } catch (err) {
        failures.push((err as Error).message);
      } finally {
        await upstream.stop();
      }
    }),
  );
  if (failures.length > 0) throw new Error(`${failures.join(' ')} Nothing was ${action === 'lock' ? 'written' : 'compared'}.`);
  if (action === 'lock') {
    const lock = lockOf(current);
    await writeLock(file, lock);
    const count = [...current.values()].reduce((n, tools) => n + tools.length, 0);
    process.stdout.write(`Pinned ${count} tool definition${count === 1 ? '' : 's'} of ${current.size} upstream${current.size === 1 ? '' : 's'} in ${file}\n`);
    return 0;
  }
  const diff = diffLock(await readLock(file), current, refusals);
  process.stdout.write(diff.text);
  return diff.changed.length + diff.added.length + diff.removed.length + diff.refused.length > 0 ? 1 : 0;
}
