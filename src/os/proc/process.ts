import { spawn, type ChildProcess } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';
import type { Readable } from 'node:stream';

/** How long a process group gets to exit after SIGTERM before it is sent SIGKILL. */
export const KILL_GRACE_MS = 2_000;

const POLL_MS = 25;
/**
 * After the main process exits, how much longer than the kill grace its pipes may stay open
 * (held by a process that left the group) before they are closed from this side.
 */
export const CLOSE_SLACK_MS = 500;
const FALLBACK_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
const PASSED_THROUGH = ['PATH', 'HOME', 'LANG', 'LC_ALL', 'TZ', 'USER', 'TMPDIR'] as const;

/**
 * The environment for commands the tools run: an allowlist, never the server's own environment,
 * so the server's secrets do not reach them. This reads `process.env` for these few names only,
 * an exception to "config reads the environment" because they describe the machine, not toolport.
 */
export function commandEnv(overrides: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of PASSED_THROUGH) {
    const value = process.env[name];
    if (value !== undefined && value !== '') env[name] = value;
  }
  env.PATH ??= FALLBACK_PATH;
  return { ...env, TERM: 'dumb', SHELL: '/bin/bash', ...overrides };
}

export interface RunOptions {
  cwd: string;
  env: Record<string, string>;
  timeoutMs: number;
  /** Aborting it kills the process group, like a timeout. */
  signal?: AbortSignal;
  killGraceMs?: number;
  /**
   * What the group gets when the server exits with the run still going: SIGKILL (the default), or
   * SIGTERM for a program that cleans up after itself on SIGTERM and would be cut short by SIGKILL
   * (the reaper, which still has processes outside the group to kill).
   */
  signalOnServerExit?: 'SIGTERM' | 'SIGKILL';
  /**
   * The program ends everything it started when it exits (bubblewrap, whose PID namespace dies
   * with it), so its group is not swept after it exits. A sweep finds the sandbox's init as a
   * zombie in the group (orphaned to PID 1, which may reap it late) and would poll /proc for the
   * whole kill grace, on every call.
   */
  endsWithLeader?: boolean;
  onStdout(chunk: Buffer): void;
  onStderr(chunk: Buffer): void;
}

/** How a run ended. */
export interface RunOutcome {
  /** Set when the program could not be started at all (for example ENOENT). */
  spawnError?: NodeJS.ErrnoException;
  exitCode: number | null;
  exitSignal: NodeJS.Signals | null;
  timedOut: boolean;
  /** The abort reason of `signal` as given (the caller words it), when the run was aborted through it. */
  abortReason?: unknown;
  /** The bound whose watch stopped the run (see the reaper's `watch`), when one did. */
  overBound?: WatchedBound;
}

/** What the reaper's watch counts for a call: its processes and threads, their memory, its temporary directory. */
export type WatchedBound = 'processes' | 'memory' | 'tmp';

/** How `startInGroup` starts a program. */
export interface StartOptions {
  cwd: string;
  env: Record<string, string>;
  /** What the group gets when the server exits while it may still run (see `RunOptions`). */
  signalOnServerExit?: 'SIGTERM' | 'SIGKILL';
  /** Gives the program a pipe from the server as fd 3 (stdin is always /dev/null). */
  extraPipe?: boolean;
}

/** A program started in a process group of its own, not yet watched (see `superviseGroup`). */
export type GroupChild = ChildProcess & { readonly stdout: Readable; readonly stderr: Readable };

/**
 * Starts a program in a process group of its own (`detached`, which also starts a new session, so
 * there is no controlling terminal), its output piped. Returns the error instead when it cannot
 * be started at all; what it writes before `superviseGroup` watches it waits in its pipes.
 */
export function startInGroup(file: string, args: readonly string[], options: StartOptions): { child: GroupChild } | { spawnError: NodeJS.ErrnoException } {
  let child: GroupChild;
  try {
    child = spawn(file, args, {
      cwd: options.cwd,
      env: options.env,
      stdio: options.extraPipe === true ? ['ignore', 'pipe', 'pipe', 'pipe'] : ['ignore', 'pipe', 'pipe'],
      detached: true,
    }) as GroupChild;
  } catch (err) {
    // Thrown synchronously for arguments no program can receive, such as a NUL byte.
    return { spawnError: err as NodeJS.ErrnoException };
  }
  if (child.pid !== undefined) trackGroup(child.pid, options.signalOnServerExit ?? 'SIGKILL');
  return { child };
}

/**
 * Runs a program in a process group of its own, stdin from /dev/null, output streamed to the
 * callbacks. On timeout or abort the whole group is killed: SIGTERM, then SIGKILL after the grace
 * period. When the main process exits, what it left running in its group is killed too, so
 * background jobs neither outlive the call nor hold its pipes open. Never rejects.
 */
export function runProcess(file: string, args: readonly string[], options: RunOptions): Promise<RunOutcome> {
  if (options.signal?.aborted) return Promise.resolve({ exitCode: null, exitSignal: null, timedOut: false, abortReason: options.signal.reason });
  const started = startInGroup(file, args, options);
  if ('spawnError' in started) return Promise.resolve({ exitCode: null, exitSignal: null, timedOut: false, spawnError: started.spawnError });
  return superviseGroup(started.child, options);
}

