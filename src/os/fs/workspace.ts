import { constants } from 'node:fs';
import { lstat, open, readlink, realpath, type FileHandle } from 'node:fs/promises';
import path from 'node:path';

// Linux's PATH_MAX; longer paths cannot name a file, so they are refused before any I/O.
const MAX_PATH_LENGTH = 4096;
// Linux's limit on symlinks followed in one lookup (ELOOP past it).
const MAX_SYMLINKS = 40;
// Times one walk takes an entry again that changed between two looks at it, before it gives up.
const MAX_RETRIES = 100;
// Components one walk may take, symlink targets included: links whose targets repeat `d/..`
// could otherwise make one path cost a hundred thousand opens.
const MAX_STEPS = 4096;
/** How every directory a client names is opened: without following a symlink in its place (a link there fails with ENOTDIR or ELOOP). */
export const OPEN_DIRECTORY = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;

/** A path a file tool may not use; the message names the path as given and the reason, nothing more. */
export class WorkspaceError extends Error {
  override readonly name = 'WorkspaceError';
}

/**
 * The path of `name` inside the directory a descriptor holds, through `/proc/self/fd`. The kernel
 * resolves the descriptor's link to the directory it holds, wherever that is now, and looks up
 * `name` in it: the `*at()` system calls for an API (Node's) that has none. Without `name`, the
 * directory itself.
 */
export function heldPath(dir: FileHandle, name?: string): string {
  return name === undefined ? `/proc/self/fd/${dir.fd}` : `/proc/self/fd/${dir.fd}/${name}`;
}

/** A system error as Node raises them, for outcomes the walk finds without a failing call. */
export function systemError(code: string, syscall = 'open'): NodeJS.ErrnoException {
  return Object.assign(new Error(code), { code, syscall });
}

/**
 * Where a client's path leads, pinned: the directory that holds its last part is open, and
 * operations go through that descriptor (`heldPath`), never through the path again, so nothing
 * that changes in the workspace afterwards can redirect them outside. Close it when done.
 */
export interface Location {
  /** `directory`: an existing directory (held in `dir`); `other`: an existing non-directory named `name` in `parent`; `missing`: see `missing`. */
  readonly kind: 'directory' | 'other' | 'missing';
  /** The directory holding the last part (the root holds itself). */
  readonly parent: FileHandle;
  /** The last part's name in `parent` (`.` for the root). */
  readonly name: string;
  /** For `directory`: the directory itself. */
  readonly dir: FileHandle | undefined;
  /** For `missing`: the parts below `parent` that do not exist, the last one being `name`. */
  readonly missing: readonly string[];
  /** Canonical, relative to the workspace root (`.` for the root), for messages and listings. */
  readonly relative: string;
  /** Releases the descriptors this location holds. */
  close(): Promise<void>;
}

/** A path inside the workspace, canonical, with its workspace-relative form. */
export interface ResolvedPath {
  /** Absolute canonical path. */
  absolute: string;
  /** Relative to the workspace root (`.` for the root itself), for messages. */
  relative: string;
}

// Every open root, so none is ever garbage-collected while open: Node 26 treats a FileHandle
// collected unclosed as an uncaught error, and a workspace is held for the life of the process.
const OPEN_ROOTS = new Set<FileHandle>();

interface Held {
  handle: FileHandle;
  name: string;
}

interface Part {
  part: string;
  /** Came from a symlink's target: missing then means a dangling link, not a new file. */
  fromLink: boolean;
}

/**
 * The one directory the file tools may touch, held open from start-up. A client's path is walked
 * from that descriptor one component at a time, as the kernel would, but each directory is opened
 * without following a symlink, and every symlink is expanded by hand under the same rules; a step
 * that would leave the root is refused before anything outside is touched. What the walk ends on
 * stays open (`Location`), so a check and the use that follows see the same directory.
 */
export class Workspace {
  /** The canonical root, as it was at start-up (for messages and for Bash's working directory). */
  readonly root: string;
  readonly #rootDir: FileHandle;
  readonly #prefix: string;
  readonly #onClose: Array<() => void> = [];

  private constructor(root: string, rootDir: FileHandle) {
    this.root = root;
    this.#rootDir = rootDir;
    this.#prefix = root.endsWith(path.sep) ? root : root + path.sep;
  }

