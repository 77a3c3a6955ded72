import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { KILL_GRACE_MS } from '../os/proc/process.js';
import { REAPER_SCRIPT, REAPER_SYSCALLS } from '../os/proc/reaper.js';
import { PrivateDirectories, type PrivateDirectory } from '../os/sandbox/private-dirs.js';
import { seccompSupported } from '../os/sandbox/seccomp.js';
import { UpstreamProfile, type UpstreamPlace } from '../os/sandbox/upstream-profile.js';

/**
 * How often the supervisor counts an upstream's processes, memory and TMPDIR. Each count walks
 * /proc (about 1 ms for 100 processes, more on a busy machine), and an upstream runs for as long as
 * the server does: a Bash call's 100 ms would cost a share of a core per upstream.
 */
const UPSTREAM_WATCH_INTERVAL_MS = 1_000;

/** What the supervisor holds each upstream to, counted every {@link UPSTREAM_WATCH_INTERVAL_MS}: processes and threads, resident bytes, bytes of its TMPDIR; 0: no bound. */
export interface UpstreamLimits {
  maxProcesses: number;
  maxMemory: number;
  tmpSize: number;
}

export const NO_UPSTREAM_LIMITS: Readonly<UpstreamLimits> = { maxProcesses: 0, maxMemory: 0, tmpSize: 0 };

/** What the process of a confined upstream runs: the supervisor, which runs the command. */
export interface ConfinedLaunch {
  file: string;
  args: string[];
  /** The upstream's environment with TMPDIR set to its private directory (unless its config sets one). */
  env: Record<string, string>;
  /** Removes the private directory, once the process is gone. */
  release(): Promise<void>;
}

/**
 * The supervisor's grace between SIGTERM and SIGKILL for what the upstream started: shorter than
 * the server's grace for the process group, so that the supervisor is done before the server's
 * SIGKILL of the group could reach it and leave a process that left the group behind.
 */
const SUPERVISOR_GRACE_MS = KILL_GRACE_MS / 2;
const TRIAL_TIMEOUT_MS = 10_000;
/** toolport's own files (the package: src/ or dist/ is one level below), which no upstream may change. */
const TOOLPORT_ROOT = fileURLToPath(new URL('../..', import.meta.url));
const MAX_REASON_CHARS = 500;

/**
 * Stdio upstreams under Landlock and seccomp (see `UpstreamProfile`), each run by the reaper's
 * supervise mode (`reaper.pl supervise`): the supervisor keeps the JSON-RPC pipes, confines the
 * command before it starts, and ends everything the command started (setsid included) when the
 * command ends, when the server stops it, and when the server dies.
 */
export class UpstreamConfinement {
  readonly #profile: UpstreamProfile;
  readonly #dirs: PrivateDirectories;
  readonly #limits: UpstreamLimits;
  readonly #perl: string;

  private constructor(profile: UpstreamProfile, dirs: PrivateDirectories, limits: UpstreamLimits, perl: string) {
    this.#profile = profile;
    this.#dirs = dirs;
    this.#limits = limits;
    this.#perl = perl;
  }

  /**
   * Makes the profile hiding `hidden` and tries it once: a confined probe must fail to signal the
   * server and to read its environment, and must write its private directory. Returns why not,
   * when that does not hold here (not Linux, no Landlock ABI 6, no perl, ...).
   */
  static async open(hidden: readonly string[], limits: UpstreamLimits = NO_UPSTREAM_LIMITS, perl = 'perl'): Promise<UpstreamConfinement | string> {
    if (process.platform !== 'linux') return `Landlock is a Linux feature and this is ${process.platform}`;
    if (REAPER_SYSCALLS[process.arch] === undefined || !seccompSupported()) return `the confinement does not know the system calls of ${process.arch}`;
    let dirs: PrivateDirectories;
    try {
      dirs = await PrivateDirectories.open();
    } catch (err) {
      return `no private directory for upstreams can be made: ${(err as Error).message}`;
    }
    const confinement = new UpstreamConfinement(new UpstreamProfile(hidden, [process.cwd(), TOOLPORT_ROOT]), dirs, limits, perl);
    const failed = await confinement.#trial().catch((err: unknown) => `a trial run failed: ${(err as Error).message}`);
    if (failed === undefined) return confinement;
    await dirs.close();
    return failed;
  }

