import type { BigIntStats } from 'node:fs';
import { Type } from 'typebox';
import { defineTool } from '../core/define-tool.js';
import { errorResult, textResult } from '../core/result.js';
import type { ToolDef, ToolResult } from '../core/types.js';
import { writeFileAtomic } from '../os/fs/atomic-write.js';
import { checkLinkCount, checkPathRules } from './files/rules.js';
import { fileErrorResult, ownNameRefusal, quotaRefusal, systemErrorCode, writeConflictResult } from './files/errors.js';
import { formatBytes, quotePath } from '../os/fs/describe.js';
import { withFileLock, type HeldLock } from '../os/fs/file-lock.js';
import { looksBinary } from './files/kind.js';
import { numberLine } from './numbered-lines.js';
import { isOwnFileName } from '../os/fs/own-files.js';
import { assertUnchanged, contentVersion, loadRegularFile, MAX_FILE_BYTES } from '../os/fs/regular-file.js';
import { expectedVersionSchema, versionMismatch, versionNote } from './files/versions.js';
import type { Location, Workspace } from '../os/fs/workspace.js';
import type { WorkspaceUsage } from '../os/fs/workspace-usage.js';
import type { FileWriteOptions } from './write.js';

const BOM = '\uFEFF';
const CONTEXT_LINES = 3;
const MAX_SNIPPET_LINES = 40;