  /** Opens the root once, at start-up; fails unless it is an existing directory. */
  static async open(root: string): Promise<Workspace> {
    let canonical: string;
    try {
      canonical = await realpath(path.resolve(root));
    } catch {
      throw new Error(`Invalid TOOLPORT_WORKSPACE: ${JSON.stringify(root)} does not exist`);
    }
    let dir: FileHandle;
    try {
      dir = await open(canonical, OPEN_DIRECTORY);
    } catch {
      throw new Error(`Invalid TOOLPORT_WORKSPACE: ${JSON.stringify(root)} is not a directory`);
    }
    OPEN_ROOTS.add(dir);
    return new Workspace(canonical, dir);
  }

  /** Closes the root's descriptor, and ends what was bound to it (`onClose`); only for embedders and tests that open many workspaces. */
  async close(): Promise<void> {
    for (const end of this.#onClose.splice(0)) end();
    if (OPEN_ROOTS.delete(this.#rootDir)) await this.#rootDir.close();
  }

  /** Ends `end` with the workspace: what works in it and holds processes or descriptors of its own (Bash's waiting shells). */
  onClose(end: () => void): void {
    this.#onClose.push(end);
  }

  /** The root directory's descriptor; it stays open for the life of the process. */
  get rootDir(): FileHandle {
    return this.#rootDir;
  }

  /** True when a canonical absolute path is the root or below it. */
  contains(absolute: string): boolean {
    return absolute === this.root || absolute.startsWith(this.#prefix);
  }

  /**
   * Walks a path given by a client (absolute, or relative to the root) and pins where it leads.
   * The path need not exist: once a component is missing, the rest is recorded as `missing`, so a
   * new file's parent directory is checked like any other path. A path that ends with a separator
   * must name a directory. Throws `WorkspaceError` for empty paths, NUL bytes, overlong paths,
   * dangling symlinks, symlink loops, a trailing separator after anything but a directory, and
   * anything that lands outside; a system error with code ENOTDIR when a later part goes through
   * a file. Messages never name anything outside the workspace.
   */
  async locate(given: string): Promise<Location> {
    if (typeof given !== 'string' || given.length === 0) throw new WorkspaceError('The path is empty.');
    const shown = JSON.stringify(given.length > 200 ? `${given.slice(0, 200)}...` : given);
    if (given.includes('\0')) throw new WorkspaceError(`Path ${shown} contains a NUL byte.`);
    if (given.length > MAX_PATH_LENGTH) throw new WorkspaceError(`Path ${shown} is longer than ${MAX_PATH_LENGTH} characters.`);
    const outside = (): WorkspaceError => new WorkspaceError(`Path ${shown} is outside the workspace; file tools may only use paths under the workspace root.`);
    const unresolvable = (err: unknown): WorkspaceError =>
      new WorkspaceError(`Path ${shown} cannot be resolved (${(err as NodeJS.ErrnoException).code ?? 'error'}).`);
    // The walk drops empty parts, so "file.txt/" would name the file; the kernel says ENOTDIR.
    const mustBeDirectory = given.endsWith(path.sep);
    const notDirectory = (): WorkspaceError => new WorkspaceError(`Path ${shown} ends with "${path.sep}" but is not a directory.`);

    // Inside the root, `stack` holds the open directories from the root down. Outside (an absolute
    // path walks from "/" through the root's ancestors), `stack` is empty and `current` is the
    // textual path, which may only be an ancestor of the root: those belong to whoever set up the
    // server, not to clients, and are never opened.
    const stack: Held[] = path.isAbsolute(given) ? [] : [{ handle: this.#rootDir, name: '.' }];
    let current = '/';
    const below = (): string[] => stack.slice(1).map((h) => h.name);
    const pending: Part[] = given.split(path.sep).map((part) => ({ part, fromLink: false }));
    let links = 0;
    let retries = 0;
    const release = async (keep: readonly (FileHandle | undefined)[] = []): Promise<void> => {
      await Promise.all(stack.filter((h) => h.handle !== this.#rootDir && !keep.includes(h.handle)).map((h) => h.handle.close()));
    };
    const expand = (target: string): void => {
      if (++links > MAX_SYMLINKS) throw new WorkspaceError(`Path ${shown} has a symbolic link loop.`);
      pending.unshift(...target.split(path.sep).map((p) => ({ part: p, fromLink: true })));
    };

    try {
      let steps = 0;
      while (pending.length > 0) {
        const { part, fromLink } = pending.shift()!;
        if (part === '' || part === '.') continue;
        if (++steps > MAX_STEPS) throw new WorkspaceError(`Path ${shown} takes more than ${MAX_STEPS} steps to resolve, symbolic links included.`);
        const top = stack.at(-1);
        if (top === undefined) {
          // Outside: only the way down to the root.
          const next = part === '..' ? path.dirname(current) : path.join(current, part);
          if (next === this.root) stack.push({ handle: this.#rootDir, name: '.' });
          else if (!this.#prefix.startsWith(next.endsWith(path.sep) ? next : next + path.sep)) throw outside();
          else if (part !== '..' && (await lstat(next).catch((err: unknown) => Promise.reject(unresolvable(err)))).isSymbolicLink()) {
            const target = await readlink(next).catch((err: unknown) => Promise.reject(unresolvable(err)));
            expand(target);
            if (path.isAbsolute(target)) current = '/';
          } else current = next;
          continue;
        }
        if (part === '..') {
          stack.pop();
          if (top.handle !== this.#rootDir) await top.handle.close();
          if (stack.length === 0) current = path.dirname(this.root);
          continue;
        }
        let opened: FileHandle | undefined;
        let code: string | undefined;
        try {
          opened = await open(heldPath(top.handle, part), OPEN_DIRECTORY);
        } catch (err) {
          code = (err as NodeJS.ErrnoException).code;
        }
        if (opened) {
          stack.push({ handle: opened, name: part });
          continue;
        }
        if (code === 'ENOTDIR' || code === 'ELOOP') {
          // A symlink, or something that is not a directory.
          const stats = await lstat(heldPath(top.handle, part)).catch((err: unknown) => {
            if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
            throw unresolvable(err);
          });
          if (stats?.isDirectory()) {
            // A symlink when opened, a directory again now: the entry is changing under the walk; take it again.
            if (++retries > MAX_RETRIES) throw unresolvable({ code: 'EAGAIN' });
            pending.unshift({ part, fromLink });
            continue;
          }
          if (stats?.isSymbolicLink()) {
            const target = await readlink(heldPath(top.handle, part)).catch((err: unknown) => {
              // Replaced by something else since the lstat: take the part again.
              if ((err as NodeJS.ErrnoException).code === 'EINVAL' || (err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
              throw unresolvable(err);
            });
            if (target === undefined) {
              if (++retries > MAX_RETRIES) throw unresolvable({ code: 'EAGAIN' });
              pending.unshift({ part, fromLink });
            } else {
              expand(target);
              if (path.isAbsolute(target)) {
                await release();
                stack.length = 0;
                current = '/';
              }
            }
            continue;
          }
          if (stats !== undefined) {
            if (mustBeDirectory) throw notDirectory();
            if (pending.some((p) => p.part !== '' && p.part !== '.')) throw systemError('ENOTDIR');
            await release([top.handle]);
            return this.#location('other', top.handle, part, undefined, [], [...below(), part]);
          }
          code = 'ENOENT';
        }
        if (code !== 'ENOENT') throw unresolvable({ code });
        // A link whose target is missing: following it on write could create a file elsewhere.
        if (fromLink) throw new WorkspaceError(`Path ${shown} is a symbolic link whose target does not exist.`);
        // Missing from here on: the rest cannot hold symlinks, unless it climbs back out with `..`
        // (the kernel would fail there too).
        if (pending.some((p) => p.part === '..')) throw new WorkspaceError(`Path ${shown} goes through a directory that does not exist.`);
        if (mustBeDirectory) throw notDirectory();
        const missing = [part, ...pending.map((p) => p.part).filter((p) => p !== '' && p !== '.')];
        await release([top.handle]);
        return this.#location('missing', top.handle, missing.at(-1)!, undefined, missing, [...below(), ...missing]);
      }
      const top = stack.at(-1);
      if (top === undefined) throw outside();
      const parent = stack.at(-2)?.handle ?? top.handle;
      await release([top.handle, parent]);
      return this.#location('directory', parent, top.name, top.handle, [], below());
    } catch (err) {
      await release();
      throw err;
    }
  }

  /** Resolves a path to its canonical form inside the workspace, without keeping anything open. */
  async resolve(given: string): Promise<ResolvedPath> {
    const location = await this.locate(given);
    await location.close();
    return { absolute: location.relative === '.' ? this.root : path.join(this.root, location.relative), relative: location.relative };
  }

  #location(kind: Location['kind'], parent: FileHandle, name: string, dir: FileHandle | undefined, missing: string[], names: string[]): Location {
    const relative = names.join(path.sep) || '.';
    const rootDir = this.#rootDir;
    return {
      kind,
      parent,
      name,
      dir,
      missing,
      relative,
      async close() {
        const owned = [parent, dir].filter((h, i, all): h is FileHandle => h !== undefined && h !== rootDir && all.indexOf(h) === i);
        await Promise.all(owned.map((h) => h.close()));
      },
    };
  }
}
