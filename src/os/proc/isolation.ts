import type { Logger } from 'pino';
import { cpuSecondsFor, limitedBashScript, NO_BASH_LIMITS, ulimitCommands, type BashLimits } from './limits.js';
import { CallCgroups, type CallCgroup } from './call-cgroup.js';
import type { CgroupEvents } from './limit-notes.js';
import { commandEnv, KILL_GRACE_MS, runProcess, type RunOptions, type RunOutcome } from './process.js';
import { ResidentReaper } from './reaper.js';
import { BWRAP, bwrapArgs, hiddenPaths, sandboxUnavailableReason, type HiddenPaths } from './sandbox.js';
import { SparePool } from './spare-pool.js';
import { WaitingShell, type ShellStart } from './waiting-shell.js';

/** TOOLPORT_BASH_SANDBOX: `auto` uses the sandbox when it works here, `true` requires it, `false` never uses it. */
export type BashSandboxSetting = boolean | 'auto';

/** What a caller of `BashIsolation.run` decides; the isolation decides the program, environment and kill grace. */
export type BashRunOptions = Omit<RunOptions, 'env' | 'killGraceMs' | 'signalOnServerExit'>;

/** How a Bash run ended, with what its limits saw. */
export interface BashOutcome extends RunOutcome {
  /** The CPU seconds each process ran under (0: none). */
  cpuSeconds: number;
  /** What the call's cgroup counted, when it had one. */
  cgroup?: CgroupEvents;
}

/** Which of the `BashLimits` hold here, and by what; `none` where this mode or machine offers no way. */
export interface EnforcedLimits {
  /** A pids cgroup per call; RLIMIT_NPROC in the sandbox (one user namespace per call, not binding root). */
  processes: 'cgroup' | 'rlimit' | 'none';
  /** A memory cgroup per call. */
  memory: 'cgroup' | 'none';
  /** Sized tmpfs for the sandbox's /tmp and /dev/shm. */
  tmp: 'tmpfs' | 'none';
  /** Why a bound that is set is not enforced, for the start-up log. */
  notes: string[];
}

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
  /** The bounds each call runs under. RLIMIT_FSIZE, RLIMIT_CPU and RLIMIT_AS hold in every mode. */
  readonly limits: BashLimits;
  readonly enforced: EnforcedLimits;
  /** Runs `bash -c command` this way, in a process group of its own, within the limits; never rejects. */
  run(command: string, options: BashRunOptions): Promise<BashOutcome>;
  /** Ends the shells started ahead of calls and the reaper; calls still running end as on shutdown. */
  close(): void;
}

export interface BashIsolationOptions {
  workspaceRoot: string;
  setting: BashSandboxSetting;
  /** Files the server reads secrets or configuration from; the sandbox hides them (see `hiddenPaths`). */
  secretFiles?: readonly string[];
  /** Directories the sandbox hides whole: the other keys' workspaces. */
  hiddenDirectories?: readonly string[];
  /** Bounds on each call (default: none). */
  limits?: BashLimits;
  /** Shells (sandboxes) started ahead of calls, at most: the concurrency of the tool (default 4; 0 for none). */
  spares?: number;
}

const DEFAULT_SPARES = 4;
// A minute without a call ends the waiting sandboxes; the next call starts them again.
const SPARE_IDLE_MS = 60_000;

/**
 * Decides how Bash runs: tries the sandbox unless it is switched off, falls back (with `auto`)
 * to running unconfined under the subreaper, or to the process group alone when that cannot run
 * either. With `true`, a sandbox that does not work is an Error that says why. The limits are
 * set up here too: a cgroup per call where the server can make one (see `CallCgroups`), hard
 * resource limits set by a `bash` prelude before the command, and the sandbox's sized tmpfs.
 */
