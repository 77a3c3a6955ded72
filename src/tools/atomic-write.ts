import { randomBytes } from 'node:crypto';
import { open, rename, unlink } from 'node:fs/promises';
import path from 'node:path';

/** The mode of a file Write creates; the process umask is not applied. */
export const NEW_FILE_MODE = 0o644;

export interface AtomicWriteOptions {
  /** Permission bits of the new file (an existing file's mode, to keep it). */
  mode: number;
  /** Checked before the rename: an aborted call leaves the target untouched. */
  signal?: AbortSignal;
}

/**
 * Replaces `target` with `data` so that readers see the old content or the new, never a mix: the
 * data goes to a temporary file in the same directory (unique name, exclusive create, so an
 * existing file or symlink there is never followed), is synced to disk, and is renamed over the
 * target. On any failure the temporary file is removed and the target is left as it was.
 */
export async function writeFileAtomic(target: string, data: string | Uint8Array, options: AtomicWriteOptions): Promise<void> {
  const dir = path.dirname(target);
  // A short name of its own: the target's name plus a suffix could pass the 255-byte name limit.
  const temp = path.join(dir, `.toolport-${randomBytes(8).toString('hex')}.tmp`);
  const handle = await open(temp, 'wx', options.mode);
  let renamed = false;
  try {
    try {
      await handle.chmod(options.mode);
      await handle.writeFile(data);
      await handle.sync();
    } finally {
      await handle.close();
    }
    options.signal?.throwIfAborted();
    await rename(temp, target);
    renamed = true;
  } finally {
    if (!renamed) await unlink(temp).catch(() => undefined);
  }
  await syncDirectory(dir);
}

// Makes the rename itself durable. Some file systems refuse to sync a directory; the data is
// already on disk then, so that is not worth failing the call for.
async function syncDirectory(dir: string): Promise<void> {
  try {
    const handle = await open(dir, 'r');
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  } catch {
    // best effort, see above
  }
}
