import type { BigIntStats, Stats } from 'node:fs';
import { lstat, mkdir, open, type FileHandle } from 'node:fs/promises';
import { Type } from 'typebox';
import { defineTool } from '../core/define-tool.js';
import { errorResult, textResult } from '../core/result.js';
import type { ToolDef, ToolResult } from '../core/types.js';
import { NEW_FILE_MODE, writeFileAtomic } from '../os/fs/atomic-write.js';
import { checkPathRules } from './files/rules.js';
import { fileErrorResult, ownNameRefusal, quotaRefusal, systemErrorCode, writeConflictResult } from './files/errors.js';
import { quotePath } from '../os/fs/describe.js';
import { withFileLock } from '../os/fs/file-lock.js';
import { countLines } from './numbered-lines.js';
import { isOwnFileName } from '../os/fs/own-files.js';
import { assertUnchanged, contentVersion, loadRegularFile } from '../os/fs/regular-file.js';
import { expectedVersionSchema, versionMismatch, versionNote } from './files/versions.js';
import { heldPath, OPEN_DIRECTORY, type Workspace } from '../os/fs/workspace.js';
import { MAX_MEASURED_DEPTH, type Reservation, type WorkspaceUsage } from '../os/fs/workspace-usage.js';

/** What Write is made with besides its workspace. */
export interface FileWriteOptions {
  /** The workspace's disk usage against its quota; without it, no quota. */
  usage?: WorkspaceUsage;
}

