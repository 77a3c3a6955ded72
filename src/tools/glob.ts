import type { Dirent } from 'node:fs';
import { lstat, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { glob, type FileSystemAdapter } from 'tinyglobby';
import picomatch from 'picomatch';
import { Type } from 'typebox';
import { defineTool } from '../core/define-tool.js';
import { errorResult, textResult } from '../core/result.js';
import type { ToolDef, ToolResult } from '../core/types.js';
import { fileErrorResult, quotePath } from './file-errors.js';
import { PATTERN_LIMITS, patternProblem } from './glob-limits.js';
import { listHeld, openBelow } from './held-dir.js';
import { heldPath, systemError, type Location, type Workspace } from './workspace.js';

/** Most paths one call returns (the newest); a note says how many matched in all. */
export const MAX_GLOB_RESULTS = 100;
/** Longest pattern accepted: compiling one to a regular expression stays in the tens of milliseconds. */
export const MAX_PATTERN_LENGTH = 1024;
const STAT_BATCH = 64;

// A `..` or `.git` / `node_modules` as a whole path segment, also inside braces and extglobs.
const segment = (name: string): RegExp => new RegExp(`(^|[/{,(|])${name.replace(/\./g, '\\.')}($|[/},)|])`);
const PARENT = segment('..');
const SKIPPED = ['.git', 'node_modules'] as const;

export interface GlobToolOptions {
  /** Most directory entries one search reads (default MAX_CRAWLED_ENTRIES). */
  maxCrawledEntries?: number;
}

/** Glob: files whose path matches a glob pattern, newest first. */
export function createGlobTool(ws: Workspace, options: GlobToolOptions = {}): ToolDef {
  const maxEntries = options.maxCrawledEntries ?? MAX_CRAWLED_ENTRIES;
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
      let location: Location;
      try {
        location = await ws.locate(given);
      } catch (err) {
        return fileErrorResult(err, given);
      }
      try {
        if (location.kind === 'missing') return fileErrorResult(systemError('ENOENT'), given);
        if (location.dir === undefined) return errorResult(`Path ${quotePath(given)} is a file, not a directory; Glob searches directories.`);
        return await search(pattern, location.dir, location.relative, maxEntries, signal, (err) => fileErrorResult(err, given));
      } finally {
        await location.close();
      }
    },
  });
}

/** The files below the held directory `start` that match `pattern`, newest first, as a result. */
async function search(
  pattern: string,
  start: FileHandle,
  relative: string,
  maxEntries: number,
  signal: AbortSignal,
  failed: (err: unknown) => ToolResult,
): Promise<ToolResult> {
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
  const budget: CrawlBudget = { entries: 0, max: maxEntries, exhausted: false };
  // The crawler sees paths below a directory that exists only as a name: every one is mapped to
  // parts below `start` and opened from there (see heldReaddir), so none is ever looked up whole.
  const found = await glob(query, {
    cwd: CRAWL_ROOT,
    dot: true,
    onlyFiles: true,
    expandDirectories: false,
    followSymbolicLinks: false,
    ignore,
    signal,
    debug: false,
    fs: heldFileSystem(start, budget),
  });
  signal.throwIfAborted();
  let files: { relative: string; mtimeMs: number }[];
  try {
    files = await modificationTimes(start, found, signal);
  } catch (err) {
    return failed(err);
  }
  const stopped = budget.exhausted
    ? `\n\n(The search stopped after reading ${budget.entries} directory entries; files further on were not looked at. Pass a narrower path or pattern.)`
    : '';
  if (files.length === 0) return textResult(`No files found${stopped}`);
  for (const file of files) file.relative = relative === '.' ? file.relative : path.join(relative, file.relative);
  files.sort((a, b) => b.mtimeMs - a.mtimeMs || (a.relative < b.relative ? -1 : a.relative > b.relative ? 1 : 0));
  let text = files
    .slice(0, MAX_GLOB_RESULTS)
    .map((f) => f.relative)
    .join('\n');
  if (files.length > MAX_GLOB_RESULTS) {
    text += `\n\n(Showing the ${MAX_GLOB_RESULTS} most recently modified of ${files.length} matching files. Use a more specific pattern or path to narrow the search.)`;
  }
  return textResult(text + stopped);
}

