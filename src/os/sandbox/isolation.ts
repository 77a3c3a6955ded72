import type { Logger } from 'pino';
import { cpuSecondsFor, limitedBashScript, NO_BASH_LIMITS, ulimitCommands, type BashLimits } from './limits.js';
import { CallCgroups, type CallCgroup } from './call-cgroup.js';
import type { CgroupEvents } from './limit-notes.js';
import { commandEnv, KILL_GRACE_MS, runProcess, type RunOptions, type RunOutcome } from '../proc/process.js';
import { ResidentReaper } from '../proc/reaper.js';
import { BWRAP, bwrapArgs, hiddenPaths, sandboxUnavailableReason, type HiddenPaths } from './bubblewrap.js';
import { SparePool } from './spare-pool.js';
import { WaitingShell, type ShellStart } from './waiting-shell.js';
import { LandlockProfile, ownUserNamespace, WATCH_INTERVAL_MS } from './landlock-profile.js';
import { PrivateDirectories } from './private-dirs.js';
import { seccompSupported } from './seccomp.js';

/**
 * TOOLPORT_BASH_SANDBOX: `auto` uses the first sandbox that works here (bubblewrap, then Landlock),
 * `true` requires one, `false` never uses one, `bubblewrap` and `landlock` require that one.
 */
export type BashSandboxSetting = boolean | 'auto' | 'bubblewrap' | 'landlock';

/** What a caller of `BashIsolation.run` decides; the isolation decides the program, environment and kill grace. */
export type BashRunOptions = Omit<RunOptions, 'env' | 'killGraceMs' | 'signalOnServerExit'> & {
  /** CPU seconds each process may use, in place of the limit lowered to the timeout (a background task's lifetime); 0: none. */
  cpuSeconds?: number;
  /** A nice value to run the command at (a background task's, so that it yields the CPU to calls); 0: the server's. */
  niceness?: number;
};

/** How a Bash run ended, with what its limits saw. */
export interface BashOutcome extends RunOutcome {
  /** The CPU seconds each process ran under (0: none). */
  cpuSeconds: number;
  /** What the call's cgroup counted, when it had one. */
  cgroup?: CgroupEvents;
}

/** Which of the `BashLimits` hold here, and by what; `none` where this mode or machine offers no way. */
export interface EnforcedLimits {
  /**
   * A pids cgroup per call; RLIMIT_NPROC in bubblewrap (one user namespace per call, not binding
   * root); or the reaper's watch, which stops a call past the bound (Landlock).
   */
  processes: 'cgroup' | 'rlimit' | 'watch' | 'none';
  /** A memory cgroup per call, or the reaper's watch of the call's resident memory. */
  memory: 'cgroup' | 'watch' | 'none';
  /** Sized tmpfs for bubblewrap's /tmp and /dev/shm, or the watch of a Landlock call's private directory. */
  tmp: 'tmpfs' | 'watch' | 'none';
  /** Why a bound that is set is not enforced, or holds only in part, for the start-up log. */
  notes: string[];
}

/** How the Bash tool runs a command, decided once at start-up. */
export interface BashIsolation {
  /** `sandbox`: bubblewrap or Landlock; `unconfined`: with the server's own rights. */
  readonly mode: 'sandbox' | 'unconfined';
  /** What confines a command: bubblewrap's namespaces, Landlock and seccomp, or nothing. */
  readonly mechanism: 'bubblewrap' | 'landlock' | 'none';
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
  /** Commands may use the network (TOOLPORT_BASH_NETWORK=all). */
  readonly network: boolean;
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
  /** Commands may open network connections (TOOLPORT_BASH_NETWORK=all; default: no network in a sandbox). */
  network?: boolean;
}

const DEFAULT_SPARES = 4;
// A minute without a call ends the waiting sandboxes; the next call starts them again.
const SPARE_IDLE_MS = 60_000;

/** What both sandboxes know of the machine once the limits are set up. */
interface Machine {
  root: string;
  limits: BashLimits;
  cgroups: CallCgroups | undefined;
  notes: string[];
  hidden: HiddenPaths;
  secretFiles: readonly string[];
  hiddenDirectories: readonly string[];
  network: boolean;
  spares: number | undefined;
}