/**
 * Watches a program `startInGroup` started, from now on, as `runProcess` does: its output to the
 * callbacks, its group killed on timeout or abort (an abort already signalled kills it at once),
 * and what it left in its group killed when it exits. The child must not have exited yet. Never rejects.
 */
export function superviseGroup(child: GroupChild, options: Omit<RunOptions, 'cwd' | 'env'>): Promise<RunOutcome> {
  const graceMs = options.killGraceMs ?? KILL_GRACE_MS;
  const { signal } = options;
  const outcome: RunOutcome = { exitCode: null, exitSignal: null, timedOut: false };
  return new Promise((resolve) => {
    let finished = false;
    let killing = false;
    let closeTimer: NodeJS.Timeout | undefined;

    const killGroup = (): void => {
      if (killing || child.pid === undefined) return;
      killing = true;
      killProcessGroup(child.pid, graceMs);
    };
    const finish = (): void => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      clearTimeout(closeTimer);
      signal?.removeEventListener('abort', onAbort);
      resolve(outcome);
    };
    const timer = setTimeout(() => {
      outcome.timedOut = true;
      killGroup();
    }, options.timeoutMs);
    const onAbort = (): void => {
      outcome.abortReason = signal?.reason;
      killGroup();
    };
    if (signal?.aborted) onAbort();
    else signal?.addEventListener('abort', onAbort, { once: true });

    child.stdout.on('data', options.onStdout);
    child.stderr.on('data', options.onStderr);
    child.on('error', (err) => {
      // After a successful spawn, errors come from kill() and change nothing about the outcome.
      if (child.pid !== undefined) return;
      outcome.spawnError = err;
      finish();
    });
    child.on('exit', (code, exitSignal) => {
      outcome.exitCode = code;
      outcome.exitSignal = exitSignal;
      clearTimeout(timer);
      // The leader is reaped, but its group lives on while any member does. The id could only
      // be reused by a new group leader with the same pid: not within the milliseconds this takes.
      if (options.endsWithLeader === true && child.pid !== undefined) forgetGroup(child.pid);
      else killGroup();
      closeTimer = setTimeout(() => {
        child.stdout.destroy();
        child.stderr.destroy();
        finish();
      }, graceMs + CLOSE_SLACK_MS);
    });
    child.on('close', finish);
  });
}

/**
 * Process groups started here that may still have members. When the server exits (say, right
 * after a shutdown aborted a command that ignores SIGTERM), the timers that would send SIGKILL
 * never fire; an exit handler, which may only do synchronous work, sends it instead.
 */
const liveGroups = new Map<number, 'SIGTERM' | 'SIGKILL'>();
let exitHandlerInstalled = false;

/** Sends the group `onServerExit` if the server exits while it may still have members. */
export function trackGroup(pgid: number, onServerExit: 'SIGTERM' | 'SIGKILL'): void {
  liveGroups.set(pgid, onServerExit);
  if (exitHandlerInstalled) return;
  exitHandlerInstalled = true;
  process.on('exit', () => {
    for (const [group, signal] of liveGroups) signalGroup(group, signal);
  });
}

/** True while a process with this pid exists (EPERM: it does, and belongs to another user). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Stops tracking a group known to be empty. */
export function forgetGroup(pgid: number): void {
  liveGroups.delete(pgid);
}

/**
 * Sends SIGTERM to a process group, then SIGKILL if any of it is still running after `graceMs`.
 * Runs on by itself (polling), so callers need not wait for it.
 */
export function killProcessGroup(pgid: number, graceMs = KILL_GRACE_MS): void {
  if (!signalGroup(pgid, 'SIGTERM')) {
    liveGroups.delete(pgid);
    return;
  }
  const deadline = Date.now() + graceMs;
  const poll = async (): Promise<void> => {
    if (!(await processGroupRunning(pgid))) {
      liveGroups.delete(pgid);
      return;
    }
    if (Date.now() >= deadline) {
      signalGroup(pgid, 'SIGKILL');
      liveGroups.delete(pgid);
      return;
    }
    setTimeout(() => void poll(), POLL_MS);
  };
  setTimeout(() => void poll(), POLL_MS);
}

/**
 * True while a member of the process group is running. Zombies do not count: killed members that
 * were orphaned wait for PID 1 to reap them, and an init that reaps slowly (or a container whose
 * PID 1 never does) would otherwise keep the group "alive" for good. Outside Linux, any member counts.
 */
export async function processGroupRunning(pgid: number): Promise<boolean> {
  if (!signalGroup(pgid, 0)) return false;
  if (process.platform !== 'linux') return true;
  let entries: string[];
  try {
    entries = await readdir('/proc');
  } catch {
    return true;
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = await readFile(`/proc/${entry}/stat`, 'utf8');
      // Fields after the command name, which is in parentheses and may hold spaces: state ppid pgrp ...
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[2]) === pgid && fields[0] !== 'Z') return true;
    } catch {
      // The process ended while being read.
    }
  }
  return false;
}

function signalGroup(pgid: number, sig: NodeJS.Signals | 0): boolean {
  try {
    process.kill(-pgid, sig);
    return true;
  } catch (err) {
    // EPERM: members exist that this user may not signal (a setuid program); they still exist.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
