import { Type } from 'typebox';
import { defineTool } from '../core/define-tool.js';
import { errorResult, textResult } from '../core/result.js';
import type { ToolDef, ToolResult } from '../core/types.js';
import { fileErrorResult } from './files/errors.js';
import { checkLinkCount, checkPathRules } from './files/rules.js';
import { formatBytes, quotePath } from '../os/fs/describe.js';
import { imageMediaType, looksBinary } from './files/kind.js';
import { countLines, linesFrom, numberLine } from './numbered-lines.js';
import { loadRegularFile, MAX_FILE_BYTES, type LoadedFile } from '../os/fs/regular-file.js';
import { versionNote } from './files/versions.js';
import type { Workspace } from '../os/fs/workspace.js';

/** Lines shown when the call gives no `limit`. */
export const DEFAULT_READ_LIMIT = 2000;
/** Output stops after the line that passes this many characters, with the usual "read on" footer. */
export const MAX_READ_CHARS = 100_000;

const BOM = '\uFEFF';

/** Read: a text file with line numbers, or an image, from inside the workspace. */
export function createReadTool(ws: Workspace): ToolDef {
  return defineTool({
    name: 'Read',
    description: [
      'Reads a file from the workspace. Text comes back like `cat -n`: each line prefixed with its 1-based line number and a tab (the prefix is not part of the file, so leave it out when you quote the text to Edit).',
      `By default it returns up to ${DEFAULT_READ_LIMIT} lines from the start; for longer files pass offset (the line to start at) and limit (how many lines), and follow the footer, which says which offset reads on. Lines longer than 2000 characters are cut, with a marker saying how much was left out, and one call returns at most about ${MAX_READ_CHARS / 1000}k characters.`,
      'PNG, JPEG, GIF and WebP images (recognised by their content, not their name) come back as an image you can see.',
      `Other binary files, directories (use LS for those) and files over ${MAX_FILE_BYTES / (1024 * 1024)} MiB are refused with a message saying so; an empty file is reported as empty.`,
      'file_path may be absolute or relative to the workspace root; paths outside the workspace, also through symbolic links, are refused.',
      "Every successful result ends with a text block giving the file's version, `(version <16 hex digits>)`, a hash of its whole content: pass it as expected_version to Edit or Write to have them refuse the change if anyone changed the file since.",
    ].join(' '),
    inputSchema: Type.Object(
      {
        file_path: Type.String({ description: 'The file to read: absolute, or relative to the workspace root.' }),
        offset: Type.Optional(Type.Integer({ minimum: 1, description: 'The line number to start reading at (1 is the first line).' })),
        limit: Type.Optional(Type.Integer({ minimum: 1, description: `How many lines to read (default ${DEFAULT_READ_LIMIT}).` })),
      },
      { additionalProperties: false },
    ),
    annotations: { title: 'Read file', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    rules: { specifier: 'path', access: 'read' },
    async execute({ file_path, offset, limit }, context) {
      const { signal } = context;
      const shown = quotePath(file_path);
      let loaded: LoadedFile;
      try {
        const location = await ws.locate(file_path);
        try {
          checkPathRules(context, 'Read', 'read', location, file_path);
          loaded = await loadRegularFile(location, file_path, signal, (stats) => checkLinkCount(context, 'Read', file_path, stats.nlink));
        } finally {
          await location.close();
        }
      } catch (err) {
        return fileErrorResult(err, file_path);
      }
      switch (loaded.kind) {
        case 'directory':
          return errorResult(`Path ${shown} is a directory, not a file; use LS to list its entries.`);
        case 'special':
          return errorResult(`Path ${shown} is not a regular file (it is a FIFO, socket or device); Read only reads regular files.`);
        case 'too-large':
          return errorResult(
            `Path ${shown} is ${formatBytes(loaded.size)}, over the ${MAX_FILE_BYTES / (1024 * 1024)} MiB Read accepts; search it with Grep instead.`,
          );
      }
      const { data, version } = loaded;
      if (data.length === 0) return versionNote(textResult(`File ${shown} is empty (0 bytes).`), version);
      const media_type = imageMediaType(data);
      if (media_type) {
        const image: ToolResult = {
          content: [
            { type: 'image', source: { type: 'base64', media_type, data: data.toString('base64') } },
            { type: 'text', text: `Image ${shown} (${media_type}, ${formatBytes(data.length)}).` },
          ],
          isError: false,
        };
        return versionNote(image, version);
      }
      if (looksBinary(data)) {
        return errorResult(
          `Path ${shown} is a binary file (${formatBytes(data.length)}), not UTF-8 text; Read shows only text and PNG, JPEG, GIF or WebP images.`,
        );
      }
      let text = data.toString('utf8');
      if (text.startsWith(BOM)) text = text.slice(1);
      const result = numbered(shown, text, offset ?? 1, limit ?? DEFAULT_READ_LIMIT);
      return result.isError ? result : versionNote(result, version);
    },
  });
}

/** The lines asked for, numbered; only those lines are cut out of the text, never the whole file. */
function numbered(shown: string, text: string, offset: number, limit: number): ToolResult & { isError: boolean } {
  const total = countLines(text);
  if (total === 0) return textResult(`File ${shown} has no lines.`);
  if (offset > total) {
    return errorResult(`Offset ${offset} is past the end of ${shown}, which has ${total} line${total === 1 ? '' : 's'}.`);
  }
  const out: string[] = [];
  let chars = 0;
  let last = offset - 1;
  const end = Math.min(total, offset - 1 + limit);
  for (const raw of linesFrom(text, offset - 1)) {
    if (last >= end || chars >= MAX_READ_CHARS) break;
    const line = numberLine(last + 1, raw);
    out.push(line);
    chars += line.length + 1;
    last += 1;
  }
  let result = out.join('\n');
  if (last < total) {
    result += `\n\n(File has ${total} lines; showing lines ${offset}-${last}. Call Read with offset=${last + 1} to read on.)`;
  }
  return textResult(result);
}
