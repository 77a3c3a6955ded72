import { createHash, randomBytes } from 'node:crypto';
import { constants, readFileSync, readlinkSync } from 'node:fs';
import { hostname } from 'node:os';
import { link, lstat, open, rename, rmdir, unlink, type FileHandle } from 'node:fs/promises';
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
    const named = await lstat(heldPath(dir, lockName), { bigint: true }).catch(() => undefined);
    if (named?.isFile() && (await readHolder(dir, lockName))?.nonce === ME.nonce) await unlink(heldPath(dir, lockName)).catch(() => undefined);
  } finally {
    await lock.close();
  }
}

/** What a lock was when it was judged stale: enough to tell it from a fresh lock that reused its inode. */
export interface StaleLock {
  ino: bigint;
  mtimeNs: bigint;
  nonce: string | undefined;
}

/**
 * Moves a stale lock out of the way by renaming it, which only one process can do, then checks
 * that what moved is the lock judged stale (its holder's nonce, or for a lock without one its
 * inode and modification time, which a rename keeps): if another process took it over and made a
 * fresh one in between, that one is put back. True when the way is clear to try again.
 */
export async function takeOver(dir: FileHandle, lockName: string, key: string, stale: StaleLock): Promise<boolean> {
  const aside = tempFileName(key);
  try {
    await rename(heldPath(dir, lockName), heldPath(dir, aside));
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ENOENT';
  }
  const moved = await lstat(heldPath(dir, aside), { bigint: true }).catch(() => undefined);
  const nonce = moved?.isFile() ? (await readHolder(dir, aside))?.nonce : undefined;
  const same = moved !== undefined && moved.ino === stale.ino && moved.mtimeNs === stale.mtimeNs && nonce === stale.nonce;
  if (moved !== undefined && !same) {
    // A live lock: restore it unless yet another lock has appeared.
    await link(heldPath(dir, aside), heldPath(dir, lockName)).catch(() => undefined);
  }
  // A file or link goes; an empty directory too; a directory with something in it stays aside, hidden.
  await unlink(heldPath(dir, aside)).catch(() => rmdir(heldPath(dir, aside)).catch(() => undefined));
  return same;
}

// Who holds a lock. A holder in this boot of this machine and this PID namespace is judged by
// whether its process still lives (pid and start time in clock ticks since boot, so a reused pid
// is a different process, as after a container restart where the server is always pid 1); any
// other by the lock's age. The nonce tells one lock from another that reused its inode.
const ME = {
  host: hostname(),
  boot: readOr('/proc/sys/kernel/random/boot_id', (text) => text.trim()),
  pidns: linkOr('/proc/self/ns/pid'),
  pid: process.pid,
  start: processStart(process.pid),
  nonce: randomBytes(8).toString('hex'),
};
const HOLDER = JSON.stringify(ME);

function readOr(file: string, parse: (text: string) => string | undefined): string | undefined {
  try {
    return parse(readFileSync(file, 'utf8'));
  } catch {
    return undefined;
  }
}

function linkOr(file: string): string | undefined {
  try {
    return readlinkSync(file);
  } catch {
    return undefined;
  }
}

function processStart(pid: number): string | undefined {
  return readOr(`/proc/${pid}/stat`, (stat) => stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]);
}

/**
 * What a lock no live process holds was, or undefined while it may be held. A lock written by a
 * process of this boot and PID namespace is stale exactly when that process is gone (no process
 * with its pid started when it did), however old; any other lock when it is older than
 * `STALE_LOCK_MS`. Only a regular file's first bytes are read, without following a link or waiting
 * on a FIFO: anything else in its place is judged by its age alone.
 */
export async function staleLock(dir: FileHandle, lockName: string): Promise<StaleLock | undefined> {
  const stats = await lstat(heldPath(dir, lockName), { bigint: true }).catch(() => undefined);
  if (stats === undefined) return undefined;
  const holder = stats.isFile() ? await readHolder(dir, lockName) : undefined;
  const found: StaleLock = { ino: stats.ino, mtimeNs: stats.mtimeNs, nonce: holder?.nonce };
  const local = holder !== undefined && ME.boot !== undefined && holder.boot === ME.boot && ME.pidns !== undefined && holder.pidns === ME.pidns;
  if (!local) return Date.now() - Number(stats.mtimeMs) > STALE_LOCK_MS ? found : undefined;
  const start = processStart(holder.pid);
  if (start === undefined) return pidExists(holder.pid) ? undefined : found;
  return start !== holder.start ? found : undefined;
}

function pidExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}

interface Holder {
  boot: string;
  pidns: string;
  pid: number;
  start: string | undefined;
  nonce: string;
}

/** The holder record of a lock that is a regular file, read through O_NOFOLLOW|O_NONBLOCK, at most 256 bytes; undefined for anything else. */
async function readHolder(dir: FileHandle, lockName: string): Promise<Holder | undefined> {
  const handle = await open(heldPath(dir, lockName), READ_LOCK).catch(() => undefined);
  if (handle === undefined) return undefined;
  try {
    if (!(await handle.stat()).isFile()) return undefined;
    const buffer = Buffer.alloc(MAX_HOLDER_BYTES);
    const { bytesRead } = await handle.read(buffer, 0, MAX_HOLDER_BYTES, 0);
    const record = JSON.parse(buffer.subarray(0, bytesRead).toString('utf8')) as Record<string, unknown>;
    const { boot, pidns, pid, start, nonce } = record;
    if (typeof boot !== 'string' || typeof pidns !== 'string' || typeof nonce !== 'string') return undefined;
    if (typeof pid !== 'number' || !Number.isSafeInteger(pid) || pid <= 0) return undefined;
    return { boot, pidns, pid, start: typeof start === 'string' ? start : undefined, nonce };
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