/** Edit: replaces exact text in an existing file inside the workspace, atomically. */
export function createEditTool(ws: Workspace, { usage }: FileWriteOptions = {}): ToolDef {
  return defineTool({
    name: 'Edit',
    description: [
      'Replaces text in an existing file of the workspace: old_string is found literally (no regular expressions, no special characters) and replaced by new_string.',
      'old_string must match the file exactly, including whitespace and indentation; Read the file first and copy the text without the line-number prefix.',
      'By default old_string must occur exactly once: if it occurs more often the edit is refused and the message says how often, so add surrounding lines to make it unique, or set replace_all to true to replace every occurrence (for example to rename a variable).',
      'The file keeps its line endings (old_string and new_string written with \\n are matched and written as \\r\\n in a file that uses \\r\\n), its byte-order mark and its permissions (but never setuid, setgid or sticky bits); the write is atomic.',
      "The result gives the number of replacements and the edited region with line numbers, and ends with the file's new version. Create new files with Write. Only UTF-8 text files up to 10 MiB can be edited, and an edit whose result would pass 10 MiB is refused.",
      'Edits and Writes of one file happen one after another, so concurrent edits of different parts all land. If something else changes the file while an edit runs, the edit is applied again to the new content when old_string still matches as required, and refused otherwise; success is only reported for a change that is in the file. To refuse the edit if anyone changed the file since you read it, pass the version Read reported as expected_version.',
      'file_path may be absolute or relative to the workspace root; paths outside the workspace, also through symbolic links, are refused.',
    ].join(' '),
    inputSchema: Type.Object(
      {
        file_path: Type.String({ description: 'The file to change: absolute, or relative to the workspace root.' }),
        old_string: Type.String({ description: 'The exact text to replace.' }),
        new_string: Type.String({ description: 'The text to put in its place (must differ from old_string).' }),
        replace_all: Type.Optional(Type.Boolean({ description: 'Replace every occurrence of old_string (default false).' })),
        expected_version: Type.Optional(expectedVersionSchema('Edit')),
      },
      { additionalProperties: false },
    ),
    annotations: { title: 'Edit file', readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
    rules: { specifier: 'path', access: 'edit' },
    async execute({ file_path, old_string, new_string, replace_all, expected_version }, context) {
      const { signal } = context;
      const shown = quotePath(file_path);
      if (old_string === '') {
        return errorResult('old_string is empty. Give the exact text to replace; to create a file or replace all of it, use Write.');
      }
      if (old_string === new_string) return errorResult('old_string and new_string are identical, so the edit would change nothing.');
      try {
        const location = await ws.locate(file_path);
        try {
          // Edit reads what it changes (old_string must match), so the rules for reading apply too.
          checkPathRules(context, 'Edit', 'read', location, file_path);
          checkPathRules(context, 'Edit', 'edit', location, file_path);
          const beforeRead = (stats: BigIntStats): void => checkLinkCount(context, 'Edit', file_path, stats.nlink);
          if (location.kind === 'missing') return errorResult(`Path ${shown} does not exist. Edit changes existing files; use Write to create one.`);
          if (location.kind === 'directory') return errorResult(`Path ${shown} is a directory, not a file.`);
          if (isOwnFileName(location.name)) return ownNameRefusal(shown);
          return await withFileLock(location.parent, location.name, signal, (lock) =>
            editLocked(location, lock, { file_path, old_string, new_string, replace_all: replace_all === true, expected_version, beforeRead }, signal, usage),
          );
        } finally {
          await location.close();
        }
      } catch (err) {
        if (systemErrorCode(err) === 'ENOENT') {
          return errorResult(`Path ${shown} does not exist. Edit changes existing files; use Write to create one.`);
        }
        return writeConflictResult(err, shown) ?? fileErrorResult(err, file_path);
      }
    },
  });
}

interface EditRequest {
  file_path: string;
  old_string: string;
  new_string: string;
  replace_all: boolean;
  expected_version: string | undefined;
  beforeRead: (stats: BigIntStats) => void;
}

// An outside writer (another replica, a command, an editor) that keeps changing the file wins after this many tries.
const MAX_ATTEMPTS = 3;

/** Thrown before the rename when the file is no longer the one that was read. */
class ChangedSinceRead extends Error {}

/**
 * Reads, replaces and writes back, under the file's lock. Other Edits and Writes through any
 * toolport process wait for the lock; anything else that changed the file between the read and
 * the rename is caught by comparing its identity, size and times just before the rename, and the
 * edit is then applied again to the new content, or refused if it no longer applies.
 */
async function editLocked(
  location: Location,
  lock: HeldLock,
  request: EditRequest,
  signal: AbortSignal,
  usage: WorkspaceUsage | undefined,
): Promise<ToolResult> {
  const shown = quotePath(request.file_path);
  for (let attempt = 1; ; attempt += 1) {
    const loaded = await loadRegularFile(location, request.file_path, signal, request.beforeRead);
    if (loaded.kind === 'directory') return errorResult(`Path ${shown} is a directory, not a file.`);
    if (loaded.kind === 'special') return errorResult(`Path ${shown} is not a regular file (it is a FIFO, socket or device).`);
    if (loaded.kind === 'too-large') {
      return errorResult(`Path ${shown} is ${formatBytes(loaded.size)}, over the ${MAX_FILE_BYTES / (1024 * 1024)} MiB Edit accepts.`);
    }
    if (looksBinary(loaded.data)) return errorResult(`Path ${shown} is a binary file, not UTF-8 text; Edit only changes text files.`);
    if (request.expected_version !== undefined && loaded.version !== request.expected_version) {
      return versionMismatch(shown, `is at version ${loaded.version}`);
    }
    const planned = plan(loaded.data, request, shown);
    if ('refusal' in planned) {
      if (attempt === 1) return planned.refusal;
      const [block] = planned.refusal.content;
      const why = block?.type === 'text' ? block.text : '';
      return errorResult(
        `${shown} was changed by someone else while this edit ran, and the edit no longer applies to the new content; nothing was written. ${why}`,
      );
    }
    const read = loaded.stats;
    // The old content's blocks are freed only when no other name (a hard link) keeps them.
    const before = Number(read.nlink) === 1 ? Number(read.blocks) * 512 : 0;
    const reservation = await usage?.reserve(Buffer.byteLength(planned.output) - before, signal);
    if (typeof reservation === 'string') return quotaRefusal(shown, reservation);
    try {
      const written = await writeFileAtomic(location.parent, location.name, planned.output, {
        mode: loaded.mode,
        signal,
        lockKey: lock.key,
        beforeRename: async () => {
          lock.assertHeld();
          await assertUnchanged(location.parent, location.name, read, () => new ChangedSinceRead());
        },
      });
      reservation?.done(Number(written.blocks) * 512 - before);
    } catch (err) {
      reservation?.cancel();
      if (!(err instanceof ChangedSinceRead)) throw err;
      if (request.expected_version !== undefined) return versionMismatch(shown, 'was changed by someone else while this edit ran');
      if (attempt >= MAX_ATTEMPTS) {
        return errorResult(`${shown} kept being changed by someone else while this edit ran (${MAX_ATTEMPTS} tries); nothing was written. Try again.`);
      }
      continue;
    }
    const what = planned.count === 1 ? '1 occurrence' : `all ${planned.count} occurrences`;
    const region = planned.count === 1 ? 'The edited region' : 'The first edited region';
    return versionNote(textResult(`Replaced ${what} in ${shown}. ${region} now reads:\n${planned.snippet}`), contentVersion(planned.output));
  }
}

type Plan = { output: string; count: number; snippet: string } | { refusal: ToolResult };

/** The edited content, or why the edit does not apply; the result's size is checked before it is built. */
function plan(data: Buffer, { old_string, new_string, replace_all }: EditRequest, shown: string): Plan {
  let text = data.toString('utf8');
  const bom = text.startsWith(BOM);
  if (bom) text = text.slice(1);
  const crlf = usesCrlf(text);
  const oldText = crlf ? toCrlf(old_string) : old_string;
  const newText = crlf ? toCrlf(new_string) : new_string;

  const first = text.indexOf(oldText);
  if (first === -1) {
    return {
      refusal: errorResult(
        `old_string was not found in ${shown}. It must match the file exactly, including whitespace and indentation; Read the file and copy the text to replace.`,
      ),
    };
  }
  const count = countOccurrences(text, oldText);
  if (count > 1 && !replace_all) {
    return {
      refusal: errorResult(
        `old_string occurs ${count} times in ${shown}. Add surrounding lines to old_string so that it matches exactly once, or set replace_all to true to replace all ${count}.`,
      ),
    };
  }
  // Refused before anything is built: replace_all can multiply a file far past what memory holds.
  const size = data.length + count * (Buffer.byteLength(newText) - Buffer.byteLength(oldText));
  if (size > MAX_FILE_BYTES) {
    return {
      refusal: errorResult(
        `The edit would make ${shown} ${formatBytes(size)}, over the ${MAX_FILE_BYTES / (1024 * 1024)} MiB Edit writes; nothing was written. Replace fewer occurrences at a time, or write the file with Write.`,
      ),
    };
  }
  // A replacer function, not a string: `$&` and friends in new_string must stay literal.
  const edited = count > 1 ? text.replaceAll(oldText, () => newText) : text.slice(0, first) + newText + text.slice(first + oldText.length);
  return { output: (bom ? BOM : '') + edited, count, snippet: snippet(edited, first, newText) };
}

/** A file uses CRLF when most of its line breaks are CRLF. */
function usesCrlf(text: string): boolean {
  const breaks = countOccurrences(text, '\n');
  const crlf = countOccurrences(text, '\r\n');
  return crlf > 0 && crlf * 2 >= breaks;
}

function toCrlf(text: string): string {
  return text.replace(/\r?\n/g, '\r\n');
}

/** Occurrences of `needle` that start before `end` (default: anywhere), without overlaps. */
function countOccurrences(text: string, needle: string, end = Infinity): number {
  let count = 0;
  for (let at = text.indexOf(needle); at !== -1 && at < end; at = text.indexOf(needle, at + needle.length)) count += 1;
  return count;
}

/**
 * The lines around the replacement that starts at `start`, numbered like Read shows them. Only the
 * lines shown are cut out of the text; the file is never split whole.
 */
function snippet(text: string, start: number, replacement: string): string {
  const total = countOccurrences(text, '\n') + (text === '' || text.endsWith('\n') ? 0 : 1);
  if (total === 0) return '(the file is now empty)';
  const firstLine = countOccurrences(text, '\n', start) + 1;
  const lastLine = firstLine + countOccurrences(replacement, '\n') - (replacement.endsWith('\n') ? 1 : 0);
  const from = Math.max(1, firstLine - CONTEXT_LINES);
  const to = Math.min(total, Math.max(firstLine, lastLine) + CONTEXT_LINES);
  // Back from the replacement to the start of line `from`.
  let pos = text.lastIndexOf('\n', start - 1) + 1;
  for (let n = firstLine; n > from; n -= 1) pos = text.lastIndexOf('\n', pos - 2) + 1;
  const shown: string[] = [];
  for (let n = from; n <= Math.min(to, from + MAX_SNIPPET_LINES - 1); n += 1) {
    const end = text.indexOf('\n', pos);
    const line = end === -1 ? text.slice(pos) : text.slice(pos, end);
    shown.push(numberLine(n, line.endsWith('\r') ? line.slice(0, -1) : line));
    pos = end + 1;
  }
  if (to >= from + MAX_SNIPPET_LINES) shown.push(`       ... (${to - from + 1 - MAX_SNIPPET_LINES} more lines)`);
  return shown.join('\n');
}
