import { realpath } from 'node:fs/promises';
import path from 'node:path';
import { commandEnv, runProcess } from '../proc/process.js';

/** The bubblewrap program, looked up on PATH. */
export const BWRAP = 'bwrap';

const CHECK_TIMEOUT_MS = 10_000;
const MAX_REASON_CHARS = 500;

/** What the sandbox hides besides /tmp, /run and the server's processes: empty directories and files. */
export interface HiddenPaths {
  /** Each is covered by an empty tmpfs (a workspace below one stays visible). */
  directories: readonly string[];
  /** Each is covered by /dev/null on a mount that allows no devices: it exists, and opening it fails (EACCES). */
  files: readonly string[];
}

const NOTHING_HIDDEN: HiddenPaths = { directories: [], files: [] };

/** What bubblewrap replaces with empty directories of the sandbox's own, so nothing there needs hiding. */
const BWRAP_PRIVATE = ['/tmp', '/run'];

/**
 * Where orchestrators put secrets outside /run, which the sandbox replaces anyway (Docker and
 * Kubernetes mount them at /run/secrets and /var/run/secrets; /var/run is usually a link to /run).
 */
const SECRET_DIRECTORIES = ['/run/secrets', '/var/run/secrets'];

/**
 * Directories shared by the whole system: a secret file in one of them is hidden by itself, never
 * with its directory, which holds what every program needs. Also everything under /usr.
 */
const SHARED_DIRECTORIES = new Set(['/var/lib', '/var/cache', '/var/log', '/var/tmp', '/var/opt', '/var/spool', '/var/run']);

/**
 * bubblewrap options that confine a command: the whole file system read-only, the workspace
 * writable, a private /tmp and /run (the latter hides the host's service sockets, which a
 * read-only mount would still let a process connect to, and /run/secrets), the `hidden` paths
 * covered, fresh /proc and /dev, and every namespace unshared: no network, its own PIDs, IPC and
 * hostname. The fresh /proc shows only the sandbox's own processes, so the server's environment
 * (/proc/<pid>/environ, which holds TOOLPORT_API_KEYS) is out of reach. All capabilities are
 * dropped, which matters when the server runs as root (bwrap keeps root's capabilities otherwise).
 *
 * `--die-with-parent` ties the sandbox to the bwrap process, and with its own PID namespace the
 * sandbox ends when its init process does, so killing bwrap's process group (what the Bash tool
 * does on timeout) kills everything inside, even processes that called setsid. `--new-session`
 * is left out: the Bash tool already starts bwrap in a session of its own, without a terminal.
 *
 * The workspace is bound after /tmp, /run and the hidden directories so that a workspace below
 * one of them stays visible; hidden files are never inside the workspace (see `hiddenPaths`).
 *
 * With `tmpSize` (bytes, 0 for none), no file system a command can write to is held in memory
 * without a bound: /tmp and /dev/shm are tmpfs of that size each (bwrap's --size, 0.8.0 and
 * later); bwrap's own /dev tmpfs (where /dev/shm would otherwise be a directory), /run and the
 * hidden directories are made read-only once everything below them is mounted.
 */
export function bwrapArgs(workspaceRoot: string, hidden: HiddenPaths = NOTHING_HIDDEN, tmpSize = 0, network = false): string[] {
  const sized = tmpSize > 0 ? ['--size', String(tmpSize)] : [];
  return [
    '--ro-bind',
    '/',
    '/',
    '--dev',
    '/dev',
    ...(tmpSize > 0 ? [...sized, '--tmpfs', '/dev/shm', '--remount-ro', '/dev'] : []),
    '--proc',
    '/proc',
    ...sized,
    '--tmpfs',
    '/tmp',
    '--tmpfs',
    '/run',
    ...hidden.directories.flatMap((dir) => ['--tmpfs', dir]),
    ...hidden.files.flatMap((file) => ['--ro-bind', '/dev/null', file]),
    '--bind',
    workspaceRoot,
    workspaceRoot,
    ...(tmpSize > 0 ? ['/run', ...hidden.directories].flatMap((dir) => ['--remount-ro', dir]) : []),
    '--chdir',
    workspaceRoot,
    '--unshare-all',
    // TOOLPORT_BASH_NETWORK=all: the host's network namespace, where everything else stays unshared.
    ...(network ? ['--share-net'] : []),
    '--die-with-parent',
    '--cap-drop',
    'ALL',
  ];
}

