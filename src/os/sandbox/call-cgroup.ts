import { mkdir, readdir, readFile, rmdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { CgroupEvents } from './limit-notes.js';
import { processAlive } from '../proc/process.js';

/** The cgroup controllers a Bash call is bounded by: its processes (threads included) and its memory. */
export type CgroupController = 'pids' | 'memory';

/** What each call's cgroup allows; 0 leaves that controller out. */
export interface CgroupLimits {
  maxProcesses: number;
  maxMemory: number;
}

/** Where the kernel says this process's cgroups are: its own /proc files, or a test's. */
export interface CgroupSources {
  cgroupFile: string;
  mountinfoFile: string;
}

const SELF: CgroupSources = { cgroupFile: '/proc/self/cgroup', mountinfoFile: '/proc/self/mountinfo' };
const LIMIT_FILES: Record<CgroupController, string> = { pids: 'pids.max', memory: 'memory.limit_in_bytes' };
const CALL_NAME = /^toolport-(\d+)-\d+$/;
const EMPTY_POLL_MS = 20;
const EMPTY_TIMEOUT_MS = 10_000;
// Above the Bash tool's calls at once: a cgroup is kept for the next call, since making and
// removing one cost about 10 ms per call here (cgroup v1), more than the sandbox itself.
const MAX_IDLE = 8;
// What a cgroup may still be charged with and be kept for another call (kernel bookkeeping).
const REUSE_CHARGE_BYTES = 1024 * 1024;
// One sequence for the process: each Bash tool (one per workspace) has cgroups of its own, all named after the process.
let nextName = 0;

/**
 * Makes a cgroup per Bash call below the server's own, in each cgroup v1 hierarchy of a controller
 * a limit needs (pids, memory) where the server may write: a bound on the call as a whole, which
 * holds whoever the server runs as (RLIMIT_NPROC does not bind root) and whatever the command
 * forks. The command joins it itself, before it starts anything (see `joinCommand`), and
 * nothing in the sandbox can leave it: /sys is read-only there and every capability is dropped.
 * cgroup v2 is not used: a delegated v2 cgroup takes no call cgroups while the server's own
 * processes sit in it, and moving the server is not this tool's business.
 */
export class CallCgroups {
  readonly controllers: readonly CgroupController[];
  readonly #bases: ReadonlyMap<CgroupController, string>;
  readonly #limits: CgroupLimits;
  readonly #idle: CallCgroup[] = [];

  private constructor(bases: ReadonlyMap<CgroupController, string>, limits: CgroupLimits) {
    this.#bases = bases;
    this.controllers = [...bases.keys()];
    this.#limits = limits;
  }

  /**
   * Finds the hierarchies and tries each once (make a call cgroup, set its limit, remove it).
   * Rejects, saying why, when no controller a limit needs can be used; `unusable` lists those left out.
   */
  static async open(limits: CgroupLimits, sources: CgroupSources = SELF): Promise<{ cgroups: CallCgroups; unusable: string[] }> {
    const wanted: CgroupController[] = [];
    if (limits.maxProcesses > 0) wanted.push('pids');
    if (limits.maxMemory > 0) wanted.push('memory');
    if (wanted.length === 0) throw new Error('no limit needs a cgroup');
    const found = await ownHierarchies(sources);
    const bases = new Map<CgroupController, string>();
    const unusable: string[] = [];
    for (const controller of wanted) {
      const base = found.get(controller);
      if (base === undefined) {
        unusable.push(`${controller}: no cgroup v1 hierarchy of it is mounted`);
        continue;
      }
      const trial = new CallCgroups(new Map([[controller, base]]), limits);
      try {
        await trial.#sweep(base);
        await (await trial.create()).remove();
        bases.set(controller, base);
      } catch (err) {
        unusable.push(`${controller}: ${(err as Error).message}`);
      }
    }
    if (bases.size === 0) throw new Error(unusable.join('; '));
    return { cgroups: new CallCgroups(bases, limits), unusable };
  }

  /** A cgroup for one call, with its limits set and no process in it: one a finished call left, or a new one. */
  async create(): Promise<CallCgroup> {
    const idle = this.#idle.pop();
    if (idle !== undefined) return idle.renewed();
    const name = `toolport-${process.pid}-${nextName++}`;
    const dirs: Array<[CgroupController, string]> = [];
    try {
      for (const [controller, base] of this.#bases) {
        const dir = path.join(base, name);
        await mkdir(dir);
        dirs.push([controller, dir]);
        const limit = controller === 'pids' ? this.#limits.maxProcesses : this.#limits.maxMemory;
        await writeFile(path.join(dir, LIMIT_FILES[controller]), String(limit));
      }
    } catch (err) {
      void new CallCgroup(dirs, []).remove();
      throw new Error(`could not make the call's cgroup: ${(err as Error).message}`);
    }
    return new CallCgroup(dirs, this.#idle).renewed();
  }

  /** Removes the call cgroups of servers that are gone (left behind when one was killed). */
  async #sweep(base: string): Promise<void> {
    for (const entry of await readdir(base)) {
      const pid = CALL_NAME.exec(entry)?.[1];
      if (pid !== undefined && !processAlive(Number(pid))) await rmdir(path.join(base, entry)).catch(() => {});
    }
  }
}

/** One call's cgroups: the files its command joins through, what they counted, and their release. */
export class CallCgroup {
  readonly #dirs: ReadonlyArray<readonly [CgroupController, string]>;
  readonly #idle: CallCgroup[];
  // The counters when the call began: a cgroup serves one call after another.
  #before: CgroupCounts = { forksRefused: 0, oomKills: 0 };

  constructor(dirs: ReadonlyArray<readonly [CgroupController, string]>, idle: CallCgroup[]) {
    this.#dirs = dirs;
    this.#idle = idle;
  }

  /** This cgroup, with its counters read afresh for a new call. */
  async renewed(): Promise<CallCgroup> {
    this.#before = await this.#counts();
    return this;
  }

  /**
   * A shell command that moves the shell running it into the call's cgroups, or ends it with
   * code 126 and a message: a command that could not join is not run at all.
   */
  joinCommand(): string {
    const writes = this.#dirs.map(([, dir]) => `echo $$ > ${shellQuoted(path.join(dir, 'cgroup.procs'))}`).join(' && ');
    return `{ ${writes}; } 2>/dev/null || { echo "toolport: could not join the call's cgroup" >&2; exit 126; }`;
  }

  /** The files a process writes its pid to to join the call's cgroups (for a joiner that is not a shell). */
  procsFiles(): string[] {
    return this.#dirs.map(([, dir]) => path.join(dir, 'cgroup.procs'));
  }

  /** Whether, during this call, the pids controller refused a fork, and the memory controller killed a process. */
  async events(): Promise<CgroupEvents> {
    const now = await this.#counts();
    return { processes: now.forksRefused > this.#before.forksRefused, memory: now.oomKills > this.#before.oomKills };
  }

  /**
   * Once its last process has exited (polled for a while, in the background), keeps the cgroup
   * for the next call, or removes it when enough are kept. Resolves when that is done.
   */
  async release(): Promise<void> {
    if (!(await this.#whenEmpty())) return;
    if (this.#idle.length < MAX_IDLE && (await this.#unburdened())) this.#idle.push(this);
    else await this.remove();
  }

  /**
   * Whether the memory cgroup charges (almost) nothing now that its processes are gone. Files a
   * command left in a RAM file system (/dev/shm without the sandbox, a workspace on tmpfs) stay
   * charged to it, and the next call, any caller's, would start with that much of its limit
   * spent. Page cache is reclaimed first (`memory.force_empty`); a cgroup still charged is
   * removed, and its charge goes to the server's own.
   */
  async #unburdened(): Promise<boolean> {
    for (const [controller, dir] of this.#dirs) {
      if (controller !== 'memory') continue;
      if ((await usage(dir)) <= REUSE_CHARGE_BYTES) return true;
      await writeFile(path.join(dir, 'memory.force_empty'), '0').catch(() => {});
      return (await usage(dir)) <= REUSE_CHARGE_BYTES;
    }
    return true;
  }

  /** Removes the cgroups, once their last process has exited (polled for a while). */
  async remove(): Promise<void> {
    if (!(await this.#whenEmpty())) return;
    for (const [, dir] of this.#dirs) await rmdir(dir).catch(() => {});
  }

  async #counts(): Promise<CgroupCounts> {
    const counts: CgroupCounts = { forksRefused: 0, oomKills: 0 };
    for (const [controller, dir] of this.#dirs) {
      if (controller === 'pids') counts.forksRefused = await counter(path.join(dir, 'pids.events'), 'max');
      else counts.oomKills = await counter(path.join(dir, 'memory.oom_control'), 'oom_kill');
    }
    return counts;
  }

  /** True once no process is left in any of the cgroups; false when some still are after a while. */
  async #whenEmpty(): Promise<boolean> {
    const deadline = Date.now() + EMPTY_TIMEOUT_MS;
    for (;;) {
      const contents = await Promise.all(this.#dirs.map(([, dir]) => readFile(path.join(dir, 'cgroup.procs'), 'utf8').catch(() => '')));
      if (contents.every((text) => text.trim() === '')) return true;
      if (Date.now() >= deadline) return false;
      // Unreferenced: a cgroup left for the next start's sweep never holds the server open.
      await new Promise((resolve) => setTimeout(resolve, EMPTY_POLL_MS).unref());
    }
  }
}

interface CgroupCounts {
  forksRefused: number;
  oomKills: number;
}

/** The directory of this process's own cgroup in each v1 hierarchy, by controller. */
async function ownHierarchies(sources: CgroupSources): Promise<Map<CgroupController, string>> {
  const [cgroup, mountinfo] = await Promise.all([readFile(sources.cgroupFile, 'utf8'), readFile(sources.mountinfoFile, 'utf8')]);
  const found = new Map<CgroupController, string>();
  for (const controller of ['pids', 'memory'] as const) {
    // hierarchy-id:controllers:path, with an empty list of controllers for cgroup v2.
    const own = cgroup
      .split('\n')
      .map((line) => line.split(':'))
      .find((fields) => fields[1]?.split(',').includes(controller));
    const ownPath = own?.slice(2).join(':');
    if (ownPath === undefined) continue;
    for (const line of mountinfo.split('\n')) {
      // id parent major:minor root mount-point options [optional fields] - fstype source super-options
      const [before, after] = line.split(' - ');
      const mount = before?.split(' ');
      const [fstype, , superOptions] = after?.split(' ') ?? [];
      if (mount === undefined || fstype !== 'cgroup' || !superOptions?.split(',').includes(controller)) continue;
      const [root = '/', mountPoint = ''] = [mount[3], mount[4]];
      if (root !== '/' && ownPath !== root && !ownPath.startsWith(`${root}/`)) continue;
      found.set(controller, path.join(unescapeMount(mountPoint), root === '/' ? ownPath : ownPath.slice(root.length)));
      break;
    }
  }
  return found;
}

/** Bytes charged to a v1 memory cgroup; unknown counts as too much to reuse. */
async function usage(dir: string): Promise<number> {
  const text = await readFile(path.join(dir, 'memory.usage_in_bytes'), 'utf8').catch(() => '');
  const bytes = Number(text.trim());
  return text.trim() === '' || !Number.isFinite(bytes) ? Infinity : bytes;
}

async function counter(file: string, name: string): Promise<number> {
  try {
    const match = new RegExp(`^${name} (\\d+)$`, 'm').exec(await readFile(file, 'utf8'));
    return match ? Number(match[1]) : 0;
  } catch {
    return 0;
  }
}

/** mountinfo writes space, tab, newline and backslash as octal escapes. */
function unescapeMount(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
}

function shellQuoted(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}
