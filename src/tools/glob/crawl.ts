import type { Dirent } from 'node:fs';
import { lstat, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import type { FileSystemAdapter } from 'tinyglobby';
import { listHeld, type HeldTree } from '../../os/fs/held-dir.js';
import { heldPath, systemError } from '../../os/fs/workspace.js';

/** What one search may do and has done. */
export interface CrawlBudget {
  /** Entries read by the crawl. */
  entries: number;
  /** Directories opened by the crawl; with `entries`, at most `max`. */
  opens: number;
  /** Directories opened after the crawl to take modification times, at most `max` on their own. */
  timeOpens: number;
  max: number;
  exhausted: boolean;
  /** A directory was left unread because its path is too long (see HeldCrawl). */
  tooLong: boolean;
}

// The crawler's idea of where it starts; a label only, never opened (see HeldCrawl).
export const CRAWL_ROOT = '/held';
// Directories read at once: enough to keep the thread pool busy, few enough to stay depth first.
const CONCURRENT_READS = 4;
// Files whose modification times are taken at once: one at a time is slow, all at once can exhaust descriptors.
export const STAT_BATCH = 64;

type ReaddirCallback = (err: NodeJS.ErrnoException | null, entries: Dirent[]) => void;

interface ReadRequest {
  /** The path the crawler asked for, below CRAWL_ROOT; taken apart only when read, as the crawler's own strings share their prefixes. */
  dir: string;
  /** The directory (as a path below the start) whose entries the crawler took when it asked: it opens this one. */
  parent: string | undefined;
  callback: ReaddirCallback;
}

/** Whether the caller's rules let it see a path below the start (a directory's with `directory`). */
export type Visible = (below: string, directory: boolean) => boolean;

export interface HeldCrawlOptions {
  tree: HeldTree;
  budget: CrawlBudget;
  /** The longest path below the start of a directory read; deeper ones read as empty. */
  maxBelow: number;
  /** Files (paths below the start) whose modification times to take while their directory is held. */
  matches: (relative: string) => boolean;
  /** Where they go: the time of a regular file, undefined for anything else. */
  times: Map<string, number | undefined>;
  signal: AbortSignal;
  /** Undefined without rules for reading; else what a hidden directory holds is never read, and a hidden entry never handed on. */
  visible?: Visible | undefined;
}

/**
 * The file system tinyglobby crawls: every directory it reads is opened through the HeldTree of
 * the search, by name inside its held parent, without following symlinks, and read through its
 * descriptor. With `followSymbolicLinks: false` the crawler skips symlinks it meets, but it starts
 * at the pattern's static prefix (`link/*.ts` starts in `link`); a directory reached through a
 * symlink reads as empty, so symlinks are never followed, wherever they are, and a directory
 * swapped for one while the crawl runs cannot lead it out. The server's own files are left out.
 * The crawler needs realpath and stat only to follow symlinks; they refuse, should it ever ask.
 *
 * The crawler asks for every subdirectory it wants while it takes a directory's entries; the
 * requests are served last in, first out, so the tree is read depth first, and the tree is told
 * which directories reads to come will open from, so it keeps them. Every open and every entry
 * counts against the budget. The modification times of the files that match are taken while
 * their directory is held, so that the search need not find its way back to them.
 */
export class HeldCrawl {
  readonly fs: FileSystemAdapter;
  /** Rejects if the crawler throws while it takes a directory's entries: it would wait forever then. */
  readonly failure: Promise<never>;
  readonly #options: HeldCrawlOptions;
  readonly #waiting: ReadRequest[] = [];
  readonly #reading = new Set<Promise<void>>();
  // The directory whose entries the crawler is taking now (as a path below the start).
  #answering: string | undefined;
  #fail: (err: unknown) => void = () => undefined;
  #closed = false;

  constructor(options: HeldCrawlOptions) {
    this.#options = options;
    this.failure = new Promise<never>((_resolve, reject) => {
      this.#fail = reject;
    });
    // The crawler's paths are CRAWL_ROOT, "/", the path below and a trailing "/".
    const maxLength = CRAWL_ROOT.length + 2 + options.maxBelow;
    const readdir = (dir: string, _options: { withFileTypes: true }, callback: ReaddirCallback): void => {
      if (this.#closed) {
        process.nextTick(callback, null, []);
      } else if (dir.length > maxLength && path.posix.relative(CRAWL_ROOT, dir).length > options.maxBelow) {
        options.budget.tooLong = true;
        process.nextTick(callback, null, []);
      } else {
        const parent = this.#answering;
        if (parent !== undefined) options.tree.want(parent, 1);
        this.#waiting.push({ dir, parent, callback });
        this.#next();
      }
    };
    const refuse = (_path: string, callback: (err: NodeJS.ErrnoException) => void): void => {
      process.nextTick(callback, systemError('EPERM', 'realpath'));
    };
    this.fs = { readdir, realpath: refuse, stat: refuse } as unknown as FileSystemAdapter;
  }

  /** Answers what still waits with no entries, and waits for the reads under way. */
  async close(): Promise<void> {
    this.#closed = true;
    for (let request = this.#waiting.pop(); request !== undefined; request = this.#waiting.pop()) this.#done(request, undefined, null, []);
    while (this.#reading.size > 0) await Promise.allSettled([...this.#reading]);
  }

  #next(): void {
    while (this.#reading.size < CONCURRENT_READS && this.#waiting.length > 0) {
      const reading: Promise<void> = this.#read(this.#waiting.pop()!).finally(() => {
        this.#reading.delete(reading);
        this.#next();
      });
      this.#reading.add(reading);
    }
  }

  async #read(request: ReadRequest): Promise<void> {
    const { tree, signal, visible } = this.#options;
    let answered = false;
    const below = path.posix.relative(CRAWL_ROOT, request.dir);
    const answer = (err: NodeJS.ErrnoException | null, entries: Dirent[]): void => {
      answered = true;
      this.#done(request, err === null && entries.length > 0 ? below : undefined, err, entries);
    };
    try {
      if (this.#closed || signal.aborted || this.#spent() || below === '..' || below.startsWith('../') || path.posix.isAbsolute(below)) return;
      // The crawler starts at a pattern's static prefix (`secrets/*`), which may be hidden itself.
      if (below !== '' && visible?.(below, true) === false) return;
      const parts = below === '' ? [] : below.split('/');
      // Answered while the directory is held, so the subdirectories asked for meanwhile find it.
      await tree.with(
        parts,
        async (dir) => {
          const entries = this.#charge(this.#visibleOnly(below, await listHeld(dir)));
          await this.#takeTimes(dir, below, entries);
          answer(null, entries);
        },
        () => this.#mayOpen(),
      );
    } catch (err) {
      if (!answered) answer(err as NodeJS.ErrnoException, []);
    } finally {
      if (!answered) answer(null, []);
    }
  }

  /** Hands the crawler its answer; the subdirectories it asks for meanwhile will open from `below`. */
  #done(request: ReadRequest, below: string | undefined, err: NodeJS.ErrnoException | null, entries: Dirent[]): void {
    this.#answering = below;
    try {
      request.callback(err, entries);
    } catch (thrown) {
      this.#fail(thrown);
    } finally {
      this.#answering = undefined;
      if (request.parent !== undefined) this.#options.tree.want(request.parent, -1);
    }
  }

  /** Takes the modification times of the files among `entries` that match, through the held directory. */
  async #takeTimes(dir: FileHandle, below: string, entries: readonly Dirent[]): Promise<void> {
    const { matches, times } = this.#options;
    const files = entries
      .filter((entry) => entry.isFile())
      .map((entry) => ({ name: entry.name, relative: below === '' ? entry.name : `${below}/${entry.name}` }));
    const matching = files.filter((file) => matches(file.relative));
    for (let first = 0; first < matching.length; first += STAT_BATCH) {
      await Promise.all(
        matching.slice(first, first + STAT_BATCH).map(async ({ name, relative }) => {
          const stats = await lstat(heldPath(dir, name)).catch(() => undefined);
          times.set(relative, stats?.isFile() ? stats.mtimeMs : undefined);
        }),
      );
    }
  }

  /** The entries the rules let the caller see; hidden ones are left out before they are counted. */
  #visibleOnly(below: string, entries: Dirent[]): Dirent[] {
    const { visible } = this.#options;
    if (visible === undefined) return entries;
    return entries.filter((entry) => visible(below === '' ? entry.name : `${below}/${entry.name}`, entry.isDirectory()));
  }

  #spent(): boolean {
    const { budget } = this.#options;
    if (budget.entries + budget.opens < budget.max) return false;
    budget.exhausted = true;
    return true;
  }

  #mayOpen(): boolean {
    if (this.#spent()) return false;
    this.#options.budget.opens += 1;
    return true;
  }

  /** The entries the budget has room for. */
  #charge(entries: Dirent[]): Dirent[] {
    const { budget } = this.#options;
    const room = Math.max(0, budget.max - budget.entries - budget.opens);
    if (entries.length > room) {
      entries = entries.slice(0, room);
      budget.exhausted = true;
    }
    budget.entries += entries.length;
    return entries;
  }
}
