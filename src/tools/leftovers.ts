import type { Dir } from 'node:fs';
import { lstat, open, opendir, unlink, type FileHandle } from 'node:fs/promises';
import { staleLock } from './file-lock.js';
import { isOwnFileName, lockOfTempFile } from './own-files.js';
import { heldPath, OPEN_DIRECTORY, type Workspace } from './workspace.js';

/** Most directory entries one sweep looks at; a workspace bigger than that is swept in part. */
export const MAX_SWEPT_ENTRIES = 200_000;
// Each level holds one descriptor open; deeper trees are swept down to here.
const MAX_DEPTH = 64;


export interface SweepReport {
  /** Temporary and lock files removed. */
  removed: number;
  /** True when the sweep stopped at `MAX_SWEPT_ENTRIES`. */
  partial: boolean;
}

/**
 * Removes what a server that died mid-write left in the workspace: lock files whose holder is gone
 * (one of this host's processes that died, or older than `STALE_LOCK_MS`: a younger one from
 * another host may belong to a live server sharing the workspace), and the temporary files
 * written under such locks (a crash between creating one and renaming it over the target leaves
 * it behind; the target itself is whole, old or new). A live writer's temporary file stays. Only names of the server's own pattern are touched. The
 * walk holds each directory open and never follows a symlink, like the file tools. Run at start-up.
 */
export async function removeLeftovers(ws: Workspace): Promise<SweepReport> {
  const report: SweepReport = { removed: 0, partial: false };
  let seen = 0;
  const visit = async (dir: FileHandle, depth: number): Promise<void> => {
    let entries: Dir;
    try {
      // A stream: a directory of millions of entries costs what a few do.
      entries = await opendir(heldPath(dir), { bufferSize: 64 });
    } catch {
      return;
    }
    for await (const entry of entries) {
      if (++seen > MAX_SWEPT_ENTRIES) {
        report.partial = true;
        return;
      }
      if (entry.isFile() && isOwnFileName(entry.name)) {
        // A lock is kept while its holder may be alive, and so is a temporary file written under it.
        const lock = entry.name.endsWith('.lock') ? entry.name : lockOfTempFile(entry.name);
        if (lock !== undefined && (await lockHeld(dir, lock))) continue;
        if (await unlink(heldPath(dir, entry.name)).then(() => true, () => false)) report.removed += 1;
      } else if (entry.isDirectory() && depth < MAX_DEPTH) {
        const sub = await open(heldPath(dir, entry.name), OPEN_DIRECTORY).catch(() => undefined);
        if (!sub) continue;
        try {
          await visit(sub, depth + 1);
        } finally {
          await sub.close();
        }
      }
    }
  };
  await visit(ws.rootDir, 0);
  return report;
}

/** True while a lock file exists and its holder may be alive. */
async function lockHeld(dir: FileHandle, lockName: string): Promise<boolean> {
  const exists = await lstat(heldPath(dir, lockName)).then(() => true, () => false);
  return exists && (await staleLock(dir, lockName)) === undefined;
}
