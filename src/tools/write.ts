import { lstat, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { Type } from 'typebox';
import { defineTool } from '../core/define-tool.js';
import { errorResult, textResult } from '../core/result.js';
import type { ToolDef } from '../core/types.js';
import { NEW_FILE_MODE, writeFileAtomic } from './atomic-write.js';
import { fileErrorResult, quotePath, systemErrorCode } from './file-errors.js';
import { splitLines } from './numbered-lines.js';
import type { Workspace } from './workspace.js';

/** Write: creates or replaces a whole file inside the workspace, atomically. */
export function createWriteTool(ws: Workspace): ToolDef {
  return defineTool({
    name: 'Write',
    description: [
      'Writes a file in the workspace: creates it, or replaces all of its content if it exists. Missing parent directories are created.',
      'To change part of an existing file prefer Edit, which sends only the change; use Write for new files or complete rewrites.',
      'The write is atomic (readers see the old content or the new, never a half-written file) and an existing file keeps its permissions; new files get mode 644.',
      'The content is written exactly as given, as UTF-8. The result says whether the file was created or overwritten, with its size in bytes and lines.',
      'file_path may be absolute or relative to the workspace root; paths outside the workspace, also through symbolic links, are refused, and so is a path that names a directory.',
    ].join(' '),
    inputSchema: Type.Object(
      {
        file_path: Type.String({ description: 'The file to write: absolute, or relative to the workspace root.' }),
        content: Type.String({ description: 'The complete new content of the file.' }),
      },
      { additionalProperties: false },
    ),
    annotations: { title: 'Write file', readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    async execute({ file_path, content }, { signal }) {
      const shown = quotePath(file_path);
      let existed: boolean;
      try {
        const { absolute } = await ws.resolve(file_path);
        const existing = await lstat(absolute).catch((err: unknown) => {
          const code = systemErrorCode(err);
          if (code === 'ENOENT' || code === 'ENOTDIR') return undefined;
          throw err;
        });
        if (existing?.isDirectory()) return errorResult(`Path ${shown} is a directory; Write writes files. Name a file inside it instead.`);
        if (existing && !existing.isFile()) {
          return errorResult(`Path ${shown} is not a regular file (it is a FIFO, socket or device); Write only replaces regular files.`);
        }
        existed = existing !== undefined;
        if (!existed) {
          if (!(await makeParents(path.dirname(absolute)))) {
            return errorResult(`Cannot create ${shown}: a part of its directory is a file, not a directory.`);
          }
        }
        await writeFileAtomic(absolute, content, { mode: existing ? existing.mode & 0o7777 : NEW_FILE_MODE, signal });
      } catch (err) {
        return fileErrorResult(err, file_path);
      }
      const bytes = Buffer.byteLength(content);
      const lines = splitLines(content).length;
      const size = `${bytes} byte${bytes === 1 ? '' : 's'}, ${lines} line${lines === 1 ? '' : 's'}`;
      return textResult(`${existed ? 'Overwrote' : 'Created'} ${shown} (${size}).`);
    },
  });
}

// The directory was checked by `Workspace.resolve` (its existing part is canonical and inside), so
// creating the missing rest stays inside. False when a part of the way is a file.
async function makeParents(dir: string): Promise<boolean> {
  try {
    await mkdir(dir, { recursive: true });
    return true;
  } catch (err) {
    const code = systemErrorCode(err);
    if (code === 'EEXIST' || code === 'ENOTDIR') return false;
    throw err;
  }
}