/**
 * Decides how Bash runs: tries bubblewrap, then Landlock, unless the setting rules one or both
 * out; falls back (with `auto`) to running unconfined under the subreaper, or to the process group
 * alone when that cannot run either. With `true`, `bubblewrap` or `landlock`, a sandbox that does
 * not work is an Error that says why. The limits are set up here too: a cgroup per call where the
 * server can make one (see `CallCgroups`), hard resource limits set by a `bash` prelude before the
 * command, bubblewrap's sized tmpfs, and the reaper's watch of a Landlock call.
 */
export async function chooseBashIsolation(options: BashIsolationOptions): Promise<BashIsolation> {
  const { workspaceRoot: root, setting } = options;
  const limits = options.limits ?? NO_BASH_LIMITS;
  const { cgroups, notes } = await openCgroups(limits);
  const network = options.network ?? false;
  const named = `TOOLPORT_BASH_SANDBOX=${String(setting)}`;
  const failures: string[] = [];
  if (setting !== false) {
    const hidden = await hiddenPaths(root, options.secretFiles ?? [], options.hiddenDirectories);
    const machine: Machine = {
      root,
      limits,
      cgroups,
      notes,
      hidden,
      secretFiles: options.secretFiles ?? [],
      hiddenDirectories: options.hiddenDirectories ?? [],
      network,
      spares: options.spares,
    };
    if (setting !== 'landlock') {
      const unavailable = await sandboxUnavailableReason(root, BWRAP, hidden, limits.tmpSize, network);
      if (unavailable === undefined) return bubblewrapIsolation(machine, `${named} and a trial run of bubblewrap succeeded`);
      if (setting === 'bubblewrap') throw new Error(`${named} but bubblewrap (bwrap) is not available: ${unavailable}`);
      failures.push(`bubblewrap does not work here: ${unavailable}`);
    }
    // `bubblewrap` has returned or thrown by now.
    const landlock = await landlockIsolation(machine, `${named} and a trial run of Landlock and seccomp succeeded`, failures);
    if (typeof landlock !== 'string') return landlock;
    if (setting === 'landlock') throw new Error(`${named} but Landlock cannot confine commands here: ${landlock}`);
    failures.push(`Landlock cannot confine commands here: ${landlock}`);
    if (setting === true) throw new Error(`${named} but no sandbox works here: ${failures.join('; ')}`);
  }
  return unconfinedIsolation(
    root,
    limits,
    cgroups,
    notes,
    setting === false ? named : `${named} and no sandbox works here: ${failures.join('; ')}`,
    options.spares,
  );
}

/** Bash in bubblewrap: a sandbox per call, started ahead of it under the reaper (or on its path without one). */
async function bubblewrapIsolation(machine: Machine, reason: string): Promise<BashIsolation> {
  const { root, limits, cgroups, notes, hidden, network } = machine;
  const pidsCgroup = cgroups?.controllers.includes('pids') ?? false;
  const memoryCgroup = cgroups?.controllers.includes('memory') ?? false;
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
  const args = bwrapArgs(root, hidden, limits.tmpSize, network);
  const sandbox = { mode: 'sandbox', mechanism: 'bubblewrap', reaping: 'pid-namespace', hidden, network, limits, enforced, reason } as const;
  const reaper = await ResidentReaper.start().catch((err: unknown) => err as Error);
  if (reaper instanceof Error) {
    // Without the reaper, each call starts its sandbox itself, on the call's path.
    enforced.notes.push(`each call starts its own sandbox, none are started ahead (the reaper cannot run: ${reaper.message})`);
    return {
      ...sandbox,
      run: (command, options) => runLimited(limits, cgroups, options, (cgroup, cpuSeconds) => runFresh(args, limits, command, cgroup, cpuSeconds, options)),
      close: () => {},
    };
  }
  // Without a memory cgroup (a container), the call reaper, outside the sandbox, watches its memory.
  const watchMemory = !memoryCgroup && limits.maxMemory > 0;
  if (watchMemory) {
    enforced.memory = 'watch';
    enforced.notes.push(
      `the reaper stops a call whose processes hold more than ${limits.maxMemory} bytes resident (counted every ${WATCH_INTERVAL_MS} ms); the platform's memory limit bounds a faster allocation`,
    );
  }
  // The sandbox has a private /tmp; a TMPDIR pointing elsewhere would be read-only there.
  const shell = {
    reaper,
    wrapper: [BWRAP, ...args, '--'],
    cwd: root,
    env: commandEnv({ TMPDIR: '/tmp' }),
    confine: watchMemory ? [`watch ${WATCH_INTERVAL_MS} 0 ${limits.maxMemory} 0 /`] : undefined,
  };
  // RLIMIT_NPROC is set inside: set on bwrap, it would also cap the user's processes outside the sandbox's namespace.
  return { ...sandbox, ...waitingShells(shell, cgroups, limits, true, machine.spares) };
}