/** Write: creates or replaces a whole file inside the workspace, atomically. */
export function createWriteTool(ws: Workspace, { usage }: FileWriteOptions = {}): ToolDef {
  return defineTool({
    name: 'Write',
    description: [
      'Writes a file in the workspace: creates it, or replaces all of its content if it exists. Missing parent directories are created.',
      'To change part of an existing file prefer Edit, which sends only the change; use Write for new files or complete rewrites.',
      'The write is atomic (readers see the old content or the new, never a half-written file) and an existing file keeps its permissions (but never setuid, setgid or sticky bits); new files get mode 644.',
      'The content is written exactly as given, as UTF-8. The result says whether the file was created or overwritten, with its size in bytes and lines, and ends with its new version.',
      'Writes and Edits of one file happen one after another, never interleaved; the last one wins. To replace a file only if nobody changed it since you read it, pass the version Read reported as expected_version.',
      'file_path may be absolute or relative to the workspace root; paths outside the workspace, also through symbolic links, are refused, and so is a path that names a directory.',
    ].join(' '),
    inputSchema: Type.Object(
      {
        file_path: Type.String({ description: 'The file to write: absolute, or relative to the workspace root.' }),
        content: Type.String({ description: 'The complete new content of the file.' }),
        expected_version: Type.Optional(expectedVersionSchema('Write')),
      },
      { additionalProperties: false },
    ),
    annotations: { title: 'Write file', readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    rules: { specifier: 'path', access: 'write' },
    async execute({ file_path, content, expected_version }, context) {
      const { signal } = context;
      const shown = quotePath(file_path);
      let existed = false;
      let reservation: Reservation | string | undefined;
      try {
        const location = await ws.locate(file_path);
        let parent: FileHandle | undefined;
        try {
          checkPathRules(context, 'Write', 'write', location, file_path);
          // Comparing versions reads the file: the rules for reading apply to that.
          if (expected_version !== undefined) checkPathRules(context, 'Write', 'read', location, file_path);
          if (location.kind === 'directory') return errorResult(`Path ${shown} is a directory; Write writes files. Name a file inside it instead.`);
          if (isOwnFileName(location.name)) return ownNameRefusal(shown);
          if (location.kind === 'missing' && expected_version !== undefined) return versionMismatch(shown, 'does not exist');
          // Room for the whole content and a block for each new name (the file, the directories made
          // for it), less what the file it replaces takes when no hard link keeps that; settled once written.
          const replaced = location.kind === 'other' ? await lstat(heldPath(location.parent, location.name)).catch(() => undefined) : undefined;
          const created = location.kind === 'missing' ? location.missing.length : 0;
          if (usage !== undefined && created > 1 && location.relative.split('/').length > MAX_MEASURED_DEPTH) {
            return quotaRefusal(shown, `its directories would lie deeper than the ${MAX_MEASURED_DEPTH} levels the workspace's disk use is measured to`);
          }
          reservation = await usage?.reserve(Buffer.byteLength(content) + created * ENTRY_BYTES - freedBy(replaced), signal);
          if (typeof reservation === 'string') return quotaRefusal(shown, reservation);
          parent = location.kind === 'missing' ? await makeParents(location.parent, location.missing.slice(0, -1)) : location.parent;
          if (parent === undefined) return errorResult(`Cannot create ${shown}: a part of its directory is a file, not a directory.`);
          const dir = parent;
          const refusal = await withFileLock(dir, location.name, signal, async (lock): Promise<ToolResult | undefined> => {
            const existing = await lstat(heldPath(dir, location.name)).catch((err: unknown) => {
              const code = systemErrorCode(err);
              if (code === 'ENOENT') return undefined;
              throw err;
            });
            if (existing?.isDirectory()) return errorResult(`Path ${shown} is a directory; Write writes files. Name a file inside it instead.`);
            if (existing && !existing.isFile()) {
              return errorResult(`Path ${shown} is not a regular file (it is a FIFO, socket or device); Write only replaces regular files.`);
            }
            let checked: BigIntStats | undefined;
            if (expected_version !== undefined) {
              if (existing === undefined) return versionMismatch(shown, 'does not exist');
              const current = await loadRegularFile({ ...location, kind: 'other', parent: dir }, file_path, signal);
              const version = current.kind === 'file' ? current.version : undefined;
              if (version !== expected_version) return versionMismatch(shown, version === undefined ? 'cannot be read to compare' : `is at version ${version}`);
              if (current.kind === 'file') checked = current.stats;
            }
            existed = existing !== undefined;
            try {
              const written = await writeFileAtomic(dir, location.name, content, {
                mode: existing ? existing.mode : NEW_FILE_MODE,
                signal,
                lockKey: lock.key,
                beforeRename: async () => {
                  lock.assertHeld();
                  // The version held when it was read; a change since (by something that takes no lock) refuses the write.
                  if (checked) await assertUnchanged(dir, location.name, checked, () => new ChangedSinceCheck());
                },
              });
              if (typeof reservation === 'object') reservation.done(Number(written.blocks) * 512 + Math.max(0, created - 1) * ENTRY_BYTES - freedBy(existing));
            } catch (err) {
              if (err instanceof ChangedSinceCheck) return versionMismatch(shown, 'was changed by someone else while this write ran');
              throw err;
            }
            return undefined;
          });
          if (refusal) return refusal;
        } finally {
          if (parent !== undefined && parent !== location.parent) await parent.close();
          await location.close();
        }
      } catch (err) {
        if (systemErrorCode(err) === 'ENOTDIR') return errorResult(`Cannot create ${shown}: a part of its directory is a file, not a directory.`);
        return writeConflictResult(err, shown) ?? fileErrorResult(err, file_path);
      } finally {
        // Settled above when written; anything else wrote nothing.
        if (typeof reservation === 'object') reservation.cancel();
      }
      const bytes = Buffer.byteLength(content);
      const lines = countLines(content);
      const size = `${bytes} byte${bytes === 1 ? '' : 's'}, ${lines} line${lines === 1 ? '' : 's'}`;
      return versionNote(textResult(`${existed ? 'Overwrote' : 'Created'} ${shown} (${size}).`), contentVersion(content));
    },
  });
}

/** What a new name (a file or a directory Write makes) takes at least: one block of the file system. */
const ENTRY_BYTES = 4096;

/** The blocks replacing `file` gives back: none for what is not a regular file, or when another name (a hard link) keeps them. */
function freedBy(file: Stats | undefined): number {
  return file?.isFile() === true && file.nlink === 1 ? file.blocks * 512 : 0;
}

/** Thrown before the rename when the file changed after its version was checked. */
class ChangedSinceCheck extends Error {}

/**
 * Creates the missing directories `names` one below the other, starting in the held directory
 * `dir`, and returns the last one held (the caller closes it unless it is `dir`); undefined when a
 * part of the way is a file. Each is opened without following a symlink, so a link planted in
 * the meantime is not followed outside.
 */
async function makeParents(dir: FileHandle, names: readonly string[]): Promise<FileHandle | undefined> {
  let current = dir;
  try {
    for (const name of names) {
      await mkdir(heldPath(current, name)).catch((err: unknown) => {
        if (systemErrorCode(err) !== 'EEXIST') throw err;
      });
      const next = await open(heldPath(current, name), OPEN_DIRECTORY).catch((err: unknown) => {
        const code = systemErrorCode(err);
        if (code === 'ENOTDIR' || code === 'ELOOP') return undefined;
        throw err;
      });
      // Hold the next one before letting go of this one, so an error in the close leaks nothing.
      const previous = current;
      if (next === undefined) {
        if (previous !== dir) await previous.close();
        return undefined;
      }
      current = next;
      if (previous !== dir) await previous.close();
    }
    return current;
  } catch (err) {
    if (current !== dir) await current.close();
    throw err;
  }
}
