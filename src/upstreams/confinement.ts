import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { KILL_GRACE_MS } from '../os/proc/process.js';
import { findPerl, perlMissing, REAPER_SCRIPT, REAPER_SYSCALLS } from '../os/proc/reaper.js';
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

/** What the process of a supervised upstream runs: the supervisor, which runs the command. */
export interface ConfinedLaunch {
  file: string;
  args: string[];
  /** The upstream's environment; in the sandbox, with TMPDIR set to its private directory (unless its config sets one). */
  env: Record<string, string>;
  /** Removes the private directory, if any, once the process is gone. */
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

/** The sandbox of confined upstreams: the Landlock profile and the private directories (TMPDIR). */
interface Sandbox {
  profile: UpstreamProfile;
  dirs: PrivateDirectories;
}

/**
 * Stdio upstreams run by the reaper's supervise mode (`reaper.pl supervise`): the supervisor keeps
 * the JSON-RPC pipes, is a child subreaper, and ends everything the command started (setsid and
 * double forks included) when the command ends, when the server stops it, and when the server
 * dies; it holds the bounds of {@link UpstreamLimits}. Made by {@link UpstreamConfinement.open},
 * it also confines the command under Landlock and seccomp (see `UpstreamProfile`) before it
 * starts; made by {@link UpstreamConfinement.supervised}, where the sandbox cannot run, the
 * command keeps the server's rights and only its lifetime and bounds are held.
 */
export class UpstreamConfinement {
  readonly #sandbox: Sandbox | undefined;
  /** Why there is no sandbox, when there is none. */
  readonly #unconfined: string | undefined;
  readonly #limits: UpstreamLimits;
  /** Perl's absolute path, found on the server's PATH: an upstream's environment may have a PATH of its own. */
  readonly #perl: string;

  private constructor(sandbox: Sandbox | string, limits: UpstreamLimits, perl: string) {
    this.#sandbox = typeof sandbox === 'string' ? undefined : sandbox;
    this.#unconfined = typeof sandbox === 'string' ? sandbox : undefined;
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
    const found = await findPerl(perl);
    if (found === undefined) return perlMissing(perl);
    let dirs: PrivateDirectories;
    try {
      dirs = await PrivateDirectories.open();
    } catch (err) {
      return `no private directory for upstreams can be made: ${(err as Error).message}`;
    }
    const confinement = new UpstreamConfinement({ profile: new UpstreamProfile(hidden, [process.cwd(), TOOLPORT_ROOT]), dirs }, limits, found);
    const failed = await confinement.#trial().catch((err: unknown) => `a trial run failed: ${(err as Error).message}`);
    if (failed === undefined) return confinement;
    await dirs.close();
    return failed;
  }

  /**
   * The supervisor without the sandbox, which cannot run here (`unconfined` says why): upstreams
   * keep the server's rights, but nothing they start outlives them, and the bounds on processes
   * and memory hold. TOOLPORT_UPSTREAM_TMP_SIZE does not: with no sandbox an upstream writes
   * wherever the server's user can, and no private TMPDIR is made (a read-only /tmp, where the
   * sandbox fails, must not stop this too). Needs only Perl; tried once, it returns why not.
   */
  static async supervised(unconfined: string, limits: UpstreamLimits = NO_UPSTREAM_LIMITS, perl = 'perl'): Promise<UpstreamConfinement | string> {
    if (process.platform !== 'linux') return `the supervisor needs Linux's child subreapers and this is ${process.platform}`;
    if (REAPER_SYSCALLS[process.arch] === undefined) return `the supervisor does not know the system calls of ${process.arch}`;
    const found = await findPerl(perl);
    if (found === undefined) return perlMissing(perl);
    const supervisor = new UpstreamConfinement(unconfined, { ...limits, tmpSize: 0 }, found);
    const failed = await supervisor.#trial().catch((err: unknown) => `a trial run failed: ${(err as Error).message}`);
    return failed ?? supervisor;
  }

  /** True when upstreams run in the sandbox, not only under the supervisor. */
  get confined(): boolean {
    return this.#sandbox !== undefined;
  }

  /** The bounds the supervisor holds each upstream to. */
  get limits(): Readonly<UpstreamLimits> {
    return this.#limits;
  }