export async function chooseBashIsolation(options: BashIsolationOptions): Promise<BashIsolation> {
  const { workspaceRoot: root, setting } = options;
  const limits = options.limits ?? NO_BASH_LIMITS;
  const { cgroups, notes } = await openCgroups(limits);
  const pidsCgroup = cgroups?.controllers.includes('pids') ?? false;
  const memoryCgroup = cgroups?.controllers.includes('memory') ?? false;
  let why = 'TOOLPORT_BASH_SANDBOX=false';
  if (setting !== false) {
    const hidden = await hiddenPaths(root, options.secretFiles ?? [], options.hiddenDirectories);
    const unavailable = await sandboxUnavailableReason(root, BWRAP, hidden, limits.tmpSize);
    if (unavailable === undefined) {
      const rootUser = process.getuid?.() === 0;
      const enforced: EnforcedLimits = {
        processes: pidsCgroup ? 'cgroup' : limits.maxProcesses > 0 && !rootUser ? 'rlimit' : 'none',
        memory: memoryCgroup ? 'cgroup' : 'none',
        tmp: limits.tmpSize > 0 ? 'tmpfs' : 'none',
        notes: [
          ...notes,
          ...(limits.maxProcesses > 0 && !pidsCgroup && rootUser
            ? ['the server runs as root, which RLIMIT_NPROC does not bind: no process limit without a pids cgroup']
            : []),
        ],
      };
      const args = bwrapArgs(root, hidden, limits.tmpSize);
      const reason = `TOOLPORT_BASH_SANDBOX=${String(setting)} and a trial run of bubblewrap succeeded`;
      const sandbox = { mode: 'sandbox', reaping: 'pid-namespace', hidden, limits, enforced } as const;
      const reaper = await ResidentReaper.start().catch((err: unknown) => err as Error);
      if (reaper instanceof Error) {
        // Without the reaper, each call starts its sandbox itself, on the call's path.
        enforced.notes.push(`each call starts its own sandbox, none are started ahead (the reaper cannot run: ${reaper.message})`);
        return {
          ...sandbox,
          reason,
          run: (command, options) => runLimited(limits, cgroups, options, (cgroup, cpuSeconds) => runFresh(args, limits, command, cgroup, cpuSeconds, options)),
          close: () => {},
        };
      }
      // The sandbox has a private /tmp; a TMPDIR pointing elsewhere would be read-only there.
      const shell = { reaper, wrapper: [BWRAP, ...args, '--'], cwd: root, env: commandEnv({ TMPDIR: '/tmp' }) };
      // RLIMIT_NPROC is set inside: set on bwrap, it would also cap the user's processes outside the sandbox's namespace.
      return { ...sandbox, reason, ...waitingShells(shell, cgroups, limits, true, options.spares) };
    }
    if (setting === true) throw new Error(`TOOLPORT_BASH_SANDBOX=true but bubblewrap (bwrap) is not available: ${unavailable}`);
    why = `TOOLPORT_BASH_SANDBOX=auto and bubblewrap does not work here: ${unavailable}`;
  }

  const noHidden: HiddenPaths = { directories: [], files: [] };
  const enforced: EnforcedLimits = {
    processes: pidsCgroup ? 'cgroup' : 'none',
    memory: memoryCgroup ? 'cgroup' : 'none',
    tmp: 'none',
    notes: [
      ...notes,
      ...(limits.maxProcesses > 0 && !pidsCgroup
        ? ["without the sandbox RLIMIT_NPROC would count every process of the server's user, not the call's: no process limit without a pids cgroup"]
        : []),
      ...(limits.tmpSize > 0 ? ["without the sandbox, commands share the machine's /tmp: TOOLPORT_BASH_TMP_SIZE does not apply"] : []),
      ...(process.getuid?.() === 0 ? ['the server runs as root: without the sandbox a command can raise its resource limits and leave its cgroup'] : []),
    ],
  };
  let reaper: ResidentReaper;
  try {
    reaper = await ResidentReaper.start();
  } catch (err) {
    // In the command's own shell: the cgroup first (before it forks), then the resource limits.
    const unconfined = (command: string, cgroup: CallCgroup | undefined, cpuSeconds: number): string[] =>
      bashArgs(command, [...(cgroup ? [cgroup.joinCommand()] : []), ...ulimitCommands(limits, cpuSeconds, false)]);
    return {
      mode: 'unconfined',
      reaping: 'process-group',
      reason: `${why}; and the subreaper cannot run, so processes that leave the command's process group are not killed: ${(err as Error).message}`,
      hidden: noHidden,
      limits,
      enforced,
      run: (command, options) =>
        runLimited(limits, cgroups, options, (cgroup, cpuSeconds) =>
          runProcess('bash', unconfined(command, cgroup, cpuSeconds), {
            ...options,
            env: commandEnv(),
            killGraceMs: KILL_GRACE_MS,
            signalOnServerExit: 'SIGKILL',
          }),
        ),
      close: () => {},
    };
  }
  return {
    mode: 'unconfined',
    reaping: 'subreaper',
    reason: why,
    hidden: noHidden,
    limits,
    enforced,
    ...waitingShells({ reaper, wrapper: [], cwd: root, env: commandEnv() }, cgroups, limits, false, options.spares),
  };
}

/** `bash` arguments that run `prelude` and then `command` in a fresh `bash -c`, or `command` alone without a prelude. */
function bashArgs(command: string, prelude: readonly string[]): string[] {
  return prelude.length === 0 ? ['-c', command] : ['-c', limitedBashScript(prelude), 'bash', command];
}

/** The per-call cgroups the limits need, when the server can make them, and why not where it cannot. */
async function openCgroups(limits: BashLimits): Promise<{ cgroups: CallCgroups | undefined; notes: string[] }> {
  if (limits.maxProcesses === 0 && limits.maxMemory === 0) return { cgroups: undefined, notes: [] };
  try {
    const { cgroups, unusable } = await CallCgroups.open(limits);
    return { cgroups, notes: unusable.map((why) => `no ${why.split(':')[0]} cgroup per call (${why})`) };
  } catch (err) {
    const notes = [`no cgroup per call (${(err as Error).message})`];
    if (limits.maxMemory > 0)
      notes.push('TOOLPORT_BASH_MAX_MEMORY does not apply without a memory cgroup (TOOLPORT_BASH_MAX_ADDRESS_SPACE bounds each process instead)');
    return { cgroups: undefined, notes };
  }
}

