import { constants } from 'node:fs';
import { access, lstat, readlink, realpath, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { commandEnv, runProcess } from '../proc/process.js';
import type { Workspace } from '../fs/workspace.js';

/**
 * Where Grep runs ripgrep. `on`: only inside a bubblewrap sandbox that sees nothing but the
 * workspace and the system's programs and libraries; `off`: directly, from the held directory;
 * `auto`: in the sandbox when a trial run at the first call works, directly otherwise.
 */
export type GrepConfinement = 'auto' | 'on' | 'off';

const BWRAP = 'bwrap';
const PROBE_TIMEOUT_MS = 10_000;
// Besides /usr, what a dynamically linked rg may need: bound read-only, or made again as the link it is.
const SYSTEM_ENTRIES = ['/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'] as const;
const SYSTEM_DIRS = ['/usr', ...SYSTEM_ENTRIES];

/** How this server starts rg, decided once. */
export interface RgRunner {
  /** The rg program: absolute when found, else as configured (so starting it reports ENOENT). */
  readonly rg: string;
  /** False when rg was not found: nothing was decided, and starting it tells the client to install it. */
  readonly found: boolean;
  /** The bubblewrap options rg runs under, or undefined when it runs directly. */
  readonly sandbox: readonly string[] | undefined;
  /** Why rg does not run in the sandbox although `auto` or `on` asked for it; for the log and refusals. */
  readonly problem: string | undefined;
}

/** One rg process: what to start, where, and how its output names files. */
export interface RgCommand {
  file: string;
  args: string[];
  cwd: string;
  /** Output lines (and error lines) that start with `from` start with `to` instead. */
  from: string | undefined;
  to: string;
}

/**
 * The path through which another process reaches a descriptor this server holds. rg and bwrap
 * start from it (as their working directory or a file argument); the kernel resolves it to the
 * held file or directory, so nothing swapped in the workspace meanwhile can redirect them.
 */
function serverHeld(handle: FileHandle): string {
  return `/proc/${process.pid}/fd/${handle.fd}`;
}

/**
 * Bubblewrap options for rg: the system directories read-only, the workspace root read-only at its
 * own path (bound from the held root, bwrap's working directory, through /proc/self/cwd), empty
 * /tmp, fresh /proc and /dev, every namespace unshared (no network), no capabilities. Nothing
 * outside the workspace but public system files exists in there, so a symlink planted or swapped
 * while rg walks the tree leads nowhere. Working directory: the root.
 */
async function sandboxArgs(root: string, rg: string): Promise<string[]> {
  const args = ['--ro-bind', '/usr', '/usr'];
  for (const entry of SYSTEM_ENTRIES) {
    const stats = await lstat(entry).catch(() => undefined);
    if (stats?.isSymbolicLink()) args.push('--symlink', await readlink(entry), entry);
    else if (stats?.isDirectory()) args.push('--ro-bind', entry, entry);
  }
  // The dynamic linker finds libraries faster with its cache; it names nothing but library paths.
  args.push('--ro-bind-try', '/etc/ld.so.cache', '/etc/ld.so.cache');
  args.push('--proc', '/proc', '--dev', '/dev', '--tmpfs', '/tmp');
  if (!SYSTEM_DIRS.some((dir) => rg.startsWith(`${dir}/`))) args.push('--ro-bind', rg, rg);
  args.push('--ro-bind', '/proc/self/cwd', root, '--chdir', root);
  // No --new-session: rg must stay in the process group that is killed on timeout (see sandbox.ts).
  args.push('--unshare-all', '--die-with-parent', '--cap-drop', 'ALL');
  return args;
}

/** The absolute path of a program on PATH (or the given path, when it has a "/"), canonical; undefined when missing. */
async function findProgram(name: string): Promise<string | undefined> {
  const candidates = name.includes('/')
    ? [name]
    : (commandEnv().PATH ?? '')
        .split(':')
        .filter(Boolean)
        .map((dir) => path.join(dir, name));
  for (const candidate of candidates) {
    try {
      await access(candidate, constants.X_OK);
      return await realpath(candidate);
    } catch {
      // Not here.
    }
  }
  return undefined;
}

/**
 * Decides how rg runs: tries `rg --version` inside the sandbox once (unless `off`). Never throws;
 * a sandbox that does not work is reported in `problem`.
 */
export async function rgRunner(ws: Workspace, rgPath: string, confine: GrepConfinement): Promise<RgRunner> {
  const rg = await findProgram(rgPath);
  if (rg === undefined) return { rg: rgPath, found: false, sandbox: undefined, problem: undefined };
  if (confine === 'off') return { rg, found: true, sandbox: undefined, problem: undefined };
  const sandbox = await sandboxArgs(ws.root, rg);
  const stderr: Buffer[] = [];
  const outcome = await runProcess(BWRAP, [...sandbox, '--', rg, '--version'], {
    cwd: serverHeld(ws.rootDir),
    env: commandEnv(),
    timeoutMs: PROBE_TIMEOUT_MS,
    onStdout: () => {},
    onStderr: (chunk) => stderr.push(chunk),
  });
  if (outcome.exitCode === 0) return { rg, found: true, sandbox, problem: undefined };
  const problem = outcome.spawnError
    ? `${BWRAP} could not be started (${outcome.spawnError.code ?? outcome.spawnError.message}); install bubblewrap`
    : `a trial run of ${BWRAP} failed: ${Buffer.concat(stderr).toString('utf8').trim().slice(0, 300) || `exit code ${outcome.exitCode}`}`;
  return { rg, found: true, sandbox: undefined, problem };
}

/**
 * The rg process for one search of a pinned target, with `rgArgs` the options (ending with `--`
 * and the pattern). In the sandbox, rg runs from the root and is given the target's canonical
 * relative path, which can only lead somewhere inside. Directly, it runs in the held directory
 * (`.`), or is given the held file itself, and its output is renamed to paths from the root.
 */
export function rgCommand(
  runner: RgRunner,
  ws: Workspace,
  target: { relative: string; dir?: FileHandle; file?: FileHandle },
  rgArgs: readonly string[],
): RgCommand {
  if (runner.sandbox !== undefined) {
    return {
      file: BWRAP,
      args: [...runner.sandbox, '--', runner.rg, ...rgArgs, target.relative],
      cwd: serverHeld(ws.rootDir),
      // Searching "." makes rg print "./" before every path.
      from: target.relative === '.' ? './' : undefined,
      to: '',
    };
  }
  if (target.file !== undefined) {
    const held = serverHeld(target.file);
    return { file: runner.rg, args: [...rgArgs, held], cwd: serverHeld(ws.rootDir), from: held, to: target.relative };
  }
  if (target.dir === undefined) throw new Error('rgCommand needs a held directory or file');
  return {
    file: runner.rg,
    args: [...rgArgs, '.'],
    cwd: serverHeld(target.dir),
    from: './',
    to: target.relative === '.' ? '' : `${target.relative}/`,
  };
}

/**
 * How rg's output is renamed to paths from the workspace root: a result line that starts with
 * `from` gets `to` instead; in error output (whose lines may start with "rg: "), the held file's
 * /proc path is replaced wherever it is, so no message names it.
 */
export function renamer(command: RgCommand): { line: (line: string) => string; errors: (text: string) => string } {
  const { from, to } = command;
  if (from === undefined) return { line: (l) => l, errors: (t) => t };
  const line = (l: string): string => (l.startsWith(from) ? to + l.slice(from.length) : l);
  if (from.startsWith('/proc/')) return { line, errors: (t) => t.replaceAll(from, to) };
  const errorLine = (l: string): string => (l.startsWith('rg: ') ? `rg: ${line(l.slice(4))}` : line(l));
  return { line, errors: (t) => t.split('\n').map(errorLine).join('\n') };
}

/** Sandbox failures are bwrap's own messages, which start with its name. */
export function isSandboxFailure(runner: RgRunner, stderr: string): boolean {
  return runner.sandbox !== undefined && stderr.startsWith(`${BWRAP}:`);
}