/**
 * Bash under Landlock and seccomp, applied by the reaper to each command before it starts (see
 * `LandlockProfile`), where no namespace can be made (a container under Docker's or containerd's
 * default profile). Each call gets a private directory as TMPDIR and HOME; the reaper watches its
 * processes, memory and that directory where no cgroup counts them. Returns why not, when a
 * trial call does not come out confined.
 */
async function landlockIsolation(machine: Machine, reason: string, failures: readonly string[]): Promise<BashIsolation | string> {
  const { root, limits, cgroups, notes, network } = machine;
  if (process.platform !== 'linux') return `Landlock is a Linux feature and this is ${process.platform}`;
  // Nothing is private by itself under Landlock: a keys file in /tmp or /run is hidden too.
  const hidden = await hiddenPaths(root, machine.secretFiles, machine.hiddenDirectories, []);
  if (!seccompSupported()) return `the seccomp filter does not know the system calls of ${process.arch}`;
  const pidsCgroup = cgroups?.controllers.includes('pids') ?? false;
  const memoryCgroup = cgroups?.controllers.includes('memory') ?? false;
  const watch = { tasks: pidsCgroup ? 0 : limits.maxProcesses, memory: memoryCgroup ? 0 : limits.maxMemory, tmp: limits.tmpSize };
  const profile = await LandlockProfile.make({ workspaceRoot: root, hidden: [...hidden.directories, ...hidden.files], network, watch });
  const reaper = await ResidentReaper.start().catch((err: unknown) => err as Error);
  if (reaper instanceof Error) return `the reaper cannot run: ${reaper.message}`;
  let dirs: PrivateDirectories;
  try {
    dirs = await PrivateDirectories.open();
  } catch (err) {
    reaper.close();
    return `no private directory for calls can be made: ${(err as Error).message}`;
  }
  const env = (dir: string): Record<string, string> => commandEnv({ TMPDIR: dir, HOME: dir });
  const failed = await landlockTrial(reaper, profile, dirs, root, env);
  if (failed !== undefined) {
    reaper.close();
    void dirs.close();
    return failed;
  }
  const userNamespace = await ownUserNamespace();
  const enforced: EnforcedLimits = {
    processes: pidsCgroup ? 'cgroup' : limits.maxProcesses > 0 ? 'watch' : 'none',
    memory: memoryCgroup ? 'cgroup' : limits.maxMemory > 0 ? 'watch' : 'none',
    tmp: limits.tmpSize > 0 ? 'watch' : 'none',
    notes: [...notes, ...watchNotes(limits, watch, userNamespace)],
  };
  const shell = { reaper, wrapper: [], cwd: root, env: commandEnv(), hideCommand: true };
  const perCall = async (): Promise<Pick<ShellStart, 'env' | 'confine' | 'scratch'>> => {
    const dir = await dirs.create();
    return { env: env(dir.path), confine: profile.fieldsFor(dir.path), scratch: dir };
  };
  const shells = waitingShells(shell, cgroups, limits, userNamespace && !pidsCgroup, machine.spares, perCall);
  return {
    mode: 'sandbox',
    mechanism: 'landlock',
    reaping: 'subreaper',
    reason: failures.length > 0 ? `${reason}; ${failures.join('; ')}` : reason,
    hidden,
    network,
    limits,
    enforced,
    run: shells.run,
    close: () => {
      shells.close();
      void dirs.close();
    },
  };
}