  /** The paths every upstream is kept from. */
  get hidden(): readonly string[] {
    return this.#profile.hidden;
  }

  /**
   * How to start `command args` confined with `env` (HOME taken from it), with or without the
   * network; `cwd` is the directory its entry names (writable), or undefined for the server's own.
   */
  async launch(
    command: string,
    args: readonly string[],
    options: { cwd: string | undefined; env: Record<string, string>; network: boolean },
  ): Promise<ConfinedLaunch> {
    const dir = await this.#dirs.create();
    try {
      const place: UpstreamPlace = { cwd: options.cwd, home: options.env['HOME'], tmp: dir.path, network: options.network };
      const { maxProcesses, maxMemory, tmpSize } = this.#limits;
      const watch =
        maxProcesses > 0 || maxMemory > 0 || tmpSize > 0 ? [`watch ${UPSTREAM_WATCH_INTERVAL_MS} ${maxProcesses} ${maxMemory} ${tmpSize} ${dir.path}`] : [];
      const fields = [...(await this.#profile.fieldsFor(place)), ...watch];
      return { ...this.#command(fields, [command, ...args]), env: { TMPDIR: dir.path, ...options.env }, release: () => dir.remove() };
    } catch (err) {
      await dir.remove();
      throw err;
    }
  }

  /** Removes the private directories (the upstreams' processes are gone by then). */
  close(): Promise<void> {
    return this.#dirs.close();
  }

  #command(fields: readonly string[], command: readonly string[]): { file: string; args: string[] } {
    const syscalls = REAPER_SYSCALLS[process.arch]!;
    return {
      file: this.#perl,
      args: [
        REAPER_SCRIPT,
        'supervise',
        String(syscalls.prctl),
        String(syscalls.rtSigprocmask),
        String(syscalls.capset),
        String(process.pid),
        String(SUPERVISOR_GRACE_MS),
        String(fields.length),
        ...fields,
        '--',
        ...command,
      ],
    };
  }

  async #trial(): Promise<string | undefined> {
    const dir: PrivateDirectory = await this.#dirs.create();
    try {
      const server = process.pid;
      const probe = [
        `if kill -0 ${server} 2>/dev/null; then echo 'a signal reached the server'; exit 1; fi`,
        // Not `: < file`: sh exits when a special built-in's redirection fails.
        `if cat /proc/${server}/environ >/dev/null 2>&1; then echo "the server's environment was readable"; exit 1; fi`,
        `if ! : > "$TMPDIR/probe"; then echo 'the private directory was not writable'; exit 1; fi`,
      ].join('\n');
      const fields = await this.#profile.fieldsFor({ cwd: dir.path, home: undefined, tmp: dir.path, network: false });
      const { file, args } = this.#command(fields, ['/bin/sh', '-c', probe]);
      const { code, output } = await run(file, args, { cwd: dir.path, env: { PATH: '/usr/bin:/bin', TMPDIR: dir.path } });
      if (code === 0) return undefined;
      const said = output
        .replace(/^toolport supervisor: /, '')
        .trim()
        .slice(0, MAX_REASON_CHARS);
      if (code === 'timeout') return `a trial run did not finish within ${TRIAL_TIMEOUT_MS} ms`;
      return `a trial run ${code === 126 ? 'could not be confined' : 'was not confined'}${said ? `: ${said}` : ''}`;
    } finally {
      await dir.remove();
    }
  }
}

/** Runs a trial to its end: its exit code (null when killed by a signal), or `timeout`, and what it wrote. */
function run(
  file: string,
  args: string[],
  options: { cwd: string; env: Record<string, string> },
): Promise<{ code: number | null | 'timeout'; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
    const chunks: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => chunks.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => chunks.push(chunk));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, TRIAL_TIMEOUT_MS);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(new Error((err as NodeJS.ErrnoException).code === 'ENOENT' ? `${file} was not found on PATH` : err.message));
    });
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code: timedOut ? 'timeout' : code, output: Buffer.concat(chunks).toString('utf8') });
    });
  });
}
