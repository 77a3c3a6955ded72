import { readdir, realpath, type Dirent } from 'node:fs';
import { lstat, stat } from 'node:fs/promises';
import path from 'node:path';
import { glob, type FileSystemAdapter } from 'tinyglobby';
import picomatch from 'picomatch';
import { Type } from 'typebox';
import { defineTool } from '../core/define-tool.js';
import { errorResult, textResult } from '../core/result.js';
import type { ToolDef } from '../core/types.js';
import { fileErrorResult, quotePath } from './file-errors.js';
import { PATTERN_LIMITS, patternProblem } from './glob-limits.js';
import type { Workspace } from './workspace.js';

/** Most paths one call returns (the newest); a note says how many matched in all. */
export const MAX_GLOB_RESULTS = 100;
/** Longest pattern accepted: compiling one to a regular expression stays in the tens of milliseconds. */
export const MAX_PATTERN_LENGTH = 1024;
const STAT_BATCH = 64;

// A `..` or `.git` / `node_modules` as a whole path segment, also inside braces and extglobs.
const segment = (name: string): RegExp => new RegExp(`(^|[/{,(|])${name.replace(/\./g, '\\.')}($|[/},)|])`);
const PARENT = segment('..');
const SKIPPED = ['.git', 'node_modules'] as const;

/** Glob: files whose path matches a glob pattern, newest first. */
export function createGlobTool(ws: Workspace): ToolDef {
  return defineTool({
    name: 'Glob',
    description: [
      'Finds files by name with a glob pattern, such as "**/*.ts" or "src/**/*.{js,jsx}", matched against paths relative to path (default the workspace root). Use it to locate files; use Grep to search their content, LS to list one directory.',
      `Returns the matching files, one path per line, relative to the workspace root, the most recently modified first; at most ${MAX_GLOB_RESULTS}, with a note saying how many matched when there are more. "No files found" when nothing matches.`,
      'Only files are returned, not directories. Hidden files are included; .git and node_modules directories are skipped unless the pattern names them. Symbolic links are neither followed nor listed.',
      'The pattern must be relative and may not use "..": to search elsewhere in the workspace, pass that directory as path (absolute or relative to the workspace root). Paths outside the workspace are refused.',
      PATTERN_LIMITS,
    ].join(' '),
    inputSchema: Type.Object(
      {
        // Bounded: picomatch turns a pattern into a regular expression, and huge or deeply nested
        // ones take seconds to compile or overflow V8's regexp compiler.
        pattern: Type.String({ maxLength: MAX_PATTERN_LENGTH, description: 'The glob pattern, relative to path, e.g. "**/*.ts".' }),
        path: Type.Optional(Type.String({ description: 'The directory to search in: absolute, or relative to the workspace root. Defaults to the root.' })),
      },
      { additionalProperties: false },
    ),
    annotations: { title: 'Find files', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    async execute({ pattern, path: given = '.' }, { signal }) {
      if (pattern === '') return errorResult('The pattern is empty; give a glob pattern such as "**/*.ts".');
      // tinyglobby and picomatch take "\." for "."; "\.\./x" must be seen as the ".." it becomes.
      const unescaped = pattern.replace(/\\(.)/g, '$1');
      if (unescaped.startsWith('/')) {
        return errorResult(`Pattern ${quotePath(pattern)} is absolute. Give a pattern relative to path, and pass the directory to search as path.`);
      }
      if (PARENT.test(unescaped)) {
        return errorResult(`Pattern ${quotePath(pattern)} uses "..". Glob searches below path only; pass the directory to search as path instead.`);
      }
      const problem = patternProblem(pattern);
      if (problem !== undefined) return errorResult(`Pattern ${quotePath(pattern)} ${problem}`);
      let dir: string;
      try {
        ({ absolute: dir } = await ws.resolve(given));
        if (!(await stat(dir)).isDirectory()) return errorResult(`Path ${quotePath(given)} is a file, not a directory; Glob searches directories.`);
      } catch (err) {
        return fileErrorResult(err, given);
      }

      const ignore = SKIPPED.filter((name) => !segment(name).test(pattern)).map((name) => `**/${name}/**`);
      // tinyglobby reads a leading ".." as "go up" even in a name like "..env"; escape its first dot.
      const normalised = path.posix.normalize(pattern);
      const query = normalised.startsWith('..') ? `\\${normalised}` : pattern;
      try {
        // Compile here, where a failure is the caller's error; inside the crawler it would escape as an uncaught exception.
        picomatch.makeRe(query, { dot: true });
      } catch (err) {
        return errorResult(`Pattern ${quotePath(pattern)} is not a valid glob: ${(err as Error).message}`);
      }
      const found = await glob(query, {
        cwd: dir,
        dot: true,
        onlyFiles: true,
        expandDirectories: false,
        followSymbolicLinks: false,
        ignore,
        signal,
        debug: false,
        fs: { readdir: confinedReaddir(ws) },
      });
      signal.throwIfAborted();
      const files: { relative: string; mtimeMs: number }[] = [];
      // Stat in batches: one at a time is slow for big trees, all at once can exhaust descriptors.
      for (let start = 0; start < found.length; start += STAT_BATCH) {
        signal.throwIfAborted();
        const batch = found.slice(start, start + STAT_BATCH).map(async (match) => {
          const absolute = path.resolve(dir, match);
          // Every directory read was canonical and inside (see confinedReaddir); checked again, as a second fence.
          if (!ws.contains(absolute)) return;
          const stats = await lstat(absolute).catch(() => undefined);
          if (stats?.isFile()) files.push({ relative: path.relative(ws.root, absolute), mtimeMs: stats.mtimeMs });
        });
        await Promise.all(batch);
      }
      if (files.length === 0) return textResult('No files found');
      files.sort((a, b) => b.mtimeMs - a.mtimeMs || (a.relative < b.relative ? -1 : a.relative > b.relative ? 1 : 0));
      let text = files
        .slice(0, MAX_GLOB_RESULTS)
        .map((f) => f.relative)
        .join('\n');
      if (files.length > MAX_GLOB_RESULTS) {
        text += `\n\n(Showing the ${MAX_GLOB_RESULTS} most recently modified of ${files.length} matching files. Use a more specific pattern or path to narrow the search.)`;
      }
      return textResult(text);
    },
  });
}

type ReaddirCallback = (err: NodeJS.ErrnoException | null, entries: Dirent[]) => void;

/**
 * A `readdir` for tinyglobby that reads only canonical directories inside the workspace. With
 * `followSymbolicLinks: false` the crawler skips symlinks it meets, but it starts at the pattern's
 * static prefix (`link/*.ts` starts in `link`), which the kernel follows; a directory reached
 * through a symlink therefore reads as empty, so symlinks are never followed, wherever they are.
 */
function confinedReaddir(ws: Workspace): NonNullable<FileSystemAdapter['readdir']> {
  const guarded = (dir: string, options: { withFileTypes: true }, callback: ReaddirCallback): void => {
    realpath.native(dir, (err, real) => {
      if (err) return callback(err, []);
      if (real !== path.resolve(dir) || !ws.contains(real)) return callback(null, []);
      readdir(dir, options, callback);
    });
  };
  return guarded as unknown as NonNullable<FileSystemAdapter['readdir']>;
}
