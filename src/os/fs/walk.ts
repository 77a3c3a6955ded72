import type { Dir, Dirent } from 'node:fs';
import { open, opendir, type FileHandle } from 'node:fs/promises';
import { heldPath, OPEN_DIRECTORY } from './workspace.js';

/** How far a walk goes. */
export interface WalkBounds {
  /**
   * Levels below the start it goes down to (the start is 0): entries at this depth are visited,
   * never descended into. Each level holds two descriptors while it is read, the directory and its
   * listing, so a walk holds at most `2 * maxDepth + 1` besides the start.
   */
  maxDepth: number;
  /** Entries it looks at before it stops (and says `partial`); none: no limit. */
  maxEntries?: number;
}

/**
 * Looks at one entry of the held directory `dir` (open only until it returns), `depth` levels
 * below the start, and says whether to go into it. The entry's type is the listing's: a visitor
 * that needs more reads it through `heldPath(dir, entry.name)`, never following a symlink.
 */
export type WalkVisitor = (dir: FileHandle, entry: Dirent, depth: number) => Promise<boolean>;

/** How a walk ended. */
export interface WalkReport {
  /** True when it stopped at `maxEntries`, leaving part of the tree unvisited. */
  partial: boolean;
}

/**
 * Visits every entry below the held directory `start`, depth first. A directory the visitor goes
 * into is opened by name inside its parent's descriptor without following a symlink, so one
 * swapped for a link meanwhile is skipped, not followed out of the tree. A directory that cannot be
 * opened or listed (gone, swapped, unreadable) is skipped; an error while reading a listing, or one
 * the visitor throws, ends the walk with it. `start` stays open; every descriptor the walk opened is
 * closed when it returns.
 */
export async function walkHeld(start: FileHandle, bounds: WalkBounds, visit: WalkVisitor): Promise<WalkReport> {
  const maxEntries = bounds.maxEntries ?? Infinity;
  let seen = 0;
  let partial = false;
  const walk = async (dir: FileHandle, depth: number): Promise<void> => {
    let entries: Dir;
    try {
      // A stream: a directory of millions of entries costs what a few do.
      entries = await opendir(heldPath(dir), { bufferSize: 64 });
    } catch {
      return;
    }
    for await (const entry of entries) {
      if (++seen > maxEntries) {
        partial = true;
        return;
      }
      if (!(await visit(dir, entry, depth)) || depth >= bounds.maxDepth) continue;
      const sub = await open(heldPath(dir, entry.name), OPEN_DIRECTORY).catch(() => undefined);
      if (sub === undefined) continue;
      try {
        await walk(sub, depth + 1);
      } finally {
        await sub.close();
      }
      if (partial) return;
    }
  };
  await walk(start, 0);
  return { partial };
}
