import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { access, constants } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { commandEnv, KILL_GRACE_MS, type RunOptions, type RunOutcome, type WatchedBound } from './process.js';
import { ReapedCall, type BeginOptions } from '../sandbox/reaped-call.js';

/**
 * The reaper's Perl source (see its header for what it does and its protocol). It sits beside
 * this module: in src/, in dist/ (the build copies it), and beside the bundles in dist/main/.
 */
export const REAPER_SCRIPT = fileURLToPath(new URL('./reaper.pl', import.meta.url));
// sockaddr_un's sun_path: the reaper connects to the name padded to its whole size (reaper.pl).
const SUN_PATH_BYTES = 108;

/**
 * The socket's name in the abstract namespace, padded with NULs to sun_path's size: Node before 22
 * pads a name itself and later lines bind it as given, so the padding makes it one name on every line.
 */
function abstractName(name: string): string {
  return `\0${name}`.padEnd(SUN_PATH_BYTES, '\0');
}

/**
 * The numbers of the prctl and rt_sigprocmask system calls, by Node's `process.arch`. Perl's
 * `syscall` needs them, and the minimal Perl that every Debian system carries (perl-base) has no
 * `syscall.ph` to look them up.
 */
export const REAPER_SYSCALLS: Readonly<Record<string, { prctl: number; rtSigprocmask: number; capset: number }>> = {
  x64: { prctl: 157, rtSigprocmask: 14, capset: 126 },
  arm64: { prctl: 167, rtSigprocmask: 135, capset: 91 },
  riscv64: { prctl: 167, rtSigprocmask: 135, capset: 91 },
  loong64: { prctl: 167, rtSigprocmask: 135, capset: 91 },
  ia32: { prctl: 172, rtSigprocmask: 175, capset: 185 },
  arm: { prctl: 172, rtSigprocmask: 175, capset: 185 },
  s390x: { prctl: 172, rtSigprocmask: 175, capset: 185 },
  ppc64: { prctl: 171, rtSigprocmask: 174, capset: 184 },
};

const CHECK_TIMEOUT_MS = 10_000;
const MAX_REASON_CHARS = 500;
// A token (32 hex digits) and `o` or `e` open each output connection.
const TOKEN_CHARS = 32;
// A connection that has not said which call it belongs to by then is dropped.
const OPENING_TIMEOUT_MS = 10_000;
// Far above the connections of the calls one server runs at once (two per call).
const MAX_CONNECTIONS = 1_024;

type ResidentProcess = ChildProcessByStdio<Writable, Readable, Readable>;

/** One resident Perl process and the calls sent to it. */
interface Resident {
  child: ResidentProcess;
  tokens: Set<string>;
  /** The end of what it wrote to stderr, for the reason of a failure. */
  stderr: string;
}

export interface ResidentReaperOptions {
  /** The Perl to run (default `perl`, looked up on PATH). */
  perl?: string;
  /** The resident's own environment (default `commandEnv()`); each command gets the one it is run with. */
  env?: Record<string, string>;
}

/**
 * Runs commands under the reaper (`reaper.pl`): one resident Perl process, started here
 * and again whenever it has gone, forks a call reaper per command, which makes itself a child
 * subreaper, so nothing the command starts (setsid, double forks included) outlives the call.
 * The output comes over a Unix socket of the server's in the abstract namespace, two connections
 * per call, each opened with the call's random token; a connection without a live token is
 * dropped. Calls behave as `runProcess` calls do: a process group per call, killed on timeout and
 * abort (SIGTERM, then SIGKILL), never a rejection. Handles are unreferenced: an idle reaper does
 * not keep the process alive, and the resident dies with the server (PR_SET_PDEATHSIG).
 */
export class ResidentReaper {
  readonly #perl: string;
  readonly #env: Record<string, string>;
  readonly #address = `toolport-reaper-${process.pid}-${randomBytes(8).toString('hex')}`;
  readonly #calls = new Map<string, ReapedCall>();
  readonly #server: net.Server;
  #resident: Resident | undefined;
  #closed = false;

  private constructor(options: ResidentReaperOptions) {
    this.#perl = options.perl ?? 'perl';
    this.#env = options.env ?? commandEnv();
    this.#server = net.createServer((socket) => this.#accept(socket));
    this.#server.maxConnections = MAX_CONNECTIONS;
    this.#server.unref();
  }

