import { createHash } from 'node:crypto';
import { constants, readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { link, lstat, open, rename, unlink, type FileHandle } from 'node:fs/promises';
import { setTimeout as delay } from 'node:timers/promises';
import { lockFileName, tempFileName } from './own-files.js';
import { heldPath } from './workspace.js';

/** A lock file older than this was left by a process that died holding it; a write holds one for milliseconds. */
export const STALE_LOCK_MS = 30_000;
/** How long a write waits for another process's lock before it gives up. */
export const LOCK_WAIT_MS = 35_000;

const CREATE_LOCK = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;
// A lock file is only ever read through this: no symlink followed, no FIFO waited on.
const READ_LOCK = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;
// A holder record is a short line of JSON; anything longer is not one of ours.
const MAX_HOLDER_BYTES = 256;
const MAX_TAKEOVERS = 100;

/** Another process held the file's lock for longer than a write takes. */
export class FileLockTimeout extends Error {
  override readonly name = 'FileLockTimeout';
}

/** What the critical section of `withFileLock` gets: the key its temporary files are named after. */
export interface HeldLock {
  readonly key: string;
}

// The tail of each file's queue in this process: a caller waits for the one before it.
const queues = new Map<string, Promise<void>>();

/**
 * Runs `critical` while no other Edit or Write of the same file runs, in this process or in any
 * other that shares the workspace. The file is named by identity, not by path: the device and
 * inode of the directory that holds it, and its name there, so every path that leads to it
 * (through symlinks, `..`, absolute or relative) takes the same lock. In-process callers queue in
 * order; across processes an exclusive lock file of the server's own naming beside the file is
 * the lock, and one whose holder is gone (see `staleLock`) is taken over.
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
    const lockName = lockFileName(key);
    const lock = await acquireLockFile(dir, lockName, key, signal);
    try {
      return await critical({ key });
    } finally {
      await releaseLockFile(dir, lockName, lock);
    }
  } finally {
    release();
    if (queues.get(key) === tail) queues.delete(key);
  }
}

/** The key of the entry `name` of the directory with device `dev` and inode `ino`: its lock's name derives from it. */
export function lockKey(dev: bigint, ino: bigint, name: string): string {
  return createHash('sha256').update(`${dev}:${ino}/${name}`).digest('hex');
}

async function acquireLockFile(dir: FileHandle, lockName: string, key: string, signal: AbortSignal): Promise<FileHandle> {
  const deadline = Date.now() + LOCK_WAIT_MS;
  let takeovers = 0;
  for (let wait = 2; ; wait = Math.min(wait * 2, 50)) {
    signal.throwIfAborted();
    const handle = await open(heldPath(dir, lockName), CREATE_LOCK, 0o600).catch((err: unknown) => {
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') return undefined;
      throw err;
    });
    if (handle !== undefined) {
      try {
        await handle.writeFile(HOLDER);
        return handle;
      } catch (err) {
        // A full disk, say: leave neither the descriptor nor an empty lock behind.
        await handle.close();
        await unlink(heldPath(dir, lockName)).catch(() => undefined);
        throw err;
      }
    }
    const stale = await staleLock(dir, lockName);
    // Retried at once after a takeover, but not forever: someone may keep planting stale-looking locks.
    if (stale !== undefined && (await takeOver(dir, lockName, key, stale)) && ++takeovers < MAX_TAKEOVERS) continue;
    if (Date.now() >= deadline) throw new FileLockTimeout(`another process has held the lock for over ${LOCK_WAIT_MS / 1000} s`);
    // With the signal's own reason, not the timer's AbortError.
    await delay(wait, undefined, { signal }).catch(() => signal.throwIfAborted());
  }
}

/** Removes the lock file only while it is still the one this process created (not taken over meanwhile). */
async function releaseLockFile(dir: FileHandle, lockName: string, lock: FileHandle): Promise<void> {
  try {
    const [held, named] = await Promise.all([lock.stat(), lstat(heldPath(dir, lockName)).catch(() => undefined)]);
    if (named !== undefined && named.dev === held.dev && named.ino === held.ino) await unlink(heldPath(dir, lockName)).catch(() => undefined);
  } finally {
    await lock.close();
  }
}

/**
 * Moves a stale lock out of the way by renaming it, which only one process can do, then checks
 * that what moved is the lock judged stale (inode `ino`): if another process took it over and
 * made a fresh one in between, that one is put back. True when the way is clear to try again.
 */
async function takeOver(dir: FileHandle, lockName: string, key: string, ino: bigint): Promise<boolean> {
  const aside = tempFileName(key);
  try {
    await rename(heldPath(dir, lockName), heldPath(dir, aside));
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ENOENT';
  }
  const moved = await lstat(heldPath(dir, aside), { bigint: true }).catch(() => undefined);
  if (moved !== undefined && moved.ino !== ino) {
    // A live lock: restore it unless yet another lock has appeared.
    await link(heldPath(dir, aside), heldPath(dir, lockName)).catch(() => undefined);
  }
  await unlink(heldPath(dir, aside)).catch(() => undefined);
  return moved?.ino === ino;
}

// Who holds a lock: a process of this host, by pid and start time (in clock ticks since boot, from
// /proc), so a restarted server can tell its dead predecessor's locks from a live neighbour's, even
// when the pid was reused (a container's server is always pid 1).
const ME = { host: hostname(), pid: process.pid, start: processStart(process.pid) };
const HOLDER = JSON.stringify(ME);

function processStart(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}

/**
 * The inode of a lock file no live process holds, or undefined while it may be held: stale when
 * older than `STALE_LOCK_MS`, or written by a process of this host that is gone (no process with
 * its pid started when it did). Only a regular file's first bytes are read, without following a
 * link or waiting on a FIFO: anything else in its place is judged by its age alone.
 */
export async function staleLock(dir: FileHandle, lockName: string): Promise<bigint | undefined> {
  const stats = await lstat(heldPath(dir, lockName), { bigint: true }).catch(() => undefined);
  if (stats === undefined) return undefined;
  if (Date.now() - Number(stats.mtimeMs) > STALE_LOCK_MS) return stats.ino;
  if (!stats.isFile()) return undefined;
  const holder = await readHolder(dir, lockName, stats.ino);
  if (holder?.host !== ME.host || typeof holder.pid !== 'number' || !Number.isSafeInteger(holder.pid) || holder.pid <= 0) return undefined;
  const start = processStart(holder.pid);
  if (start === undefined && !pidExists(holder.pid)) return stats.ino;
  return start !== undefined && typeof holder.start === 'string' && start !== holder.start ? stats.ino : undefined;
}

function pidExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}

async function readHolder(dir: FileHandle, lockName: string, ino: bigint): Promise<{ host?: unknown; pid?: unknown; start?: unknown } | undefined> {
  const handle = await open(heldPath(dir, lockName), READ_LOCK).catch(() => undefined);
  if (handle === undefined) return undefined;
  try {
    const stats = await handle.stat({ bigint: true });
    if (!stats.isFile() || stats.ino !== ino) return undefined;
    const buffer = Buffer.alloc(MAX_HOLDER_BYTES);
    const { bytesRead } = await handle.read(buffer, 0, MAX_HOLDER_BYTES, 0);
    return JSON.parse(buffer.subarray(0, bytesRead).toString('utf8')) as { host?: unknown; pid?: unknown; start?: unknown };
  } catch {
    // Empty (its holder is between creating and writing it) or not ours: the age decides.
    return undefined;
  } finally {
    await handle.close();
  }
}

function abortable(promise: Promise<void>, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      () => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      },
      () => {},
    );
  });
}
