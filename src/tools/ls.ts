import type { Dirent } from 'node:fs';
import { readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import picomatch from 'picomatch';
import { Type } from 'typebox';
import { defineTool } from '../core/define-tool.js';
import { errorResult, textResult } from '../core/result.js';
import type { ToolDef } from '../core/types.js';
import { fileErrorResult, quotePath } from './file-errors.js';
import { MAX_PATTERN_LENGTH } from './glob.js';
import { PATTERN_LIMITS, patternProblem } from './glob-limits.js';
import type { Workspace } from './workspace.js';

/** Most entries one listing shows; the rest are counted in a note. */
export const MAX_LS_ENTRIES = 1000;

/** LS: the entries of one directory inside the workspace. */
export function createLsTool(ws: Workspace): ToolDef {
  return defineTool({
    name: 'LS',
    description: [
      'Lists the entries of one directory in the workspace (not recursive), sorted by name, one per line.',
      'Directories end with "/". A symbolic link is shown as "name -> target", with the target relative to the workspace root (and "/" when it is a directory); a link that points outside the workspace or to nothing is shown as "name -> (outside the workspace or broken)" and is not followed.',
      `At most ${MAX_LS_ENTRIES} entries are shown, with a note saying how many were left out. ignore takes glob patterns matched against entry names (for example "*.log", "node_modules"); matching entries are left out.`,
      'To find files by name across directories use Glob instead. path may be absolute or relative to the workspace root ("." is the root); paths outside the workspace are refused.',
      PATTERN_LIMITS,
    ].join(' '),
    inputSchema: Type.Object(
      {
        path: Type.String({ description: 'The directory to list: absolute, or relative to the workspace root ("." for the root).' }),
        // Bounded like Glob's pattern: each one compiles to a regular expression.
        ignore: Type.Optional(
          Type.Array(Type.String({ maxLength: MAX_PATTERN_LENGTH }), { maxItems: 100, description: 'Glob patterns for entry names to leave out.' }),
        ),
      },
      { additionalProperties: false },
    ),
    annotations: { title: 'List directory', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    async execute({ path: given, ignore }, { signal }) {
      for (const pattern of ignore ?? []) {
        const problem = patternProblem(pattern);
        if (problem !== undefined) return errorResult(`Ignore pattern ${quotePath(pattern)} ${problem}`);
      }
      const shown = quotePath(given);
      let dir: string;
      let entries: Dirent[];
      try {
        ({ absolute: dir } = await ws.resolve(given));
        if (!(await stat(dir)).isDirectory()) return errorResult(`Path ${shown} is a file, not a directory; use Read to read it.`);
        entries = await readdir(dir, { withFileTypes: true });
      } catch (err) {
        return fileErrorResult(err, given);
      }
      let ignored: ((name: string) => boolean) | undefined;
      try {
        ignored = ignore && ignore.length > 0 ? picomatch([...ignore], { dot: true }) : undefined;
      } catch (err) {
        return errorResult(`The ignore patterns are not valid globs: ${(err as Error).message}`);
      }
      const kept = entries
        .filter((e) => !ignored || !(ignored(e.name) || (e.isDirectory() && ignored(`${e.name}/`))))
        .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
      const left = entries.length - kept.length;
      const ignoredNote = left > 0 ? ` (${left} ignored)` : '';
      if (kept.length === 0) return textResult(`Directory ${shown} has no entries${ignoredNote}.`);

      const lines: string[] = [];
      for (const entry of kept.slice(0, MAX_LS_ENTRIES)) {
        signal.throwIfAborted();
        lines.push(await describeEntry(ws, dir, entry));
      }
      let text = `Directory ${shown}, ${kept.length} entr${kept.length === 1 ? 'y' : 'ies'}${ignoredNote}:\n${lines.join('\n')}`;
      if (kept.length > MAX_LS_ENTRIES) {
        text += `\n\n(${kept.length - MAX_LS_ENTRIES} more entries not shown; only the first ${MAX_LS_ENTRIES} by name are listed. Use Glob or ignore to narrow down.)`;
      }
      return textResult(text);
    },
  });
}

async function describeEntry(ws: Workspace, dir: string, entry: Dirent): Promise<string> {
  if (entry.isDirectory()) return `${entry.name}/`;
  if (!entry.isSymbolicLink()) return entry.name;
  try {
    // Resolving through the workspace follows the link only as far as the check needs, and
    // refuses targets outside it without saying anything about them.
    const target = await ws.resolve(path.join(dir, entry.name));
    const isDir = (await stat(target.absolute)).isDirectory();
    return `${entry.name} -> ${target.relative}${isDir ? '/' : ''}`;
  } catch {
    return `${entry.name} -> (outside the workspace or broken)`;
  }
}
