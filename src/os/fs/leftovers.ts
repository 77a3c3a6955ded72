import { constants } from 'node:fs';
import { open, unlink, type FileHandle } from 'node:fs/promises';
import { FlockUnavailable, tryFlock } from './flock.js';
import { isOwnFileName } from './own-files.js';
import { walkHeld } from './walk.js';
import { heldPath, type Workspace } from './workspace.js';

/** Most directory entries one sweep looks at; a workspace bigger than that is swept in part. */
export const MAX_SWEPT_ENTRIES = 200_000;
// Each level holds its directory open while it is read; deeper trees are swept down to here.
const MAX_DEPTH = 64;
// Without the lock helper a temporary file's writer cannot be asked: one this old is taken for dead.
const ORPHAN_AGE_MS = 60 * 60 * 1000;
// A temporary file is opened only to lock it: no symlink followed, no FIFO waited on.
const OPEN_TEMP = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

export interface SweepReport {
  /** Temporary and lock files removed. */
  removed: number;
  /** True when the sweep stopped at `MAX_SWEPT_ENTRIES`. */
  partial: boolean;
}

/**
 * Removes what a server that died mid-write left in the workspace: temporary files whose writer is
 * gone (a crash between creating one and renaming it over the target leaves it behind; the target
 * itself is whole, old or new), and the lock files of earlier versions, which nothing takes any
 * more. A writer holds a flock on its temporary file while it exists, and the flock dies with it:
 * a file that can be locked has no writer; a live writer's (another replica's) stays. Where the
 * lock helper cannot run, a temporary file older than an hour is taken for dead. Only names of the
 * server's own pattern are touched. The walk (`walkHeld`) holds each directory open and never
 * follows a symlink, like the file tools. Run at start-up.
 */
export async function removeLeftovers(ws: Workspace): Promise<SweepReport> {
  let removed = 0;
  const { partial } = await walkHeld(ws.rootDir, { maxDepth: MAX_DEPTH, maxEntries: MAX_SWEPT_ENTRIES }, async (dir, entry) => {
    if (!entry.isFile() || !isOwnFileName(entry.name)) return entry.isDirectory();
    if (await removeLeftover(dir, entry.name)) removed += 1;
    return false;
  });
  return { removed, partial };
}

/** Removes the temporary or lock file `name` from `dir` unless a writer still uses it; true when removed. */
async function removeLeftover(dir: FileHandle, name: string): Promise<boolean> {
  const claim = name.endsWith('.tmp') ? await claimTemporary(dir, name) : undefined;
  if (claim === 'live') return false;
  try {
    return await unlink(heldPath(dir, name)).then(
      () => true,
      () => false,
    );
  } finally {
    claim?.release();
  }
}

/**
 * `live` while the temporary file `name` may still be written: its writer holds its flock, or
 * (without the helper) it is young. Otherwise its flock, held by the sweep until it has removed
 * the file (a writer's name is never used again), or nothing when it could not be opened.
 */
async function claimTemporary(dir: FileHandle, name: string): Promise<'live' | { release(): void } | undefined> {
  const handle = await open(heldPath(dir, name), OPEN_TEMP).catch(() => undefined);
  if (handle === undefined) return undefined;
  try {
    const attempt = await tryFlock(handle.fd).catch(async (err: unknown) => {
      if (!(err instanceof FlockUnavailable)) throw err;
      return Date.now() - (await handle.stat()).mtimeMs < ORPHAN_AGE_MS ? 'busy' : undefined;
    });
    return attempt === 'busy' ? 'live' : attempt;
  } finally {
    await handle.close();
  }
}
