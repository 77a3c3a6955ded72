import { constants, type Dirent } from 'node:fs';
import { open, readdir, type FileHandle } from 'node:fs/promises';
import { isOwnFileName } from './own-files.js';
import { heldPath } from './workspace.js';

// A directory is opened without following a symlink in its place: a link there fails (ENOTDIR or ELOOP).
const OPEN_DIRECTORY = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;
// What a step that meets something other than a directory fails with.
const NOT_A_DIRECTORY = new Set(['ENOENT', 'ENOTDIR', 'ELOOP']);

/**
 * Opens the directory `parts` below the held directory `start`, one component at a time, never
 * following a symlink: undefined when a part is a symlink, not a directory, missing, or `..`. The
 * result is `start` itself for no parts; anything else is the caller's to close. Only names are
 * looked up, each inside the directory the step before holds, so nothing a client swaps in
 * meanwhile can lead the walk out.
 */
export async function openBelow(start: FileHandle, parts: readonly string[]): Promise<FileHandle | undefined> {
  let current = start;
  const release = async (): Promise<void> => {
    if (current !== start) await current.close();
  };
  try {
    for (const part of parts) {
      if (part === '' || part === '.') continue;
      const next =
        part === '..'
          ? undefined
          : await open(heldPath(current, part), OPEN_DIRECTORY).catch((err: unknown) => {
              if (NOT_A_DIRECTORY.has((err as NodeJS.ErrnoException).code ?? '')) return undefined;
              throw err;
            });
      await release();
      if (next === undefined) return undefined;
      current = next;
    }
    return current;
  } catch (err) {
    await release();
    throw err;
  }
}

/** The entries of a held directory, read through its descriptor, without the server's own files. */
export async function listHeld(dir: FileHandle): Promise<Dirent[]> {
  const entries = await readdir(heldPath(dir), { withFileTypes: true });
  return entries.filter((entry) => !isOwnFileName(entry.name));
}
