import { lstat, realpath, stat } from 'node:fs/promises';
import path from 'node:path';

// Linux's PATH_MAX; longer paths cannot name a file, so they are refused before any I/O.
const MAX_PATH_LENGTH = 4096;

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
 * The one directory the file tools may touch. Containment is decided on canonical paths: the
 * path is resolved against the root, every existing part is run through `realpath` (so symlinks,
 * in the last part or in any parent, are followed before the check), and the result must equal
 * the root or start with the root plus a separator, never a bare string prefix.
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
   * inside the workspace. The path need not exist: its deepest existing ancestor is canonicalised
   * and the rest appended, so a new file's parent directory is checked like any other path.
   * Throws `WorkspaceError` for empty paths, NUL bytes, overlong paths, dangling symlinks, symlink
   * loops, and anything that lands outside the root.
   */
  async resolve(given: string): Promise<ResolvedPath> {
    if (typeof given !== 'string' || given.length === 0) throw new WorkspaceError('The path is empty.');
    const shown = JSON.stringify(given.length > 200 ? `${given.slice(0, 200)}...` : given);
    if (given.includes('\0')) throw new WorkspaceError(`Path ${shown} contains a NUL byte.`);
    if (given.length > MAX_PATH_LENGTH) throw new WorkspaceError(`Path ${shown} is longer than ${MAX_PATH_LENGTH} characters.`);

    const outside = new WorkspaceError(`Path ${shown} is outside the workspace; file tools may only use paths under the workspace root.`);
    const candidate = path.resolve(this.root, given);
    let existing = candidate;
    const rest: string[] = [];
    let canonical: string | undefined;
    for (;;) {
      try {
        canonical = await realpath(existing);
        break;
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'ELOOP') throw new WorkspaceError(`Path ${shown} has a symbolic link loop.`);
        if (code !== 'ENOENT' && code !== 'ENOTDIR') throw new WorkspaceError(`Path ${shown} cannot be resolved (${code ?? 'error'}).`);
        // A symlink whose target is missing: following it on write could create a file anywhere.
        if (await isSymlink(existing)) {
          if (!this.contains(candidate)) throw outside;
          throw new WorkspaceError(`Path ${shown} is a symbolic link whose target does not exist.`);
        }
        const parent = path.dirname(existing);
        if (parent === existing) throw outside;
        rest.unshift(path.basename(existing));
        existing = parent;
      }
    }
    const absolute = rest.length === 0 ? canonical : path.join(canonical, ...rest);
    if (!this.contains(absolute)) throw outside;
    return { absolute, relative: path.relative(this.root, absolute) || '.' };
  }
}

async function isSymlink(p: string): Promise<boolean> {
  try {
    return (await lstat(p)).isSymbolicLink();
  } catch {
    return false;
  }
}
