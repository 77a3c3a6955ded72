import { createHash } from 'node:crypto';
import { constants, type BigIntStats } from 'node:fs';
import { lstat, open, type FileHandle } from 'node:fs/promises';
import { setTimeout as delay } from 'node:timers/promises';
import { abortable } from '../abortable.js';
import { FlockUnavailable, tryFlock, type Flock } from './flock.js';
import { heldPath } from './workspace.js';

/** How long a write waits for another holder of the file's lock (another server, a command holding a flock) before it gives up. */
export const LOCK_WAIT_MS = 35_000;

// The target is opened only to lock it: no symlink followed, no FIFO waited on.
const OPEN_TARGET = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

/** Another holder kept the file's lock for longer than a write takes. */
export class FileLockTimeout extends Error {
  override readonly name = 'FileLockTimeout';
}

/** The lock was lost while held: the lock helper died, so another process may be writing the file. */
export class FileLockLost extends Error {
  override readonly name = 'FileLockLost';
}

/** What the critical section of `withFileLock` gets. */
export interface HeldLock {
  /** The key its temporary files are named after. */
  readonly key: string;
  /** Throws `FileLockLost` unless the lock is still held; run just before the rename. */
  assertHeld(): void;
}

// The tail of each file's queue in this process: a caller waits for the one before it.
const queues = new Map<string, Promise<void>>();

/**
 * Runs `critical` while no other Edit or Write of the same file runs, in this process or in any
 * other that shares the workspace. In this process, callers queue in order, the file named by
 * identity (the holding directory's device and inode, and the name), so every path to it takes
 * the same turn. Across processes the lock is a flock(2) on the file itself, or, while the name
 * holds no regular file (a file being created), on the directory that holds it; it is taken
 * again whenever the name turns out to lead elsewhere once locked. A flock dies with the process
 * that holds it and is recorded nowhere in the workspace, so nothing a client plants there can
 * pass for a lock, however it is dated or named; a live holder (a command running `flock`) delays
 * the write for at most `LOCK_WAIT_MS`. Where the lock helper cannot run (no perl), only the
 * queue of this process orders writes.
 */
export async function withFileLock<T>(dir: FileHandle, name: string, signal: AbortSignal, critical: (lock: HeldLock) => Promise<T>): Promise<T> {
  const { dev, ino } = await dir.stat({ bigint: true });
  const key = lockKey(dev, ino, name);
  const before = queues.get(key) ?? Promise.resolve();
  let release!: () => void;
  const mine = new Promise<void>((resolve) => (release = resolve));
  const tail = before.then(() => mine);
  queues.set(key, tail);
  try {
    await abortable(before, signal);
    const flock = await lockName(dir, name, signal);
    try {
      return await critical({
        key,
        assertHeld() {
          if (flock?.lost === true) throw new FileLockLost('the server lost the lock on the file while writing it (its lock helper stopped)');
        },
      });
    } finally {
      flock?.release();
    }
  } finally {
    release();
    if (queues.get(key) === tail) queues.delete(key);
  }
}

/** The key of the entry `name` of the directory with device `dev` and inode `ino`. */
export function lockKey(dev: bigint, ino: bigint, name: string): string {
  return createHash('sha256').update(`${dev}:${ino}/${name}`).digest('hex');
}

/**
 * Takes the flock for the entry `name` of `dir`: on the regular file it names, or on `dir` while
 * it names none (missing, or something Write and Edit refuse), checked once held to still be so;
 * undefined when the helper cannot run here.
 */
async function lockName(dir: FileHandle, name: string, signal: AbortSignal): Promise<Flock | undefined> {
  const deadline = Date.now() + LOCK_WAIT_MS;
  for (let wait = 1; ; wait = Math.min(wait * 2, 50)) {
    signal.throwIfAborted();
    const seen = await entry(dir, name);
    const target = seen?.isFile() ? await openIfSame(dir, name, seen) : undefined;
    // Changed between two looks: look again after the wait.
    if (target !== 'changed') {
      let attempt;
      try {
        // A regular file that cannot be opened (no read permission) is locked through its directory.
        attempt = await tryFlock((target ?? dir).fd);
      } catch (err) {
        if (err instanceof FlockUnavailable) return undefined;
        throw err;
      } finally {
        await target?.close();
      }
      if (attempt !== 'busy') {
        // Locked what the name held when it was looked at: still so, or look again.
        const now = await entry(dir, name);
        if (now === seen || (now !== undefined && seen !== undefined && now.dev === seen.dev && now.ino === seen.ino)) return attempt;
        attempt.release();
      }
    }
    if (Date.now() >= deadline) throw new FileLockTimeout(`another process has held the lock for over ${LOCK_WAIT_MS / 1000} s`);
    // With the signal's own reason, not the timer's AbortError.
    await delay(wait, undefined, { signal }).catch(() => signal.throwIfAborted());
  }
}

async function entry(dir: FileHandle, name: string): Promise<BigIntStats | undefined> {
  return lstat(heldPath(dir, name), { bigint: true }).catch((err: unknown) => {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  });
}

/** The regular file `name` opened, if it is still the one `seen`; `changed` if it is not; undefined if it cannot be opened. */
async function openIfSame(dir: FileHandle, name: string, seen: BigIntStats): Promise<FileHandle | 'changed' | undefined> {
  let handle: FileHandle;
  try {
    handle = await open(heldPath(dir, name), OPEN_TARGET);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return code === 'EACCES' || code === 'EPERM' ? undefined : 'changed';
  }
  const stats = await handle.stat({ bigint: true });
  if (stats.dev === seen.dev && stats.ino === seen.ino) return handle;
  await handle.close();
  return 'changed';
}