  /** The paths every upstream is kept from (none without the sandbox). */
  get hidden(): readonly string[] {
    return this.#sandbox?.profile.hidden ?? [];
  }

  /**
   * How to start `command args` supervised (and confined, in the sandbox) with `env` (HOME taken
   * from it), with or without the network; `cwd` is the directory its entry names (writable), or
   * undefined for the server's own. Rejects `network: false` without the sandbox, which alone holds it.
   */
  async launch(
    command: string,
    args: readonly string[],
    options: { cwd: string | undefined; env: Record<string, string>; network: boolean },
  ): Promise<ConfinedLaunch> {
    const sandbox = this.#sandbox;
    if (sandbox === undefined) {
      if (!options.network) {
        throw new Error(
          `cannot run ${JSON.stringify(command)}: it has "network": false, and the sandbox that would hold it cannot run here (${this.#unconfined})`,
        );
      }
      return { ...this.#command(this.#watch(''), [command, ...args]), env: options.env, release: () => Promise.resolve() };
    }
    const dir = await sandbox.dirs.create();
    try {
      const place: UpstreamPlace = { cwd: options.cwd, home: options.env['HOME'], tmp: dir.path, network: options.network };
      const fields = [...(await sandbox.profile.fieldsFor(place)), ...this.#watch(dir.path)];
      return { ...this.#command(fields, [command, ...args]), env: { TMPDIR: dir.path, ...options.env }, release: () => dir.remove() };
    } catch (err) {
      await dir.remove();
      throw err;
    }
  }

  /** Removes the private directories (the upstreams' processes are gone by then). */
  async close(): Promise<void> {
    await this.#sandbox?.dirs.close();
  }

  /** The supervisor's `watch` field for the bounds, counting `tmp` as the private directory; none without a bound. */
  #watch(tmp: string): string[] {
    const { maxProcesses, maxMemory, tmpSize } = this.#limits;
    if (maxProcesses === 0 && maxMemory === 0 && tmpSize === 0) return [];
    return [`watch ${UPSTREAM_WATCH_INTERVAL_MS} ${maxProcesses} ${maxMemory} ${tmpSize} ${tmp}`];
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

  /**
   * Runs a probe as upstreams run: in the sandbox, one that must fail to signal the server and to
   * read its environment, and must write its private directory; without it, one that must start
   * and exit 0 under the supervisor and its watch (Perl there, the script and its prctl working).
   */
  async #trial(): Promise<string | undefined> {
    if (this.#sandbox === undefined) {
      const { file, args } = this.#command(this.#watch(''), ['/bin/sh', '-c', 'exit 0']);
      return explain(await run(file, args, { cwd: '/', env: { PATH: '/usr/bin:/bin' } }), 'could not be supervised', 'was not supervised');
    }
    const dir: PrivateDirectory = await this.#sandbox.dirs.create();
    try {
      const server = process.pid;
      const probe = [
        `if kill -0 ${server} 2>/dev/null; then echo 'a signal reached the server'; exit 1; fi`,
        // Not `: < file`: sh exits when a special built-in's redirection fails.
        `if cat /proc/${server}/environ >/dev/null 2>&1; then echo "the server's environment was readable"; exit 1; fi`,
        `if ! : > "$TMPDIR/probe"; then echo 'the private directory was not writable'; exit 1; fi`,
      ].join('\n');
      const fields = await this.#sandbox.profile.fieldsFor({ cwd: dir.path, home: undefined, tmp: dir.path, network: false });
      const { file, args } = this.#command(fields, ['/bin/sh', '-c', probe]);
      return explain(await run(file, args, { cwd: dir.path, env: { PATH: '/usr/bin:/bin', TMPDIR: dir.path } }), 'could not be confined', 'was not confined');
    } finally {
      await dir.remove();
    }
  }
}

/** Why a trial that ended so failed (126: the supervisor refused, saying why), or undefined when it passed. */
function explain({ code, output }: { code: number | null | 'timeout'; output: string }, refused: string, failed: string): string | undefined {
  if (code === 0) return undefined;
  if (code === 'timeout') return `a trial run did not finish within ${TRIAL_TIMEOUT_MS} ms`;
  const said = output
    .replace(/^toolport supervisor: /, '')
    .trim()
    .slice(0, MAX_REASON_CHARS);
  return `a trial run ${code === 126 ? refused : failed}${said ? `: ${said}` : ''}`;
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