/**
 * Runs a confined probe once: it must come out unable to signal the server or read its
 * environment, and able to write its private directory. Returns why not, or undefined.
 */
async function landlockTrial(
  reaper: ResidentReaper,
  profile: LandlockProfile,
  dirs: PrivateDirectories,
  root: string,
  env: (dir: string) => Record<string, string>,
): Promise<string | undefined> {
  const dir = await dirs.create();
  const server = process.pid;
  const probe = [
    `if kill -0 ${server} 2>/dev/null; then echo 'a signal reached the server'; exit 1; fi`,
    `if { : < /proc/${server}/environ; } 2>/dev/null; then echo "the server's environment was readable"; exit 1; fi`,
    `if ! : > "$TMPDIR/probe"; then echo 'the private directory was not writable'; exit 1; fi`,
  ].join('\n');
  const output: Buffer[] = [];
  try {
    const outcome = await reaper.run('bash', ['-c', probe], {
      cwd: root,
      env: env(dir.path),
      timeoutMs: TRIAL_TIMEOUT_MS,
      confine: profile.fieldsFor(dir.path),
      onStdout: (chunk) => output.push(chunk),
      onStderr: (chunk) => output.push(chunk),
    });
    if (outcome.exitCode === 0) return undefined;
    const said = Buffer.concat(output)
      .toString('utf8')
      .replace(/^toolport reaper: /, '')
      .trim()
      .slice(0, MAX_REASON_CHARS);
    if (outcome.spawnError) return `a trial run could not start: ${outcome.spawnError.message}`;
    if (outcome.timedOut) return `a trial run did not finish within ${TRIAL_TIMEOUT_MS} ms`;
    return `a trial run ${outcome.exitCode === 126 ? 'could not be confined' : 'was not confined'}${said ? `: ${said}` : ''}`;
  } finally {
    await dir.remove();
  }
}

const TRIAL_TIMEOUT_MS = 10_000;
const MAX_REASON_CHARS = 500;

/** What the start-up log says of the bounds the reaper watches, and what holds meanwhile. */
function watchNotes(limits: BashLimits, watch: { tasks: number; memory: number; tmp: number }, userNamespace: boolean): string[] {
  const notes: string[] = [];
  const every = `every ${WATCH_INTERVAL_MS} ms`;
  if (watch.tasks > 0) {
    notes.push(
      userNamespace
        ? `the reaper stops a call past ${watch.tasks} processes (counted ${every}), and RLIMIT_NPROC holds the processes of all calls together to ${limits.maxProcesses} (this user namespace is the server's own)`
        : `the reaper stops a call past ${watch.tasks} processes (counted ${every}); RLIMIT_NPROC is not set, since outside a user namespace of its own it counts every process of this uid on the machine: the platform's pids limit bounds a fork loop faster than that`,
    );
  }
  if (watch.memory > 0)
    notes.push(
      `the reaper stops a call whose processes hold more than ${watch.memory} bytes resident (counted ${every}); the platform's memory limit bounds a faster allocation`,
    );
  if (watch.tmp > 0)
    notes.push(`each call writes only the workspace and a private directory (TMPDIR, HOME), which the reaper holds to ${watch.tmp} bytes (counted ${every})`);
  return notes;
}

