import { errorResult } from '../../core/result.js';
import type { ToolResult } from '../../core/types.js';
import { ReplacedWhileWriting } from '../../os/fs/atomic-write.js';
import { FileLockLost, FileLockTimeout } from '../../os/fs/file-lock.js';
import { quotePath } from '../../os/fs/describe.js';
import { WorkspaceError } from '../../os/fs/workspace.js';

// What each predictable file-system error means, phrased to follow `Path "x" `.
const REASONS: Readonly<Record<string, string>> = {
  ENOENT: 'does not exist',
  ENOTDIR: 'does not exist: a part of it is a file, not a directory',
  EISDIR: 'is a directory',
  EEXIST: 'already exists',
  EACCES: 'cannot be accessed: permission denied',
  EPERM: 'cannot be accessed: operation not permitted',
  ELOOP: 'has a symbolic link loop',
  ENAMETOOLONG: 'is too long for the file system',
  ENOSPC: 'cannot be written: no space left on the device',
  EDQUOT: 'cannot be written: disk quota exceeded',
  EROFS: 'cannot be written: the file system is read-only',
  EFBIG: 'cannot be written: the file would be too large',
  EBUSY: 'is busy',
  ETXTBSY: 'is busy',
  EMFILE: 'cannot be opened: the server has too many open files',
  ENFILE: 'cannot be opened: the server has too many open files',
  EIO: 'cannot be accessed: input/output error',
  ENXIO: 'cannot be opened: it is a socket or a device with nothing behind it',
};

/** The code of a system error (one raised by a syscall), if `err` is one. */
export function systemErrorCode(err: unknown): string | undefined {
  const e = err as NodeJS.ErrnoException | null;
  return typeof e?.code === 'string' && typeof e.syscall === 'string' ? e.code : undefined;
}

/**
 * Turns a workspace refusal or a system error into a result that names the path as the client
 * gave it. Node's own message is never used: it names absolute paths. Anything else (an abort, a
 * bug) is rethrown for the executor to handle.
 */
export function fileErrorResult(err: unknown, given: string): ToolResult {
  if (err instanceof WorkspaceError) return errorResult(err.message);
  const code = systemErrorCode(err);
  if (code === undefined) throw err;
  const reason = REASONS[code] ?? `cannot be accessed (${code})`;
  return errorResult(`Path ${quotePath(given)} ${reason}.`);
}

/** The refusal for a path whose name is one the server gives its own temporary and lock files. */
export function ownNameRefusal(shown: string): ToolResult {
  return errorResult(
    `Path ${shown} has a name of the form the server gives its own temporary and lock files (.toolport-<hex>.tmp or .lock); Write and Edit leave those alone. Choose another name.`,
  );
}

/**
 * The result for a write that another process got in the way of: a lock held too long, a lock
 * lost, or the file replaced while it was written (see `writeFileAtomic`); undefined for any
 * other error.
 */
export function writeConflictResult(err: unknown, shown: string): ToolResult | undefined {
  if (err instanceof FileLockTimeout)
    return errorResult(`Path ${shown} is locked by another process that is changing it (${err.message}); nothing was written. Try again.`);
  if (err instanceof FileLockLost)
    return errorResult(`Path ${shown} was not written: ${err.message}, so another process may have been changing it. Try again.`);
  if (!(err instanceof ReplacedWhileWriting)) return undefined;
  if (!err.renamed) {
    return errorResult(
      `Path ${shown} was not written: another process replaced the server's temporary file while it was being written, so it was not put in place; the file is as it was. Try again.`,
    );
  }
  return errorResult(
    `Path ${shown} was changed by another process while this write ran: after it, the path does not hold the content written (something else was put in its place), so the change is not in the file. Read it and try again.`,
  );
}

/** The refusal for a write that would take the workspace past its disk quota; `why` comes from `WorkspaceUsage.reserve`. */
export function quotaRefusal(shown: string, why: string): ToolResult {
  return errorResult(`Path ${shown} was not written: ${why}. Nothing was written; make room in the workspace (or ask for a larger quota) and try again.`);
}
