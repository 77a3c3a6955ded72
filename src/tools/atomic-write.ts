import { constants } from 'node:fs';
import { open, rename, unlink, type FileHandle } from 'node:fs/promises';
import { tempFileName } from './own-files.js';
import { heldPath } from './workspace.js';

/** The mode of a file Write creates; the process umask is not applied. */
export const NEW_FILE_MODE = 0o644;

// Exclusive create without following: an existing file or symlink by that name is never used.
const CREATE_TEMP = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;

export interface AtomicWriteOptions {
  /** The key of the lock held while writing (`withFileLock`): the temporary file is named after it. */
  lockKey: string;
  /** Permission bits of the new file (an existing file's mode, to keep it); setuid, setgid and sticky are dropped. */
  mode: number;
  /** Checked before the rename: an aborted call leaves the target untouched. */
  signal?: AbortSignal;
  /**
   * Runs last before the rename, with the new content on disk; throwing leaves the target as it
   * was. Edit checks here that nothing changed the file since it was read.
   */
  beforeRename?: () => Promise<void>;
}

/**
 * Replaces the entry `name` of the held directory `dir` with `data` so that readers see the old
 * content or the new, never a mix: the data goes to a temporary file in the same directory (the
 * server's own naming, exclusive create), is synced to disk, and is renamed over the target, all
 * through the directory's descriptor, so the write lands in the directory that was checked
 * whatever happens to its path meanwhile. On any failure the temporary file is removed and the
 * target is left as it was.
 */
export async function writeFileAtomic(dir: FileHandle, name: string, data: string | Uint8Array, options: AtomicWriteOptions): Promise<void> {
  const temp = tempFileName(options.lockKey);
  // Never a setuid, setgid or sticky bit: a client must not be able to make one appear.
  const mode = options.mode & 0o777;
  const handle = await open(heldPath(dir, temp), CREATE_TEMP, mode);
  let renamed = false;
  try {
    try {
      await handle.chmod(mode);
      await handle.writeFile(data);
      await handle.sync();
    } finally {
      await handle.close();
    }
    options.signal?.throwIfAborted();
    await options.beforeRename?.();
    await rename(heldPath(dir, temp), heldPath(dir, name));
    renamed = true;
  } finally {
    if (!renamed) await unlink(heldPath(dir, temp)).catch(() => undefined);
  }
  // Makes the rename itself durable. Some file systems refuse to sync a directory; the data is
  // already on disk then, so that is not worth failing the call for.
  await dir.sync().catch(() => undefined);
}
