import { lstat, readlink, realpath, stat } from 'node:fs/promises';
import path from 'node:path';

// Linux's PATH_MAX; longer paths cannot name a file, so they are refused before any I/O.
const MAX_PATH_LENGTH = 4096;
// Linux's limit on symlinks followed in one lookup (ELOOP past it).
const MAX_SYMLINKS = 40;

/** A path a file tool may not use; the message names the path as given and the reason, nothing more. */
export class WorkspaceError extends Error {
  override readonly name = 'WorkspaceError';
}

/** A path inside the workspace, canonical (no symlinks, no `..`), with its workspace-relative form. */
export interface ResolvedPath {
  /** Absolute canonical path. */
  absolute: string;
  /** Relative to the workspace root (`.` for the root itself), for messages. */
  relative: string;
}

/**
 * The one directory the file tools may touch. Containment is decided on canonical paths: every
 * symlink, in the last part or in any parent, is followed before the check, and the result must
 * equal the root or start with the root plus a separator, never a bare string prefix.
 */
export class Workspace {
  /** The canonical root. */
  readonly root: string;
  readonly #prefix: string;

  private constructor(root: string) {
    this.root = root;
    this.#prefix = root.endsWith(path.sep) ? root : root + path.sep;
  }

  /** Canonicalises the root once, at start-up; fails unless it is an existing directory. */
  static async open(root: string): Promise<Workspace> {
    let canonical: string;
    try {
      canonical = await realpath(path.resolve(root));
    } catch {
      throw new Error(`Invalid TOOLPORT_WORKSPACE: ${JSON.stringify(root)} does not exist`);
    }
    if (!(await stat(canonical)).isDirectory()) throw new Error(`Invalid TOOLPORT_WORKSPACE: ${JSON.stringify(root)} is not a directory`);
    return new Workspace(canonical);
  }

  /** True when a canonical absolute path is the root or below it. */
  contains(absolute: string): boolean {
    return absolute === this.root || absolute.startsWith(this.#prefix);
  }

  /**
   * Resolves a path given by a client (absolute, or relative to the root) to a canonical path
   * inside the workspace. The path is walked one component at a time, as the kernel would, and
   * every symlink is expanded by hand; a step that would leave the root is refused before
   * anything outside is touched, so refusals say nothing about the file system out there. The
   * path need not exist: once a component is missing, the rest is appended, so a new file's
   * parent directory is checked like any other path. A path that ends with a separator must name
   * an existing directory, as the kernel requires. Throws `WorkspaceError` for empty paths, NUL
   * bytes, overlong paths, dangling symlinks, symlink loops, a trailing separator after anything
   * but a directory, and anything that lands outside.
   */
  async resolve(given: string): Promise<ResolvedPath> {
    if (typeof given !== 'string' || given.length === 0) throw new WorkspaceError('The path is empty.');
    const shown = JSON.stringify(given.length > 200 ? `${given.slice(0, 200)}...` : given);
    if (given.includes('\0')) throw new WorkspaceError(`Path ${shown} contains a NUL byte.`);
    if (given.length > MAX_PATH_LENGTH) throw new WorkspaceError(`Path ${shown} is longer than ${MAX_PATH_LENGTH} characters.`);
    const outside = (): WorkspaceError =>
      new WorkspaceError(`Path ${shown} is outside the workspace; file tools may only use paths under the workspace root.`);
    // The walk drops empty parts, so "file.txt/" would name the file; the kernel says ENOTDIR.
    const notDirectory = given.endsWith(path.sep)
      ? (): WorkspaceError => new WorkspaceError(`Path ${shown} ends with "${path.sep}" but is not a directory.`)
      : undefined;

    let current = path.isAbsolute(given) ? path.parse(given).root : this.root;
    // Each part remembers whether it came from a symlink's target, to tell a dangling link from a new file.
    const pending = given.split(path.sep).map((part) => ({ part, fromLink: false }));
    let links = 0;
    while (pending.length > 0) {
      const { part, fromLink } = pending.shift()!;
      if (part === '' || part === '.') continue;
      const next = part === '..' ? path.dirname(current) : path.join(current, part);
      if (!this.#mayEnter(next)) throw outside();
      if (part === '..') {
        current = next;
        continue;
      }
      let isLink: boolean;
      try {
        isLink = (await lstat(next)).isSymbolicLink();
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code !== 'ENOENT' && code !== 'ENOTDIR') throw new WorkspaceError(`Path ${shown} cannot be resolved (${code ?? 'error'}).`);
        // A link whose target is missing: following it on write could create a file elsewhere.
        if (fromLink) throw new WorkspaceError(`Path ${shown} is a symbolic link whose target does not exist.`);
        // Missing from here on: the rest cannot hold symlinks, so it is joined as text, unless it
        // climbs back out with `..` (the kernel would fail there too).
        if (pending.some((p) => p.part === '..')) throw new WorkspaceError(`Path ${shown} goes through a directory that does not exist.`);
        const absolute = path.resolve(next, ...pending.map((p) => p.part));
        if (!this.contains(absolute)) throw outside();
        if (notDirectory) throw notDirectory();
        return { absolute, relative: path.relative(this.root, absolute) || '.' };
      }
      if (!isLink) {
        current = next;
        continue;
      }
      if (++links > MAX_SYMLINKS) throw new WorkspaceError(`Path ${shown} has a symbolic link loop.`);
      const target = await readlink(next);
      pending.unshift(...target.split(path.sep).map((p) => ({ part: p, fromLink: true })));
      if (path.isAbsolute(target)) current = path.parse(target).root;
    }
    if (!this.contains(current)) throw outside();
    if (notDirectory && !(await stat(current)).isDirectory()) throw notDirectory();
    return { absolute: current, relative: path.relative(this.root, current) || '.' };
  }

  /** True for the root, paths below it, and its ancestors (which a walk from `/` passes through). */
  #mayEnter(p: string): boolean {
    return this.contains(p) || this.#prefix.startsWith(p.endsWith(path.sep) ? p : p + path.sep);
  }
}