/**
 * The modification times of the regular files among `found` (paths below `start`), taken with
 * lstat through the held directory of each, so a name swapped for a link is not followed.
 */
async function modificationTimes(start: FileHandle, found: readonly string[], signal: AbortSignal): Promise<{ relative: string; mtimeMs: number }[]> {
  const byDirectory = new Map<string, string[]>();
  for (const match of found) {
    const dir = path.posix.dirname(match);
    const names = byDirectory.get(dir);
    if (names) names.push(path.posix.basename(match));
    else byDirectory.set(dir, [path.posix.basename(match)]);
  }
  const files: { relative: string; mtimeMs: number }[] = [];
  for (const [dir, names] of byDirectory) {
    signal.throwIfAborted();
    const held = await openBelow(start, dir.split('/'));
    if (held === undefined) continue;
    try {
      // In batches: one at a time is slow for big directories, all at once can exhaust descriptors.
      for (let first = 0; first < names.length; first += STAT_BATCH) {
        await Promise.all(
          names.slice(first, first + STAT_BATCH).map(async (name) => {
            const stats = await lstat(heldPath(held, name)).catch(() => undefined);
            if (stats?.isFile()) files.push({ relative: dir === '.' ? name : `${dir}/${name}`, mtimeMs: stats.mtimeMs });
          }),
        );
      }
    } finally {
      if (held !== start) await held.close();
    }
  }
  return files;
}

/**
 * Most directory entries one search reads: the crawler keeps every match in memory, so a tree of
 * millions of files would cost hundreds of MiB and seconds of the event loop.
 */
export const MAX_CRAWLED_ENTRIES = 200_000;

interface CrawlBudget {
  entries: number;
  max: number;
  exhausted: boolean;
}

// The crawler's idea of where it starts; a label only, never opened (see heldFileSystem).
const CRAWL_ROOT = '/held';

type ReaddirCallback = (err: NodeJS.ErrnoException | null, entries: Dirent[]) => void;

/**
 * The file system tinyglobby crawls: every directory it reads is opened from the held start
 * directory one component at a time, without following symlinks, and read through its descriptor.
 * With `followSymbolicLinks: false` the crawler skips symlinks it meets, but it starts at the
 * pattern's static prefix (`link/*.ts` starts in `link`); a directory reached through a symlink
 * reads as empty, so symlinks are never followed, wherever they are, and a directory swapped for
 * one while the crawl runs cannot lead it out. The server's own files are left out. The crawler
 * needs realpath and stat only to follow symlinks; they refuse, should it ever ask.
 */
function heldFileSystem(start: FileHandle, budget: CrawlBudget): FileSystemAdapter {
  const readdir = (dir: string, _options: { withFileTypes: true }, callback: ReaddirCallback): void => {
    const below = path.posix.relative(CRAWL_ROOT, dir);
    if (below === '..' || below.startsWith('../') || path.posix.isAbsolute(below) || budget.entries >= budget.max) {
      if (budget.entries >= budget.max) budget.exhausted = true;
      process.nextTick(callback, null, []);
      return;
    }
    read(start, below === '' ? [] : below.split('/')).then(
      (entries) => {
        const room = Math.max(0, budget.max - budget.entries);
        if (entries.length > room) {
          entries = entries.slice(0, room);
          budget.exhausted = true;
        }
        budget.entries += entries.length;
        process.nextTick(callback, null, entries);
      },
      (err: unknown) => process.nextTick(callback, err as NodeJS.ErrnoException, []),
    );
  };
  const refuse = (_path: string, callback: (err: NodeJS.ErrnoException) => void): void => {
    process.nextTick(callback, systemError('EPERM', 'realpath'));
  };
  return { readdir, realpath: refuse, stat: refuse } as unknown as FileSystemAdapter;
}

/** The entries of the directory `parts` below `start`, or none when the way there is not all directories. */
async function read(start: FileHandle, parts: readonly string[]): Promise<Dirent[]> {
  const dir = await openBelow(start, parts);
  if (dir === undefined) return [];
  try {
    return await listHeld(dir);
  } finally {
    if (dir !== start) await dir.close();
  }
}
