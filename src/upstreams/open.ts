import path from 'node:path';
import type { Logger } from 'pino';
import type { ToolRegistry } from '../core/registry.js';
import { VERSION } from '../infra/version.js';
import { loadUpstreams, type UpstreamSpec } from './config.js';
import { NO_UPSTREAM_LIMITS, UpstreamConfinement, type UpstreamLimits } from './confinement.js';
import { LOCK_FILE_NAME, readLock } from './lock/lock.js';
import { UpstreamSource, type UpstreamSourceOptions } from './source.js';

export { upstreamExposure } from './exposure.js';

export interface UpstreamsConfig {
  /** TOOLPORT_UPSTREAMS: the file; undefined, no upstreams. */
  upstreams: string | undefined;
  /** TOOLPORT_UPSTREAMS_LOCK; undefined: `toolport.lock.json` beside the upstreams file. */
  upstreamsLock: string | undefined;
  /** TOOLPORT_UPSTREAM_SANDBOX (default `auto`). */
  upstreamSandbox?: 'auto' | 'true' | 'false';
  /** The server's files no upstream may read in the sandbox (`Config`'s, when the caller has them). */
  apiKeysFile?: string | undefined;
  plugins?: readonly string[];
  permissionsFile?: string | undefined;
  oauth?: { mappingFile?: string | undefined } | undefined;
  /** TOOLPORT_UPSTREAM_MAX_PROCESSES, _MAX_MEMORY, _TMP_SIZE (default: none). */
  upstreamLimits?: UpstreamLimits;
}

/**
 * The files the server reads its secrets and configuration from, which no stdio upstream may read
 * in the sandbox: the upstreams file and its lock, the keys file, the plug-ins given as paths
 * (package names are left alone), the permissions file and the OAuth mapping file.
 */
function serverFiles(config: UpstreamsConfig, cwd: string): string[] {
  const plugins = (config.plugins ?? []).filter((spec) => spec.startsWith('.') || spec.startsWith('/'));
  const files = [config.upstreams, lockPath(config, cwd), config.apiKeysFile, ...plugins, config.permissionsFile, config.oauth?.mappingFile];
  return files.filter((file): file is string => file !== undefined).map((file) => path.resolve(cwd, file));
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

export interface OpenUpstreamsOptions extends Pick<UpstreamSourceOptions, 'baseEnv'>, Partial<Pick<UpstreamSourceOptions, 'onState' | 'upstream'>> {
  /** Directories no stdio upstream may read besides the server's files (see `serverFiles`): the keys' workspaces. */
  hidden?: readonly string[];
}

/**
 * The upstreams of a server, their tools going into `registry`: the lock read (and its absence
 * said once), the stdio upstreams' sandbox and supervisor tried once (see `UpstreamConfinement`;
 * where the sandbox does not work they run with the server's rights, and the log says why), the
 * eager upstreams started and waited for once. Undefined without upstreams.
 */
export async function openUpstreams(
  specs: readonly UpstreamSpec[],
  config: UpstreamsConfig,
  registry: ToolRegistry,
  log: Logger,
  options: OpenUpstreamsOptions,
  cwd = process.cwd(),
): Promise<UpstreamSource | undefined> {
  if (specs.length === 0) return undefined;
  const file = lockPath(config, cwd)!;
  const lock = await readLock(file);
  if (lock === undefined) {
    log.info({ lockFile: file }, 'no upstream lock file: every upstream tool definition is served as listed (toolport upstreams lock pins them)');
  }
  const { hidden = [], ...sourceOptions } = options;
  const confinement = specs.some((spec) => spec.transport === 'stdio')
    ? await confine(config.upstreamSandbox ?? 'auto', [...serverFiles(config, cwd), ...hidden], config.upstreamLimits ?? NO_UPSTREAM_LIMITS, log)
    : undefined;
  const source = new UpstreamSource(specs, registry, { ...sourceOptions, confinement, log, version: VERSION, lock });
  await source.start();
  return source;
}

/**
 * How stdio upstreams run, said once in the log: in the sandbox, where it works and is not turned
 * off; else under the supervisor alone, with the server's rights (a warning); else, where Perl is
 * missing, as plain process groups whose setsid processes can outlive them (a warning naming why),
 * and then the result is why there is no sandbox. Throws with TOOLPORT_UPSTREAM_SANDBOX=true
 * where the sandbox does not work.
 */
async function confine(
  setting: 'auto' | 'true' | 'false',
  hidden: readonly string[],
  limits: UpstreamLimits,
  log: Logger,
): Promise<UpstreamConfinement | string> {
  let unconfined = 'TOOLPORT_UPSTREAM_SANDBOX=false';
  if (setting !== 'false') {
    const confinement = await UpstreamConfinement.open(hidden, limits);
    if (typeof confinement === 'object') {
      log.info({ mechanism: 'landlock', hidden: confinement.hidden, limits }, 'stdio upstreams run in the Landlock sandbox');
      return confinement;
    }
    if (setting === 'true') throw new Error(`TOOLPORT_UPSTREAM_SANDBOX=true but the sandbox cannot run here: ${confinement}`);
    unconfined = confinement;
  }
  const supervisor = await UpstreamConfinement.supervised(unconfined, limits);
  if (typeof supervisor === 'string') {
    log.warn(
      { reason: unconfined, supervisor },
      "stdio upstreams run without a sandbox or the reaper's supervisor: they can read what the server's user can, the server's keys included, and what they start with setsid can outlive them",
    );
    return unconfined;
  }
  log.warn(
    { reason: unconfined, limits: supervisor.limits },
    "stdio upstreams run without a sandbox, under the reaper's supervisor: they can read what the server's user can, the server's keys included; what they start ends with them",
  );
  return supervisor;
}
