import path from 'node:path';
import type { Logger } from 'pino';
import type { ToolRegistry } from '../core/registry.js';
import { VERSION } from '../infra/version.js';
import { loadUpstreams, type UpstreamSpec } from './config.js';
import { LOCK_FILE_NAME, readLock } from './lock.js';
import { UpstreamSource, type UpstreamSourceOptions } from './source.js';

export { upstreamExposure } from './exposure.js';

export interface UpstreamsConfig {
  /** TOOLPORT_UPSTREAMS: the file; undefined, no upstreams. */
  upstreams: string | undefined;
  /** TOOLPORT_UPSTREAMS_LOCK; undefined: `toolport.lock.json` beside the upstreams file. */
  upstreamsLock: string | undefined;
}

/** The lock file's path for this configuration (undefined without upstreams). */
export function lockPath(config: UpstreamsConfig, cwd = process.cwd()): string | undefined {
  if (config.upstreams === undefined) return undefined;
  return path.resolve(cwd, config.upstreamsLock ?? path.join(path.dirname(config.upstreams), LOCK_FILE_NAME));
}

/** Reads the upstreams file (values from `env`): the specs, or [] without one. Throws `UpstreamConfigError`. */
export async function readUpstreamSpecs(config: UpstreamsConfig, env: Record<string, string | undefined>, cwd = process.cwd()): Promise<UpstreamSpec[]> {
  return config.upstreams === undefined ? [] : loadUpstreams(config.upstreams, env, cwd);
}

/**
 * The upstreams of a server, their tools going into `registry`: the lock read (and its absence
 * said once), the eager upstreams started and waited for once. Undefined without upstreams.
 */
export async function openUpstreams(
  specs: readonly UpstreamSpec[],
  config: UpstreamsConfig,
  registry: ToolRegistry,
  log: Logger,
  options: Pick<UpstreamSourceOptions, 'baseEnv'> & Partial<Pick<UpstreamSourceOptions, 'onState' | 'upstream'>>,
  cwd = process.cwd(),
): Promise<UpstreamSource | undefined> {
  if (specs.length === 0) return undefined;
  const file = lockPath(config, cwd)!;
  const lock = await readLock(file);
  if (lock === undefined) {
    log.info({ lockFile: file }, 'no upstream lock file: every upstream tool definition is served as listed (toolport upstreams lock pins them)');
  }
  const source = new UpstreamSource(specs, registry, { ...options, log, version: VERSION, lock });
  await source.start();
  return source;
}
