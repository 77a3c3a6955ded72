import { chmod, lstat, mkdir, mkdtemp, readdir, rm, rmdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { processAlive } from '../proc/process.js';

// Named after the server's pid, so that a later start can tell a dead server's leftovers.
const PREFIX = 'toolport-calls-';
const LEFTOVER = /^toolport-calls-(\d+)-/;

/** A directory of one call's own, which it may write: its TMPDIR and HOME. */
export interface PrivateDirectory {
  readonly path: string;
  /** Removes it and whatever the call left in it (once its processes are gone). */
  remove(): Promise<void>;
}

/**
 * The private directories of Landlock-confined calls: one per call, mode 0700, below a directory
 * of the server's own in the system's temporary directory. A call can reach no other call's (its
 * Landlock rules name only its own), and what it leaves there goes with it. A start removes the
 * directories of servers that are gone.
 */
export class PrivateDirectories {
  readonly #base: string;
  #closed = false;

  private constructor(base: string) {
    this.#base = base;
  }

  /** Makes the server's directory; rejects with why it cannot (a read-only /tmp, say). */
  static async open(parent = tmpdir()): Promise<PrivateDirectories> {
    await sweepLeftovers(parent);
    return new PrivateDirectories(await mkdtemp(path.join(parent, `${PREFIX}${process.pid}-`)));
  }

  get base(): string {
    return this.#base;
  }

  async create(): Promise<PrivateDirectory> {
    if (this.#closed) throw new Error('the private directories were closed');
    const dir = await mkdtemp(path.join(this.#base, 'call-'));
    return { path: dir, remove: () => removeTree(dir) };
  }

  /** Removes the server's directory and every call's left in it. */
  async close(): Promise<void> {
    this.#closed = true;
    await removeTree(this.#base);
  }
}

/**
 * Removes a tree a command wrote, following no symlink. A command may have taken the write bit off
 * its directories, which stops `rm`: they get it back, and the removal is tried once more.
 */
export async function removeTree(dir: string): Promise<void> {
  try {
    // Most calls leave their directory empty: one system call, where rm walks it in JavaScript.
    await rmdir(dir);
    return;
  } catch {
    // Not empty, or gone.
  }
  try {
    await rm(dir, { recursive: true, force: true });
  } catch {
    await makeWritable(dir);
    await rm(dir, { recursive: true, force: true }).catch(() => {});
  }
}

async function makeWritable(dir: string): Promise<void> {
  try {
    if (!(await lstat(dir)).isDirectory()) return;
    await chmod(dir, 0o700);
    for (const entry of await readdir(dir)) await makeWritable(path.join(dir, entry));
  } catch {
    // Gone meanwhile, or not ours: rm says what is left.
  }
}

async function sweepLeftovers(parent: string): Promise<void> {
  await mkdir(parent, { recursive: true });
  for (const entry of await readdir(parent)) {
    const pid = LEFTOVER.exec(entry)?.[1];
    if (pid === undefined || Number(pid) === process.pid || processAlive(Number(pid))) continue;
    await removeTree(path.join(parent, entry));
  }
}
