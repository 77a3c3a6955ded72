import { createHash } from 'node:crypto';
import { constants, type BigIntStats } from 'node:fs';
import { lstat, open, type FileHandle } from 'node:fs/promises';
import { quotePath } from './describe.js';
import { heldPath, systemError, WorkspaceError, type Location } from './workspace.js';

/** Largest file Read and Edit load, and largest result Edit writes; bigger ones are refused before any byte is read. */
export const MAX_FILE_BYTES = 10 * 1024 * 1024;

// O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer. O_NOFOLLOW: the walk
// found no symlink here; one now means the workspace changed since, and it is not followed.
const OPEN_FILE = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

export type LoadedFile =
  | { kind: 'file'; data: Buffer; mode: number; stats: BigIntStats; version: string }
  | { kind: 'directory' }
  | { kind: 'special' }
  | { kind: 'too-large'; size: number };

/**
 * The version of a file's content that Read reports and Edit and Write take as `expected_version`:
 * the first 16 hex digits of its SHA-256. A hash, not a modification time, so it is the same on
 * every replica that shares the file and changes whenever a byte does.
 */
export function contentVersion(data: Uint8Array | string): string {
  return createHash('sha256').update(data).digest('hex').slice(0, 16);
}

/**
 * Loads the regular file a location pins, whole, through the directory descriptor the walk
 * holds. The checks run on the opened descriptor, so what is checked is what is read: a
 * directory, a FIFO, socket or device (which could block or never end) and a file over
 * `MAX_FILE_BYTES` are reported instead of read. A missing file throws ENOENT; other file-system
 * errors are thrown as they are. `beforeRead` sees the opened file's stats and may throw to stop it being read.
 */
export async function loadRegularFile(location: Location, given: string, signal?: AbortSignal, beforeRead?: (stats: BigIntStats) => void): Promise<LoadedFile> {
  if (location.kind === 'directory') return { kind: 'directory' };
  if (location.kind === 'missing') throw systemError('ENOENT');
  const handle = await open(heldPath(location.parent, location.name), OPEN_FILE).catch((err: unknown) => {
    if ((err as NodeJS.ErrnoException).code === 'ELOOP') throw changedWhileInUse(given);
    throw err;
  });
  try {
    const stats = await handle.stat({ bigint: true });
    if (stats.isDirectory()) return { kind: 'directory' };
    if (!stats.isFile()) return { kind: 'special' };
    if (stats.size > MAX_FILE_BYTES) return { kind: 'too-large', size: Number(stats.size) };
    // The caller's last word on the file it opened, before a byte of it is read.
    beforeRead?.(stats);
    const data = await readAtMost(handle, MAX_FILE_BYTES, signal);
    // The file may have grown between the check and the read.
    if (data === undefined) return { kind: 'too-large', size: Math.max(MAX_FILE_BYTES + 1, Number(stats.size)) };
    return { kind: 'file', data, mode: Number(stats.mode) & 0o7777, stats, version: contentVersion(data) };
  } finally {
    await handle.close();
  }
}

const CHUNK_BYTES = 256 * 1024;

/**
 * Reads a file to its end, or gives up (undefined) once it passes `limit` bytes: the size fstat
 * reported is no bound, since a file can grow (or be swapped for a sparse giant) after the check.
 */
export async function readAtMost(handle: FileHandle, limit: number, signal?: AbortSignal): Promise<Buffer | undefined> {
  const chunks: Buffer[] = [];
  let total = 0;
  for (;;) {
    signal?.throwIfAborted();
    const chunk = Buffer.allocUnsafe(Math.min(CHUNK_BYTES, limit + 1 - total));
    const { bytesRead } = await handle.read(chunk, 0, chunk.length, null);
    if (bytesRead === 0) return Buffer.concat(chunks, total);
    chunks.push(chunk.subarray(0, bytesRead));
    total += bytesRead;
    if (total > limit) return undefined;
  }
}

/**
 * Throws `changed()` unless the entry `name` of the held directory `dir` is still the file whose
 * stats a read took: same device and inode (not replaced), same size and times (not written).
 * Run just before a rename, it keeps a write from silently replacing a change made since the read.
 */
export async function assertUnchanged(dir: FileHandle, name: string, read: BigIntStats, changed: () => Error): Promise<void> {
  const now = await lstat(heldPath(dir, name), { bigint: true }).catch(() => undefined);
  if (!now || now.dev !== read.dev || now.ino !== read.ino || now.size !== read.size || now.mtimeNs !== read.mtimeNs || now.ctimeNs !== read.ctimeNs) {
    throw changed();
  }
}

/** The refusal for a path whose last part became a symbolic link after the walk checked it. */
export function changedWhileInUse(given: string): WorkspaceError {
  return new WorkspaceError(`Path ${quotePath(given)} was replaced by a symbolic link while in use; it was not followed. Try again.`);
}
