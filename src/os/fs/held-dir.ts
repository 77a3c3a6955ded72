import type { Dirent } from 'node:fs';
import { open, readdir, type FileHandle } from 'node:fs/promises';
import { isOwnFileName } from './own-files.js';
import { heldPath, OPEN_DIRECTORY } from './workspace.js';

// What a step that meets something other than a directory fails with.
const NOT_A_DIRECTORY = new Set(['ENOENT', 'ENOTDIR', 'ELOOP']);

/** Most directories a HeldTree keeps open besides its start and its checkpoints. */
export const MAX_HELD_DIRECTORIES = 32;
/**
 * Levels between checkpoints: a wanted directory whose depth is a multiple of this stays open while
 * it is wanted, so a wanted directory closed for room is opened again from at most this many
 * levels above. The crawl reads no directory more than 4096 characters deep, so at most 2048
 * levels, and 64 checkpoints.
 */
export const CHECKPOINT_LEVELS = 32;

interface Held {
  readonly handle: FileHandle;
  /** Levels below the start. */
  readonly depth: number;
  /** Calls using the handle now; a handle in use is never closed. */
  users: number;
}

/**
 * Directories below a held start directory, each opened by name inside its parent's descriptor
 * without following a symlink, so nothing a client swaps in meanwhile can lead outside. The
 * directories opened are kept, and a path is opened from its deepest kept ancestor: visited depth
 * first, a tree costs one open per directory, however deep, where walking from the start every
 * time costs its depth squared. Past MAX_HELD_DIRECTORIES the least recently used are closed,
 * first those not wanted (see `want`), then wanted ones but the checkpoints (CHECKPOINT_LEVELS).
 * Close the tree when done: `close` waits for the calls under way and closes every descriptor it
 * kept.
 */
export class HeldTree {
  readonly #start: Held;
  readonly #max: number;
  // By path below the start ("a/b"), the least recently used first.
  readonly #held = new Map<string, Held>();
  // How many reads to come need each directory (by path) to open a child.
  readonly #wanted = new Map<string, number>();
  readonly #pending = new Set<Promise<unknown>>();
  #closed = false;

  constructor(start: FileHandle, max = MAX_HELD_DIRECTORIES) {
    this.#start = { handle: start, depth: 0, users: 0 };
    this.#max = max;
  }

  /**
   * Runs `use` on the directory `parts` below the start, held open meanwhile; undefined, without
   * running it, when a part is a symlink, not a directory, missing or `..`, when `mayOpen` (asked
   * before every open) refused one, or once the tree is closed. No parts: the start itself.
   */
  async with<T>(parts: readonly string[], use: (dir: FileHandle) => Promise<T>, mayOpen: () => boolean = () => true): Promise<T | undefined> {
    if (this.#closed) return undefined;
    const call = this.#with(parts, use, mayOpen);
    this.#pending.add(call);
    try {
      return await call;
    } finally {
      this.#pending.delete(call);
    }
  }

  async #with<T>(parts: readonly string[], use: (dir: FileHandle) => Promise<T>, mayOpen: () => boolean): Promise<T | undefined> {
    const names = parts.filter((part) => part !== '' && part !== '.');
    if (names.includes('..')) return undefined;
    // The deepest kept ancestor: the parent, when the tree is visited depth first.
    let depth = names.length;
    let key = names.join('/');
    let current = depth === 0 ? this.#start : this.#held.get(key);
    while (current === undefined) {
      depth -= 1;
      key = depth === 0 ? '' : key.slice(0, key.lastIndexOf('/'));
      current = depth === 0 ? this.#start : this.#held.get(key);
    }
    this.#pin(key, current);
    try {
      for (; depth < names.length; depth += 1) {
        if (this.#closed || !mayOpen()) return undefined;
        const name = names[depth]!;
        const handle = await open(heldPath(current.handle, name), OPEN_DIRECTORY).catch((err: unknown) => {
          if (NOT_A_DIRECTORY.has((err as NodeJS.ErrnoException).code ?? '')) return undefined;
          throw err;
        });
        if (handle === undefined) return undefined;
        key = depth === 0 ? name : `${key}/${name}`;
        const next = this.#keep(key, handle, depth + 1);
        this.#unpin(current);
        current = next;
      }
      return await use(current.handle);
    } finally {
      this.#unpin(current);
    }
  }

  /**
   * Says that one more (`count` 1) or one fewer (-1) read to come will open a child of the
   * directory `key` (parts joined by "/"), which is kept open in preference while any will.
   */
  want(key: string, count: 1 | -1): void {
    if (key === '') return;
    const wanted = (this.#wanted.get(key) ?? 0) + count;
    if (wanted > 0) this.#wanted.set(key, wanted);
    else {
      this.#wanted.delete(key);
      this.#evict();
    }
  }

  /** Waits for the calls under way, then closes every directory the tree opened (never the start). */
  async close(): Promise<void> {
    this.#closed = true;
    // Calls that end meanwhile may close handles they let go of: wait for those too.
    while (this.#pending.size > 0) await Promise.allSettled([...this.#pending]);
    const closing = [...this.#held.values()].map((held) => held.handle.close());
    this.#held.clear();
    await Promise.allSettled(closing);
  }

  /** Keeps a directory just opened, in use by the caller; one kept already under its path wins. */
  #keep(key: string, handle: FileHandle, depth: number): Held {
    const kept = this.#held.get(key);
    if (kept !== undefined) {
      this.#closeLater(handle);
      this.#pin(key, kept);
      return kept;
    }
    const held: Held = { handle, depth, users: 1 };
    this.#held.set(key, held);
    this.#evict();
    return held;
  }

  #pin(key: string, held: Held): void {
    held.users += 1;
    if (held === this.#start) return;
    // Most recently used last.
    this.#held.delete(key);
    this.#held.set(key, held);
  }

  #unpin(held: Held): void {
    held.users -= 1;
    this.#evict();
  }

  /**
   * Closes directories not in use, down to the limit: the least recently used of those not wanted
   * first, then of the wanted ones; wanted checkpoints stay open, besides the limit.
   */
  #evict(): void {
    if (this.#held.size <= this.#max) return;
    const checkpoint = (key: string, held: Held): boolean => held.depth % CHECKPOINT_LEVELS === 0 && this.#wanted.has(key);
    let limit = this.#max;
    for (const [key, held] of this.#held) if (checkpoint(key, held)) limit += 1;
    for (const wanted of [false, true]) {
      for (const [key, held] of this.#held) {
        if (this.#held.size <= limit) return;
        if (held.users > 0 || this.#wanted.has(key) !== wanted || checkpoint(key, held)) continue;
        this.#held.delete(key);
        this.#closeLater(held.handle);
      }
    }
  }

  /** Closes a handle no one uses; `close` waits for it. */
  #closeLater(handle: FileHandle): void {
    const closing = handle.close().catch(() => undefined);
    this.#pending.add(closing);
    void closing.finally(() => this.#pending.delete(closing));
  }
}

/** The entries of a held directory, read through its descriptor, without the server's own files. */
export async function listHeld(dir: FileHandle): Promise<Dirent[]> {
  const entries = await readdir(heldPath(dir), { withFileTypes: true });
  return entries.filter((entry) => !isOwnFileName(entry.name));
}
