import { constants, type BigIntStats } from 'node:fs';
import { lstat, open, rename, unlink, type FileHandle } from 'node:fs/promises';
import { FlockUnavailable, tryFlock, type Flock } from './flock.js';
import { tempFileName } from './own-files.js';
import { heldPath } from './workspace.js';

/** The mode of a file Write creates; the process umask is not applied. */
export const NEW_FILE_MODE = 0o644;

// Exclusive create without following: an existing file or symlink by that name is never used.
// Read and write: what was written is read back through the same descriptor after the rename.
const CREATE_TEMP = constants.O_RDWR | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;

export interface AtomicWriteOptions {
  /** The key of the lock held while writing (`withFileLock`): the temporary file is named after it. */
  lockKey: string;
  /** Permission bits of the new file (an existing file's mode, to keep it); setuid, setgid and sticky are dropped. */
  mode: number;
  /** Checked before the rename: an aborted call leaves the target untouched. */
  signal?: AbortSignal;
  /**
   * Runs last before the rename, with the new content on disk; throwing leaves the target as it
   * was. Edit checks here that nothing changed the file since it was read, and both that the
   * file's lock is still held.
   */
  beforeRename?: () => Promise<void> | void;
}

/**
 * Something else took the place of the file while it was written: the temporary file before the
 * rename, or the target after it. `renamed` says whether the rename happened, so the target may
 * now hold what the other process put there.
 */
export class ReplacedWhileWriting extends Error {
  override readonly name = 'ReplacedWhileWriting';
  readonly renamed: boolean;

  constructor(renamed: boolean) {
    super(renamed ? 'after the rename the name did not hold the file written' : 'the temporary file was replaced before the rename');
    this.renamed = renamed;
  }
}

/**
 * Replaces the entry `name` of the held directory `dir` with `data` so that readers see the old
 * content or the new, never a mix: the data goes to a temporary file in the same directory (the
 * server's own naming, exclusive create), is synced to disk, and is renamed over the target, all
 * through the directory's descriptor. The temporary file is another process's to swap while it
 * has a name (a command in the workspace can rename anything there), so the rename is checked on
 * both sides: before it, the name must still hold the file this descriptor wrote; after it, the
 * target must be that file (same device and inode, a regular file) with exactly `data` in it,
 * read back through the descriptor. Either check failing throws `ReplacedWhileWriting`: success
 * is only returned for a change that is in the file. On any failure before the rename the
 * temporary file is removed and the target is left as it was. Resolves to the new file's stats.
 */
export async function writeFileAtomic(dir: FileHandle, name: string, data: string | Uint8Array, options: AtomicWriteOptions): Promise<BigIntStats> {
  const temp = tempFileName(options.lockKey);
  // Never a setuid, setgid or sticky bit: a client must not be able to make one appear.
  const mode = options.mode & 0o777;
  const bytes = typeof data === 'string' ? Buffer.from(data) : data;
  const handle = await open(heldPath(dir, temp), CREATE_TEMP, mode);
  let renamed = false;
  // Held while the temporary file exists, so a start-up sweep elsewhere leaves a live writer's file alone.
  let tempLock: Flock | undefined;
  try {
    tempLock = await lockTemporary(handle);
    await handle.chmod(mode);
    await handle.writeFile(bytes);
    await handle.sync();
    const written = await handle.stat({ bigint: true });
    options.signal?.throwIfAborted();
    await options.beforeRename?.();
    if (!sameFile(await entry(dir, temp), written)) throw new ReplacedWhileWriting(false);
    await rename(heldPath(dir, temp), heldPath(dir, name));
    renamed = true;
    // Makes the rename itself durable. Some file systems refuse to sync a directory; the data is
    // already on disk then, so that is not worth failing the call for.
    await dir.sync().catch(() => undefined);
    // Content first, then the name: a change after this check is a later change, not this write's.
    if (!(await holds(handle, bytes)) || !sameFile(await entry(dir, name), written)) throw new ReplacedWhileWriting(true);
    return await handle.stat({ bigint: true });
  } finally {
    try {
      await handle.close();
    } finally {
      if (!renamed) await unlink(heldPath(dir, temp)).catch(() => undefined);
      tempLock?.release();
    }
  }
}

async function lockTemporary(handle: FileHandle): Promise<Flock | undefined> {
  try {
    const attempt = await tryFlock(handle.fd);
    return attempt === 'busy' ? undefined : attempt;
  } catch (err) {
    if (err instanceof FlockUnavailable) return undefined;
    throw err;
  }
}

async function entry(dir: FileHandle, name: string): Promise<BigIntStats | undefined> {
  return lstat(heldPath(dir, name), { bigint: true }).catch(() => undefined);
}

function sameFile(found: BigIntStats | undefined, written: BigIntStats): boolean {
  return found !== undefined && found.isFile() && found.dev === written.dev && found.ino === written.ino;
}

/** True when the file behind `handle` holds exactly `bytes`, compared a chunk at a time. */
async function holds(handle: FileHandle, bytes: Uint8Array): Promise<boolean> {
  if ((await handle.stat()).size !== bytes.length) return false;
  const chunk = Buffer.allocUnsafe(Math.min(bytes.length, 1024 * 1024) || 1);
  for (let at = 0; at < bytes.length;) {
    const { bytesRead } = await handle.read(chunk, 0, Math.min(chunk.length, bytes.length - at), at);
    if (bytesRead === 0 || Buffer.compare(chunk.subarray(0, bytesRead), bytes.subarray(at, at + bytesRead)) !== 0) return false;
    at += bytesRead;
  }
  return true;
}