/** Bash with the server's own rights: under the subreaper where Perl runs, else in a process group. */
async function unconfinedIsolation(
  root: string,
  limits: BashLimits,
  cgroups: CallCgroups | undefined,
  cgroupNotes: string[],
  why: string,
  spares: number | undefined,
): Promise<BashIsolation> {
  const pidsCgroup = cgroups?.controllers.includes('pids') ?? false;
  const memoryCgroup = cgroups?.controllers.includes('memory') ?? false;
  const noHidden: HiddenPaths = { directories: [], files: [] };
  const enforced: EnforcedLimits = {
    processes: pidsCgroup ? 'cgroup' : 'none',
    memory: memoryCgroup ? 'cgroup' : 'none',
    tmp: 'none',
    notes: [
      ...cgroupNotes,
      ...(limits.maxProcesses > 0 && !pidsCgroup
        ? ["without the sandbox RLIMIT_NPROC would count every process of the server's user, not the call's: no process limit without a pids cgroup"]
        : []),
      ...(limits.tmpSize > 0 ? ["without the sandbox, commands share the machine's /tmp: TOOLPORT_BASH_TMP_SIZE does not apply"] : []),
      ...(process.getuid?.() === 0 ? ['the server runs as root: without the sandbox a command can raise its resource limits and leave its cgroup'] : []),
    ],
  };
  const unconfined = { mode: 'unconfined', mechanism: 'none', hidden: noHidden, network: true, limits, enforced } as const;
  let reaper: ResidentReaper;
  try {
    reaper = await ResidentReaper.start();
  } catch (err) {
    // In the command's own shell: the cgroup first (before it forks), then the resource limits.
    const command = (line: string, cgroup: CallCgroup | undefined, cpuSeconds: number, niceness: number | undefined): string[] =>
      bashArgs(line, [...(cgroup ? [cgroup.joinCommand()] : []), ...ulimitCommands(limits, cpuSeconds, false, niceness)]);
    return {
      ...unconfined,
      reaping: 'process-group',
      reason: `${why}; and the subreaper cannot run, so processes that leave the command's process group are not killed: ${(err as Error).message}`,
      run: (line, options) =>
        runLimited(limits, cgroups, options, (cgroup, cpuSeconds) =>
          runProcess('bash', command(line, cgroup, cpuSeconds, options.niceness), {
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
    ...unconfined,
    reaping: 'subreaper',
    reason: why,
    ...waitingShells({ reaper, wrapper: [], cwd: root, env: commandEnv() }, cgroups, limits, false, spares),
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
  perCall?: () => Promise<Pick<ShellStart, 'env' | 'confine' | 'scratch'>>,
): Pick<BashIsolation, 'run' | 'close'> {
  const pool = new SparePool({
    start: async (onEnd) => WaitingShell.start({ ...shell, ...(await perCall?.()), cgroup: await cgroups?.create() }, onEnd),
    size: spares,
    idleMs: SPARE_IDLE_MS,
  });
  const run: BashIsolation['run'] = async (command, options) => {
    const cpuSeconds = options.cpuSeconds ?? cpuSecondsFor(limits, options.timeoutMs);
    const notRun = { exitCode: null, exitSignal: null, timedOut: false, cpuSeconds };
    if (options.signal?.aborted) return { ...notRun, abortReason: options.signal.reason };
    // As spawn refuses them: no program can receive a NUL byte in an argument.
    if (command.includes('\0')) {
      const error = Object.assign(new TypeError('The command must be a string without null bytes'), { code: 'ERR_INVALID_ARG_VALUE' });
      return { ...notRun, spawnError: error };
    }
    const prelude = ulimitCommands(limits, cpuSeconds, processes, options.niceness).join('; ');
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
  const inner = ['bash', ...bashArgs(command, ulimitCommands(limits, cpuSeconds, true, options.niceness))];
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
  const cpuSeconds = options.cpuSeconds ?? cpuSecondsFor(limits, options.timeoutMs);
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
  const { mode, mechanism, reaping, reason, hidden, network, limits, enforced } = isolation;
  if (mode === 'sandbox') {
    const name = mechanism === 'landlock' ? 'Landlock' : 'bubblewrap';
    log.info({ bashSandbox: 'on', mechanism, reaping, reason, hidden, network, limits, enforced }, `Bash runs commands in the ${name} sandbox`);
    return;
  }
  log.warn(
    { bashSandbox: 'off', reaping, reason, limits, enforced },
    "Bash runs commands without a sandbox: they can read and write whatever the server's user can, reach the network, and read the server's secrets",
  );
}
