import { commandEnv, runProcess } from './process.js';

/** The bubblewrap program, looked up on PATH. */
export const BWRAP = 'bwrap';

const CHECK_TIMEOUT_MS = 10_000;
const MAX_REASON_CHARS = 500;

/**
 * bubblewrap options that confine a command: the whole file system read-only, the workspace
 * writable, a private /tmp and /run (the latter hides the host's service sockets, which a
 * read-only mount would still let a process connect to), fresh /proc and /dev, and every
 * namespace unshared: no network, its own PIDs, IPC and hostname. All capabilities are dropped,
 * which matters when the server runs as root (bwrap keeps root's capabilities otherwise).
 *
 * `--die-with-parent` ties the sandbox to the bwrap process, and with its own PID namespace the
 * sandbox ends when its init process does, so killing bwrap's process group (what the Bash tool
 * does on timeout) kills everything inside, even processes that called setsid. `--new-session`
 * is left out: the Bash tool already starts bwrap in a session of its own, without a terminal.
 *
 * The workspace is bound after /tmp and /run so that a workspace below either stays visible.
 */
export function bwrapArgs(workspaceRoot: string): string[] {
  return [
    '--ro-bind', '/', '/',
    '--dev', '/dev',
    '--proc', '/proc',
    '--tmpfs', '/tmp',
    '--tmpfs', '/run',
    '--bind', workspaceRoot, workspaceRoot,
    '--chdir', workspaceRoot,
    '--unshare-all',
    '--die-with-parent',
    '--cap-drop', 'ALL',
  ];
}

/** The program and arguments that run `bash -c command` inside the sandbox. */
export function sandboxedBash(workspaceRoot: string, command: string): { file: string; args: string[] } {
  return { file: BWRAP, args: [...bwrapArgs(workspaceRoot), '--', 'bash', '-c', command] };
}

/**
 * Tries the sandbox once with a trivial command. Returns why it cannot work here (bwrap missing,
 * namespaces refused by the kernel or the container runtime, ...), or undefined when it works.
 */
export async function sandboxUnavailableReason(workspaceRoot: string, bwrap = BWRAP): Promise<string | undefined> {
  const stderr: Buffer[] = [];
  const { args } = sandboxedBash(workspaceRoot, 'exit 0');
  const outcome = await runProcess(bwrap, args, {
    cwd: workspaceRoot,
    env: commandEnv({ TMPDIR: '/tmp' }),
    timeoutMs: CHECK_TIMEOUT_MS,
    onStdout: () => {},
    onStderr: (chunk) => stderr.push(chunk),
  });
  if (outcome.spawnError) {
    return outcome.spawnError.code === 'ENOENT'
      ? `${bwrap} was not found on PATH; install it (Debian/Ubuntu: apt-get install bubblewrap)`
      : `${bwrap} could not be started: ${outcome.spawnError.message}`;
  }
  if (outcome.timedOut) return `a trial run of ${bwrap} did not finish within ${CHECK_TIMEOUT_MS} ms`;
  if (outcome.exitCode === 0) return undefined;
  const message = Buffer.concat(stderr).toString('utf8').trim().slice(0, MAX_REASON_CHARS);
  const how = outcome.exitSignal ? `was killed by ${outcome.exitSignal}` : `exited with code ${outcome.exitCode}`;
  return `a trial run of ${bwrap} ${how}${message ? `: ${message}` : ''}`;
}