  /**
   * Starts a reaper and tries it once; rejects with why it cannot work here (not Linux, an
   * architecture whose system calls it does not know, no perl, prctl refused, ...).
   */
  static async start(options: ResidentReaperOptions = {}): Promise<ResidentReaper> {
    if (process.platform !== 'linux') throw new Error(`child subreapers are a Linux feature and this is ${process.platform}`);
    if (REAPER_SYSCALLS[process.arch] === undefined) throw new Error(`the reaper does not know the system calls of ${process.arch}`);
    const reaper = new ResidentReaper(options);
    try {
      await new Promise<void>((resolve, reject) => {
        reaper.#server.once('error', reject);
        reaper.#server.listen(abstractName(reaper.#address), () => resolve());
      });
      const trial = { cwd: '/', env: reaper.#env, timeoutMs: CHECK_TIMEOUT_MS, onStdout: () => {}, onStderr: () => {} };
      const call = reaper.#submit([], trial, trial);
      const outcome = call instanceof ReapedCall ? await call.done : { ...notRun(), spawnError: call };
      const reason = trialFailure(reaper.#perl, outcome, reaper.#resident?.stderr ?? '');
      if (reason !== undefined) throw new Error(reason);
    } catch (err) {
      reaper.close();
      throw err;
    }
    return reaper;
  }

  /**
   * Runs `file args` under a call reaper. `killGraceMs` is the reaper's grace between SIGTERM and
   * SIGKILL; `confine`, how the command is confined (see `PrepareOptions`).
   */
  run(file: string, args: readonly string[], options: RunOptions & Pick<PrepareOptions, 'confine'>): Promise<RunOutcome> {
    if (options.signal?.aborted) return Promise.resolve({ ...notRun(), abortReason: options.signal.reason });
    const call = this.#submit([file, ...args], options, options);
    return call instanceof ReapedCall ? call.done : Promise.resolve({ ...notRun(), spawnError: call });
  }

  /**
   * Starts `file args` under a call reaper ahead of its use: the command runs at once, and what
   * it reads on fd 3 (its input connection) comes when the call begins (`ReapedCall.begin`), which
   * starts its timeout. `joins` are the files (cgroup.procs) the call reaper writes its pid to
   * before it starts the command. Returns the error when it cannot even be asked for.
   */
  prepare(file: string, args: readonly string[], options: PrepareOptions): ReapedCall | NodeJS.ErrnoException {
    return this.#submit([file, ...args], { ...options, input: true });
  }

  /** Stops the resident; calls still running are ended by their reapers, as when the server dies. */
  close(): void {
    this.#closed = true;
    this.#resident?.child.kill('SIGTERM');
    this.#server.close();
  }

  #submit(command: string[], spec: PrepareOptions & { input?: boolean }, begin?: BeginOptions): ReapedCall | NodeJS.ErrnoException {
    const token = randomBytes(TOKEN_CHARS / 2).toString('hex');
    const env = Object.entries(spec.env).map(([name, value]) => `${name}=${value}`);
    const joins = spec.joins ?? [];
    const confine = spec.confine ?? [];
    const flags = spec.input === true ? 'i' : '';
    const fields = [
      token,
      spec.cwd,
      String(spec.killGraceMs ?? KILL_GRACE_MS),
      flags,
      String(joins.length),
      ...joins,
      String(confine.length),
      ...confine,
      String(env.length),
      ...env,
      ...command,
    ];
    // As spawn refuses them: no program can receive a NUL byte in an argument.
    if (fields.some((field) => field.includes('\0'))) {
      return Object.assign(new TypeError('The command, its environment and its working directory must be strings without null bytes'), {
        code: 'ERR_INVALID_ARG_VALUE',
      });
    }
    if (this.#closed) return new Error('the reaper was closed');
    const resident = this.#resident ?? this.#startResident();
    const call = new ReapedCall(
      spec.killGraceMs,
      () => {
        this.#calls.delete(token);
        resident.tokens.delete(token);
      },
      begin,
    );
    this.#calls.set(token, call);
    resident.tokens.add(token);
    const payload = Buffer.from(fields.join('\0'));
    resident.child.stdin.write(Buffer.concat([Buffer.from(`${payload.length}\n`), payload]));
    return call;
  }

  #startResident(): Resident {
    const syscalls = REAPER_SYSCALLS[process.arch]!;
    const child = spawn(
      this.#perl,
      [REAPER_SCRIPT, String(syscalls.prctl), String(syscalls.rtSigprocmask), String(syscalls.capset), String(process.pid), this.#address],
      {
        cwd: '/',
        env: this.#env,
        stdio: ['pipe', 'pipe', 'pipe'],
        // A session of its own: a terminal's Ctrl-C, meant for the server (which drains), does not reach it.
        detached: true,
      },
    );
    const resident: Resident = { child, tokens: new Set(), stderr: '' };
    this.#resident = resident;
    const gone = (): void => {
      if (this.#resident === resident) this.#resident = undefined;
    };
    let lines = '';
    child.stdout.setEncoding('latin1').on('data', (chunk: string) => {
      lines += chunk;
      let end: number;
      while ((end = lines.indexOf('\n')) >= 0) {
        this.#report(lines.slice(0, end));
        lines = lines.slice(end + 1);
      }
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (resident.stderr = (resident.stderr + chunk).slice(-MAX_REASON_CHARS)));
    child.stdin.on('error', () => {});
    child.on('error', (err) => {
      // It could not be started (no perl): nothing was sent to it.
      gone();
      for (const token of resident.tokens) this.#calls.get(token)?.failed(err);
    });
    child.on('exit', gone);
    // Closed once the resident and every call reaper it forked are gone: a call with no report now will never have one.
    child.stdout.on('close', () => {
      gone();
      const why = `the reaper exited before it started the command${resident.stderr.trim() ? `: ${resident.stderr.trim()}` : ''}`;
      for (const token of resident.tokens) this.#calls.get(token)?.lost(why);
    });
    child.unref();
    for (const stream of [child.stdin, child.stdout, child.stderr]) (stream as unknown as net.Socket).unref();
    return resident;
  }

  /** One line from the resident or a call reaper: `pid`, `done`, `exit` or `error`, a token, and the rest. */
  #report(line: string): void {
    const [kind, token = '', ...rest] = line.split(' ');
    const call = this.#calls.get(token);
    const value = Number(rest[0]);
    if (kind === 'pid') {
      if (call !== undefined) call.started(value);
    } else if (call === undefined) {
      return;
    } else if (kind === 'done') {
      call.reported(value, WATCHED_BOUNDS.get(rest[1] ?? ''));
    } else if (kind === 'exit') {
      call.reaped(value);
    } else if (kind === 'error') {
      call.failed(new Error(rest.join(' ')));
    }
  }

  /** An output connection: its first bytes name the call and the stream. */
  #accept(socket: net.Socket): void {
    let opening: Buffer = Buffer.alloc(0);
    socket.setTimeout(OPENING_TIMEOUT_MS, () => socket.destroy());
    socket.on('error', () => {});
    const onOpening = (chunk: Buffer): void => {
      opening = opening.length === 0 ? chunk : Buffer.concat([opening, chunk]);
      if (opening.length <= TOKEN_CHARS) return;
      socket.off('data', onOpening);
      socket.setTimeout(0);
      const call = this.#calls.get(opening.toString('latin1', 0, TOKEN_CHARS));
      const stream = STREAMS.get(opening[TOKEN_CHARS]!);
      if (call === undefined || stream === undefined) socket.destroy();
      else call.attach(stream, socket, opening.subarray(TOKEN_CHARS + 1));
    };
    socket.on('data', onOpening);
  }
}

/** What the call reaper names when its watch stopped a call (`done TOKEN STATUS BOUND`). */
const WATCHED_BOUNDS = new Map<string, WatchedBound>([
  ['processes', 'processes'],
  ['memory', 'memory'],
  ['tmp', 'tmp'],
]);

/** How a connection names its stream after the token: `o`, `e`, or `i` (the command's input). */
const STREAMS = new Map<number, 'stdout' | 'stderr' | 'stdin'>([
  [0x6f, 'stdout'],
  [0x65, 'stderr'],
  [0x69, 'stdin'],
]);

/** What `ResidentReaper.prepare` needs: where and how to run, and the cgroups to join. */
export interface PrepareOptions {
  cwd: string;
  env: Record<string, string>;
  killGraceMs?: number;
  /** Files the call reaper writes its pid to before it starts the command (the call's cgroup.procs). */
  joins?: readonly string[];
  /**
   * How the command is confined and watched: fields `reaper.pl` reads (`landlock`, `path`,
   * `seccomp`, applied to the command before it starts, and `watch`, the call reaper's own). When
   * a field cannot be applied, the command does not run: it exits 126, saying why on stderr.
   */
  confine?: readonly string[];
}

function notRun(): RunOutcome {
  return { exitCode: null, exitSignal: null, timedOut: false };
}

/** What the server says when there is no Perl. */
export function perlMissing(perl: string): string {
  return `${perl} was not found on PATH; install it (Debian/Ubuntu: apt-get install perl-base)`;
}

/**
 * Where `perl` is: a name looked up on the server's PATH (`commandEnv`'s, the one a reaper is
 * started with), a path as given; undefined when it is not there. A supervisor is started with the
 * upstream's environment, whose own PATH may lack Perl or hold another one.
 */
export async function findPerl(perl = 'perl'): Promise<string | undefined> {
  const dirs = (commandEnv().PATH ?? '').split(':').filter((dir) => path.isAbsolute(dir));
  for (const candidate of perl.includes('/') ? [path.resolve(perl)] : dirs.map((dir) => path.join(dir, perl))) {
    try {
      await access(candidate, constants.X_OK);
      return candidate;
    } catch {
      // Not here.
    }
  }
  return undefined;
}

/** Why a trial call failed, or undefined when it worked. */
function trialFailure(perl: string, outcome: RunOutcome, stderr: string): string | undefined {
  const error = outcome.spawnError;
  if (error?.code === 'ENOENT') return perlMissing(perl);
  if (error !== undefined && (error as { syscall?: string }).syscall?.startsWith('spawn')) return `${perl} could not be started: ${error.message}`;
  if (outcome.timedOut) return `a trial run of the reaper did not finish within ${CHECK_TIMEOUT_MS} ms`;
  if (error === undefined && outcome.exitCode === 0) return undefined;
  const message = (error?.message ?? stderr).trim().slice(0, MAX_REASON_CHARS);
  return `a trial run of the reaper failed${message ? `: ${message}` : ''}`;
}

/**
 * Tries the reaper once. Returns why it cannot work here (not Linux, an architecture it does not
 * know, no perl, prctl refused), or undefined when it works.
 */
export async function reaperUnavailableReason(perl = 'perl'): Promise<string | undefined> {
  try {
    (await ResidentReaper.start({ perl })).close();
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}
