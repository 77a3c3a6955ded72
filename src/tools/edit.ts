import { Type } from 'typebox';
import { defineTool } from '../core/define-tool.js';
import { errorResult, textResult } from '../core/result.js';
import type { ToolDef } from '../core/types.js';
import { writeFileAtomic } from './atomic-write.js';
import { fileErrorResult, formatBytes, quotePath, systemErrorCode } from './file-errors.js';
import { looksBinary } from './file-kind.js';
import { numberLine, splitLines } from './numbered-lines.js';
import { loadRegularFile, MAX_FILE_BYTES, type LoadedFile } from './regular-file.js';
import type { Workspace } from './workspace.js';

const BOM = '\uFEFF';
const CONTEXT_LINES = 3;
const MAX_SNIPPET_LINES = 40;

/** Edit: replaces exact text in an existing file inside the workspace, atomically. */
export function createEditTool(ws: Workspace): ToolDef {
  return defineTool({
    name: 'Edit',
    description: [
      'Replaces text in an existing file of the workspace: old_string is found literally (no regular expressions, no special characters) and replaced by new_string.',
      'old_string must match the file exactly, including whitespace and indentation; Read the file first and copy the text without the line-number prefix.',
      'By default old_string must occur exactly once: if it occurs more often the edit is refused and the message says how often, so add surrounding lines to make it unique, or set replace_all to true to replace every occurrence (for example to rename a variable).',
      'The file keeps its line endings (old_string and new_string written with \\n are matched and written as \\r\\n in a file that uses \\r\\n), its byte-order mark and its permissions; the write is atomic.',
      'The result gives the number of replacements and the edited region with line numbers. Create new files with Write. Only UTF-8 text files up to 10 MiB can be edited.',
      'file_path may be absolute or relative to the workspace root; paths outside the workspace, also through symbolic links, are refused.',
    ].join(' '),
    inputSchema: Type.Object(
      {
        file_path: Type.String({ description: 'The file to change: absolute, or relative to the workspace root.' }),
        old_string: Type.String({ description: 'The exact text to replace.' }),
        new_string: Type.String({ description: 'The text to put in its place (must differ from old_string).' }),
        replace_all: Type.Optional(Type.Boolean({ description: 'Replace every occurrence of old_string (default false).' })),
      },
      { additionalProperties: false },
    ),
    annotations: { title: 'Edit file', readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
    async execute({ file_path, old_string, new_string, replace_all }, { signal }) {
      const shown = quotePath(file_path);
      if (old_string === '') {
        return errorResult('old_string is empty. Give the exact text to replace; to create a file or replace all of it, use Write.');
      }
      if (old_string === new_string) return errorResult('old_string and new_string are identical, so the edit would change nothing.');

      let absolute: string;
      let loaded: LoadedFile;
      try {
        ({ absolute } = await ws.resolve(file_path));
        loaded = await loadRegularFile(absolute, signal);
      } catch (err) {
        if (systemErrorCode(err) === 'ENOENT') {
          return errorResult(`Path ${shown} does not exist. Edit changes existing files; use Write to create one.`);
        }
        return fileErrorResult(err, file_path);
      }
      if (loaded.kind === 'directory') return errorResult(`Path ${shown} is a directory, not a file.`);
      if (loaded.kind === 'special') return errorResult(`Path ${shown} is not a regular file (it is a FIFO, socket or device).`);
      if (loaded.kind === 'too-large') {
        return errorResult(`Path ${shown} is ${formatBytes(loaded.size)}, over the ${MAX_FILE_BYTES / (1024 * 1024)} MiB Edit accepts.`);
      }
      if (looksBinary(loaded.data)) return errorResult(`Path ${shown} is a binary file, not UTF-8 text; Edit only changes text files.`);

      let text = loaded.data.toString('utf8');
      const bom = text.startsWith(BOM);
      if (bom) text = text.slice(1);
      const crlf = usesCrlf(text);
      const oldText = crlf ? toCrlf(old_string) : old_string;
      const newText = crlf ? toCrlf(new_string) : new_string;

      const first = text.indexOf(oldText);
      if (first === -1) {
        return errorResult(
          `old_string was not found in ${shown}. It must match the file exactly, including whitespace and indentation; Read the file and copy the text to replace.`,
        );
      }
      const count = countOccurrences(text, oldText);
      if (count > 1 && replace_all !== true) {
        return errorResult(
          `old_string occurs ${count} times in ${shown}. Add surrounding lines to old_string so that it matches exactly once, or set replace_all to true to replace all ${count}.`,
        );
      }
      // split/join, not String.replace: `$&` and friends in new_string must stay literal.
      const edited = count > 1 ? text.split(oldText).join(newText) : text.slice(0, first) + newText + text.slice(first + oldText.length);
      try {
        await writeFileAtomic(absolute, (bom ? BOM : '') + edited, { mode: loaded.mode, signal });
      } catch (err) {
        return fileErrorResult(err, file_path);
      }
      const what = count === 1 ? '1 occurrence' : `all ${count} occurrences`;
      const region = count === 1 ? 'The edited region' : 'The first edited region';
      return textResult(`Replaced ${what} in ${shown}. ${region} now reads:\n${snippet(edited, first, newText)}`);
    },
  });
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

function countOccurrences(text: string, needle: string): number {
  let count = 0;
  for (let at = text.indexOf(needle); at !== -1; at = text.indexOf(needle, at + needle.length)) count += 1;
  return count;
}

/** The lines around the replacement that starts at `start`, numbered like Read shows them. */
function snippet(text: string, start: number, replacement: string): string {
  const lines = splitLines(text);
  const firstLine = countOccurrences(text.slice(0, start), '\n') + 1;
  const lastLine = firstLine + countOccurrences(replacement, '\n') - (replacement.endsWith('\n') ? 1 : 0);
  const from = Math.max(1, firstLine - CONTEXT_LINES);
  const to = Math.min(lines.length, Math.max(firstLine, lastLine) + CONTEXT_LINES);
  if (lines.length === 0) return '(the file is now empty)';
  const shown: string[] = [];
  for (let n = from; n <= Math.min(to, from + MAX_SNIPPET_LINES - 1); n += 1) shown.push(numberLine(n, lines[n - 1]!));
  if (to >= from + MAX_SNIPPET_LINES) shown.push(`       ... (${to - from + 1 - MAX_SNIPPET_LINES} more lines)`);
  return shown.join('\n');
}
