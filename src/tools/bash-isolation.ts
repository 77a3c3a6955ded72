import type { Logger } from 'pino';
import { commandEnv, KILL_GRACE_MS, runProcess, type RunOptions, type RunOutcome } from './process.js';
import { ResidentReaper } from './reaper.js';
import { BWRAP, hiddenPaths, sandboxedBash, sandboxUnavailableReason, type HiddenPaths } from './sandbox.js';

/** TOOLPORT_BASH_SANDBOX: `auto` uses the sandbox when it works here, `true` requires it, `false` never uses it. */
export type BashSandboxSetting = boolean | 'auto';

/** What a caller of `BashIsolation.run` decides; the isolation decides the program, environment and kill grace. */
export type BashRunOptions = Omit<RunOptions, 'env' | 'killGraceMs' | 'signalOnServerExit'>;

/** How the Bash tool runs a command, decided once at start-up. */
export interface BashIsolation {
  /** `sandbox`: bubblewrap; `unconfined`: with the server's own rights. */
  readonly mode: 'sandbox' | 'unconfined';
  /**
   * How nothing a command started outlives it: the sandbox's PID namespace; the subreaper (a
   * supervisor that inherits every orphan); or, failing both, only the command's process group,
   * which setsid and daemons leave.
   */
  readonly reaping: 'pid-namespace' | 'subreaper' | 'process-group';
  /** Why this mode runs, for the start-up log. */
  readonly reason: string;
  /** What the sandbox hides (empty when unconfined). */
  readonly hidden: HiddenPaths;
  /** Runs `bash -c command` this way, in a process group of its own; never rejects. */
  run(command: string, options: BashRunOptions): Promise<RunOutcome>;
}

export interface BashIsolationOptions {
  workspaceRoot: string;
  setting: BashSandboxSetting;
  /** Files the server reads secrets or configuration from; the sandbox hides them (see `hiddenPaths`). */
  secretFiles?: readonly string[];
  /** Directories the sandbox hides whole: the other keys' workspaces. */
  hiddenDirectories?: readonly string[];
}

/**
 * Decides how Bash runs: tries the sandbox unless it is switched off, falls back (with `auto`)
 * to running unconfined under the subreaper, or to the process group alone when that cannot run
 * either. With `true`, a sandbox that does not work is an Error that says why.
 */
export async function chooseBashIsolation(options: BashIsolationOptions): Promise<BashIsolation> {
  const { workspaceRoot: root, setting } = options;
  let why = 'TOOLPORT_BASH_SANDBOX=false';
  if (setting !== false) {
    const hidden = await hiddenPaths(root, options.secretFiles ?? [], options.hiddenDirectories);
    const unavailable = await sandboxUnavailableReason(root, BWRAP, hidden);
    if (unavailable === undefined) {
      return {
        mode: 'sandbox',
        reaping: 'pid-namespace',
        reason: `TOOLPORT_BASH_SANDBOX=${String(setting)} and a trial run of bubblewrap succeeded`,
        hidden,
        run: (command, options) => {
          const { file, args } = sandboxedBash(root, command, hidden);
          // The sandbox has a private /tmp; a TMPDIR pointing elsewhere would be read-only there.
          return runProcess(file, args, { ...options, env: commandEnv({ TMPDIR: '/tmp' }), killGraceMs: KILL_GRACE_MS, signalOnServerExit: 'SIGKILL' });
        },
      };
    }
    if (setting === true) throw new Error(`TOOLPORT_BASH_SANDBOX=true but bubblewrap (bwrap) is not available: ${unavailable}`);
    why = `TOOLPORT_BASH_SANDBOX=auto and bubblewrap does not work here: ${unavailable}`;
  }

  const noHidden: HiddenPaths = { directories: [], files: [] };
  let reaper: ResidentReaper;
  try {
    reaper = await ResidentReaper.start();
  } catch (err) {
    return {
      mode: 'unconfined',
      reaping: 'process-group',
      reason: `${why}; and the subreaper cannot run, so processes that leave the command's process group are not killed: ${(err as Error).message}`,
      hidden: noHidden,
      run: (command, options) => runProcess('bash', ['-c', command], { ...options, env: commandEnv(), killGraceMs: KILL_GRACE_MS, signalOnServerExit: 'SIGKILL' }),
    };
  }
  return {
    mode: 'unconfined',
    reaping: 'subreaper',
    reason: why,
    hidden: noHidden,
    run: (command, options) => reaper.run('bash', ['-c', command], { ...options, env: commandEnv(), killGraceMs: KILL_GRACE_MS }),
  };
}

/** The start-up log line that says which mode runs and why: info in the sandbox, a warning without. */
export function logBashIsolation(log: Logger, isolation: BashIsolation): void {
  const { mode, reaping, reason, hidden } = isolation;
  if (mode === 'sandbox') {
    log.info({ bashSandbox: 'on', reaping, reason, hidden }, 'Bash runs commands in the bubblewrap sandbox');
    return;
  }
  log.warn(
    { bashSandbox: 'off', reaping, reason },
    "Bash runs commands without a sandbox: they can read and write whatever the server's user can, reach the network, and read the server's secrets",
  );
}