/** The program and arguments that run `bash -c command` inside the sandbox (see `bwrapArgs` for `tmpSize`). */
export function sandboxedBash(
  workspaceRoot: string,
  command: string,
  hidden: HiddenPaths = NOTHING_HIDDEN,
  tmpSize = 0,
  network = false,
): { file: string; args: string[] } {
  return { file: BWRAP, args: [...bwrapArgs(workspaceRoot, hidden, tmpSize, network), '--', 'bash', '-c', command] };
}

/**
 * What the sandbox should hide, given the files the server reads its secrets and configuration
 * from (the API keys file, plug-in files): each file, or its whole directory when that is the
 * file's own (at least two levels below /, and not a shared system directory such as /etc or
 * anything under /usr), plus /var/run/secrets when it is not under /run, plus `directories` (the
 * other keys' workspaces) whole. Paths are made canonical; missing ones are skipped (bwrap cannot
 * cover what does not exist), and so are paths already private in the sandbox (`privateInSandbox`:
 * bubblewrap's /tmp and /run; none under Landlock) or inside the workspace, which the file tools
 * can read anyway, and directories that hold the workspace.
 */
export async function hiddenPaths(
  workspaceRoot: string,
  secretFiles: readonly string[],
  hiddenDirectories: readonly string[] = [],
  privateInSandbox: readonly string[] = BWRAP_PRIVATE,
): Promise<HiddenPaths> {
  const directories = new Set<string>();
  const files = new Set<string>();
  const alreadyPrivate = (p: string): boolean => [...privateInSandbox, workspaceRoot].some((dir) => isWithin(p, dir));
  for (const dir of SECRET_DIRECTORIES) {
    const real = await canonical(dir);
    if (real !== undefined && !alreadyPrivate(real)) directories.add(real);
  }
  for (const file of secretFiles) {
    const real = await canonical(file);
    if (real === undefined || alreadyPrivate(real)) continue;
    // Where the file is named, and where it really is: a mounted secret is a symlink into a
    // directory that the next rotation replaces, so the named directory is hidden too.
    for (const dir of new Set([path.dirname(real), await canonical(path.dirname(path.resolve(file)))])) {
      if (dir === undefined || alreadyPrivate(dir)) continue;
      if (ownDirectory(dir) && !isWithin(workspaceRoot, dir)) directories.add(dir);
    }
    if (!directories.has(path.dirname(real))) files.add(real);
  }
  for (const dir of hiddenDirectories) {
    const real = await canonical(dir);
    if (real !== undefined && !alreadyPrivate(real) && !isWithin(workspaceRoot, real)) directories.add(real);
  }
  const coveredByDirectory = (p: string): boolean => [...directories].some((dir) => dir !== p && isWithin(p, dir));
  return {
    directories: [...directories].filter((dir) => !coveredByDirectory(dir)).sort(),
    files: [...files].filter((file) => !coveredByDirectory(file)).sort(),
  };
}

/**
 * Tries the sandbox once with a trivial command. Returns why it cannot work here (bwrap missing,
 * namespaces refused by the kernel or the container runtime, a bwrap older than 0.8.0 given a
 * `tmpSize`, ...), or undefined when it works.
 */
export async function sandboxUnavailableReason(
  workspaceRoot: string,
  bwrap = BWRAP,
  hidden: HiddenPaths = NOTHING_HIDDEN,
  tmpSize = 0,
  network = false,
): Promise<string | undefined> {
  const stderr: Buffer[] = [];
  const { args } = sandboxedBash(workspaceRoot, 'exit 0', hidden, tmpSize, network);
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

/** A directory that belongs to one program or user rather than to the whole system. */
function ownDirectory(dir: string): boolean {
  const depth = dir.split('/').filter(Boolean).length;
  return depth >= 2 && !isWithin(dir, '/usr') && !SHARED_DIRECTORIES.has(dir);
}

/** True when `p` is `dir` or below it (both canonical). */
function isWithin(p: string, dir: string): boolean {
  return p === dir || p.startsWith(dir === '/' ? '/' : `${dir}/`);
}

async function canonical(p: string): Promise<string | undefined> {
  try {
    return await realpath(p);
  } catch {
    return undefined;
  }
}
