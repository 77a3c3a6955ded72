import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { hostname } from 'node:os';
import { lstat, open, readFile, unlink, type FileHandle } from 'node:fs/promises';
import { setTimeout as delay } from 'node:timers/promises';
import { lockFileName } from './own-files.js';
import { heldPath } from './workspace.js';

/** A lock file older than this was left by a process that died holding it; a write holds one for milliseconds. */
export const STALE_LOCK_MS = 30_000;
/** How long a write waits for another process's lock before it gives up. */
export const LOCK_WAIT_MS = 35_000;

const CREATE_LOCK = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;

/** Another process held the file's lock for longer than a write takes. */
export class FileLockTimeout extends Error {
  override readonly name = 'FileLockTimeout';
}

// The tail of each file's queue in this process: a caller waits for the one before it.
const queues = new Map<string, Promise<void>>();

/**
 * Runs `critical` while no other Edit or Write of the same file runs, in this process or in any
 * other that shares the workspace. The file is named by identity, not by path: the device and
 * inode of the directory that holds it, and its name there, so every path that leads to it
 * (through symlinks, `..`, absolute or relative) takes the same lock. In-process callers queue in
 * order; across processes an exclusive lock file of the server's own naming beside the file is
 * the lock, and one whose holder is gone (see `isStaleLock`) is taken over.
 */
export async function withFileLock<T>(dir: FileHandle, name: string, signal: AbortSignal, critical: () => Promise<T>): Promise<T> {
  const { dev, ino } = await dir.stat({ bigint: true });
  const key = lockKey(dev, ino, name);
  const before = queues.get(key) ?? Promise.resolve();
  let release!: () => void;
  const mine = new Promise<void>((resolve) => (release = resolve));
  const tail = before.then(() => mine);
  queues.set(key, tail);
  try {
    await abortable(before, signal);
    const lock = await acquireLockFile(dir, lockFileName(key), signal);
    try {
      return await critical();
    } finally {
      await lock.close();
      await unlink(heldPath(dir, lockFileName(key))).catch(() => undefined);
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

async function acquireLockFile(dir: FileHandle, lockName: string, signal: AbortSignal): Promise<FileHandle> {
  const deadline = Date.now() + LOCK_WAIT_MS;
  for (let wait = 2; ; wait = Math.min(wait * 2, 50)) {
    signal.throwIfAborted();
    try {
      const handle = await open(heldPath(dir, lockName), CREATE_LOCK, 0o600);
      await handle.writeFile(HOLDER);
      return handle;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    if (await isStaleLock(dir, lockName)) {
      await unlink(heldPath(dir, lockName)).catch(() => undefined);
      continue;
    }
    if (Date.now() >= deadline) throw new FileLockTimeout(`another process has held the lock for over ${LOCK_WAIT_MS / 1000} s`);
    await delay(wait, undefined, { signal });
  }
}

// Who holds a lock: a process of this host, by pid and start time, so a restarted server can tell
// its dead predecessor's locks from a live neighbour's.
const HOLDER = JSON.stringify({ host: hostname(), pid: process.pid, started: Math.round(Date.now() - process.uptime() * 1000) });

/**
 * True for a lock file no live process holds: older than `STALE_LOCK_MS`, or written by a
 * process of this host that is gone (its pid is free, or is this process under a new start
 * time, as after a restart in a container where the server is always pid 1).
 */
export async function isStaleLock(dir: FileHandle, lockName: string): Promise<boolean> {
  const stats = await lstat(heldPath(dir, lockName)).catch(() => undefined);
  if (stats === undefined) return false;
  if (Date.now() - stats.mtimeMs > STALE_LOCK_MS) return true;
  let holder: { host?: unknown; pid?: unknown; started?: unknown };
  try {
    holder = JSON.parse(await readFile(heldPath(dir, lockName), 'utf8')) as typeof holder;
  } catch {
    // Empty (its holder is between creating and writing it) or not ours: the age decides.
    return false;
  }
  const me = JSON.parse(HOLDER) as { host: string; pid: number; started: number };
  if (holder.host !== me.host || typeof holder.pid !== 'number') return false;
  if (holder.pid === me.pid) return holder.started !== me.started;
  try {
    process.kill(holder.pid, 0);
    return false;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ESRCH';
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