/**
 * How calls run under the reaper: each in a shell started ahead of it (see `WaitingShell`), one
 * pool of them per isolation. The limits are those of a shell started for the call: the cgroup
 * joined before anything started, the resource limits set in the shell before the command.
 * `processes` sets RLIMIT_NPROC too (in the sandbox only: see `ulimitCommands`).
 */
function waitingShells(
  shell: Omit<ShellStart, 'cgroup'>,
  cgroups: CallCgroups | undefined,
  limits: BashLimits,
  processes: boolean,
  spares = DEFAULT_SPARES,
): Pick<BashIsolation, 'run' | 'close'> {
  const pool = new SparePool({
    start: async (onEnd) => WaitingShell.start({ ...shell, cgroup: await cgroups?.create() }, onEnd),
    size: spares,
    idleMs: SPARE_IDLE_MS,
  });
  const run: BashIsolation['run'] = async (command, options) => {
    const cpuSeconds = cpuSecondsFor(limits, options.timeoutMs);
    const notRun = { exitCode: null, exitSignal: null, timedOut: false, cpuSeconds };
    if (options.signal?.aborted) return { ...notRun, abortReason: options.signal.reason };
    // As spawn refuses them: no program can receive a NUL byte in an argument.
    if (command.includes('\0')) {
      const error = Object.assign(new TypeError('The command must be a string without null bytes'), { code: 'ERR_INVALID_ARG_VALUE' });
      return { ...notRun, spawnError: error };
    }
    const prelude = ulimitCommands(limits, cpuSeconds, processes).join('; ');
    try {
      return await pool.use(async (waiting) => ({ ...(await waiting.run(prelude, command, options)), cpuSeconds }));
    } catch (err) {
      return { ...notRun, spawnError: err as NodeJS.ErrnoException };
    }
  };
  const close = (): void => {
    pool.close();
    shell.reaper.close();
  };
  return { run, close };
}

/** Runs `command` in a sandbox started for it, on the call's path: the way without the reaper. */
function runFresh(
  args: readonly string[],
  limits: BashLimits,
  command: string,
  cgroup: CallCgroup | undefined,
  cpuSeconds: number,
  options: BashRunOptions,
): Promise<RunOutcome> {
  // RLIMIT_NPROC is set inside: set on bwrap, it would also cap the user's processes outside the sandbox's namespace.
  const inner = ['bash', ...bashArgs(command, ulimitCommands(limits, cpuSeconds, true))];
  const sandboxed = [BWRAP, ...args, '--', ...inner];
  // The cgroup is joined outside, where /sys is writable, before bwrap forks anything.
  const [file, ...rest] = cgroup ? ['bash', '-c', `${cgroup.joinCommand()}; exec "$@"`, 'bash', ...sandboxed] : sandboxed;
  // The sandbox has a private /tmp; a TMPDIR pointing elsewhere would be read-only there.
  return runProcess(file!, rest, {
    ...options,
    env: commandEnv({ TMPDIR: '/tmp' }),
    killGraceMs: KILL_GRACE_MS,
    signalOnServerExit: 'SIGKILL',
    endsWithLeader: true,
  });
}

/** Runs one call in a cgroup of its own (when there are cgroups), then reads what the cgroup counted and releases it. */
async function runLimited(
  limits: BashLimits,
  cgroups: CallCgroups | undefined,
  options: BashRunOptions,
  launch: (cgroup: CallCgroup | undefined, cpuSeconds: number) => Promise<RunOutcome>,
): Promise<BashOutcome> {
  const cpuSeconds = cpuSecondsFor(limits, options.timeoutMs);
  let cgroup: CallCgroup | undefined;
  try {
    cgroup = await cgroups?.create();
  } catch (err) {
    return { exitCode: null, exitSignal: null, timedOut: false, spawnError: err as NodeJS.ErrnoException, cpuSeconds };
  }
  try {
    const outcome = await launch(cgroup, cpuSeconds);
    return { ...outcome, cpuSeconds, ...(cgroup ? { cgroup: await cgroup.events() } : {}) };
  } finally {
    void cgroup?.release();
  }
}

/** The start-up log line that says which mode runs and why: info in the sandbox, a warning without. */
export function logBashIsolation(log: Logger, isolation: BashIsolation): void {
  const { mode, reaping, reason, hidden, limits, enforced } = isolation;
  if (mode === 'sandbox') {
    log.info({ bashSandbox: 'on', reaping, reason, hidden, limits, enforced }, 'Bash runs commands in the bubblewrap sandbox');
    return;
  }
  log.warn(
    { bashSandbox: 'off', reaping, reason, limits, enforced },
    "Bash runs commands without a sandbox: they can read and write whatever the server's user can, reach the network, and read the server's secrets",
  );
}
