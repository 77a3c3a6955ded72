import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { confineFields, DEVICES, FS_ALL, FS_READ, FS_READ_EXEC, grantExcept, SYSTEM_READ, SYSTEM_READ_EXEC, type PathRule } from './landlock.js';
import { seccompFilter } from './seccomp.js';

/** How often the reaper counts a confined call's processes, memory and private directory. */
export const WATCH_INTERVAL_MS = 100;

export interface LandlockProfileOptions {
  workspaceRoot: string;
  /** Paths no command may read although a readable directory holds them: the server's secrets, other workspaces. */
  hidden: readonly string[];
  /** Commands may use the network (TOOLPORT_BASH_NETWORK=all). */
  network: boolean;
  /** What the reaper watches (0: not watched): processes and threads, resident bytes, bytes of the private directory. */
  watch: { tasks: number; memory: number; tmp: number };
  /** Directories of programs to add to the system's (default: the server's own Node.js and PATH). */
  programDirectories?: readonly string[];
}

/**
 * What a Landlock-confined Bash call may touch: read and run the system's programs and libraries
 * (and the Node.js the server runs on, and the directories on PATH), read /proc and /sys, use a
 * few devices, and write only the workspace and the call's private directory; never the hidden
 * paths. The rules below the system are made once; each call adds its private directory.
 */
export class LandlockProfile {
  readonly rules: readonly PathRule[];
  readonly #options: LandlockProfileOptions;
  readonly #seccomp: Buffer;

  private constructor(rules: readonly PathRule[], options: LandlockProfileOptions) {
    this.rules = rules;
    this.#options = options;
    this.#seccomp = seccompFilter({ network: options.network });
  }

  static async make(options: LandlockProfileOptions): Promise<LandlockProfile> {
    const programs = options.programDirectories ?? (await programDirectories());
    const rules = [
      ...(await grantExcept([...SYSTEM_READ_EXEC, ...programs], FS_READ_EXEC, options.hidden)),
      ...(await grantExcept(SYSTEM_READ, FS_READ, options.hidden)),
      ...DEVICES,
      { path: options.workspaceRoot, access: FS_ALL },
    ];
    return new LandlockProfile(rules, options);
  }

  /** The reaper's fields for one call, whose private directory is `privateDir`. */
  fieldsFor(privateDir: string): string[] {
    const { watch } = this.#options;
    return [
      ...confineFields([...this.rules, { path: privateDir, access: FS_ALL }], this.#seccomp, this.#options.network),
      `watch ${WATCH_INTERVAL_MS} ${watch.tasks} ${watch.memory} ${watch.tmp} ${privateDir}`,
    ];
  }
}

/**
 * Where the programs commands run live beyond the system's directories: the installation of the
 * Node.js the server runs on (its prefix, with npm in lib/node_modules, when it has that layout;
 * else its own directory) and each absolute directory on PATH, never `/`. PATH is read here, as
 * `commandEnv` reads it: it describes the machine, not toolport.
 */
export async function programDirectories(): Promise<string[]> {
  const bin = path.dirname(process.execPath);
  const prefix = path.dirname(bin);
  const installed = path.basename(bin) === 'bin' && (await isDirectory(path.join(prefix, 'lib', 'node_modules')));
  const onPath = (process.env.PATH ?? '').split(':').filter((dir) => path.isAbsolute(dir));
  return [...new Set([installed ? prefix : bin, ...onPath])].filter((dir) => dir !== '/');
}

async function isDirectory(p: string): Promise<boolean> {
  try {
    return (await stat(p)).isDirectory();
  } catch {
    return false;
  }
}

/**
 * True when this process has a user namespace of its own (a rootless container's): RLIMIT_NPROC
 * then counts its user's processes there, not the whole machine's processes of that uid.
 */
export async function ownUserNamespace(): Promise<boolean> {
  try {
    const map = (await readFile('/proc/self/uid_map', 'utf8')).trim().split(/\s+/);
    return !(map.length === 3 && map[0] === '0' && map[1] === '0' && map[2] === '4294967295');
  } catch {
    return false;
  }
}
