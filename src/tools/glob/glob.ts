import { lstat, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { glob } from 'tinyglobby';
import picomatch from 'picomatch';
import { Type } from 'typebox';
import { defineTool } from '../../core/define-tool.js';
import { errorResult, textResult } from '../../core/result.js';
import type { ToolDef, ToolResult } from '../../core/types.js';
import { displayName, QUOTED_NAMES } from '../display-name.js';
import { fileErrorResult } from '../files/errors.js';
import { quotePath } from '../../os/fs/describe.js';
import { PATTERN_LIMITS, patternProblem } from './limits.js';
import { CRAWL_ROOT, HeldCrawl, STAT_BATCH, type CrawlBudget, type Visible } from './crawl.js';
import { checkPathRules } from '../files/rules.js';
import { HeldTree } from '../../os/fs/held-dir.js';
import { heldPath, systemError, type Location, type Workspace } from '../../os/fs/workspace.js';

/** Most paths one call returns (the newest); a note says how many matched in all. */
export const MAX_GLOB_RESULTS = 100;
/** Longest pattern accepted: compiling one to a regular expression stays in the tens of milliseconds. */
export const MAX_PATTERN_LENGTH = 1024;

// A `..` or `.git` / `node_modules` as a whole path segment, also inside braces and extglobs.
const segment = (name: string): RegExp => new RegExp(`(^|[/{,(|])${name.replace(/\./g, '\\.')}($|[/},)|])`);
const PARENT = segment('..');
const SKIPPED = ['.git', 'node_modules'] as const;

export interface GlobToolOptions {
  /** Most directory entries one search reads plus directories it opens (default MAX_CRAWLED_ENTRIES). */
  maxCrawledEntries?: number;
  /** Told after every search how much it did (for tests and measurements). */
  onSearched?: (work: SearchWork) => void;
}

/** Glob: files whose path matches a glob pattern, newest first. */
export function createGlobTool(ws: Workspace, options: GlobToolOptions = {}): ToolDef {
  const limits = { maxEntries: options.maxCrawledEntries ?? MAX_CRAWLED_ENTRIES, onSearched: options.onSearched };
  return defineTool({
    name: 'Glob',
    description: [
      'Finds files by name with a glob pattern, such as "**/*.ts" or "src/**/*.{js,jsx}", matched against paths relative to path (default the workspace root). Use it to locate files; use Grep to search their content, LS to list one directory.',
      `Returns the matching files, one path per line, relative to the workspace root, the most recently modified first; at most ${MAX_GLOB_RESULTS}, with a note saying how many matched when there are more. "No files found" when nothing matches.`,
      'Only files are returned, not directories. Hidden files are included; .git and node_modules directories are skipped unless the pattern names them. Symbolic links are neither followed nor listed.',
      QUOTED_NAMES,
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
    rules: { access: 'read' },
    async execute({ pattern, path: given = '.' }, context) {
      const { signal } = context;
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
        checkPathRules(context, 'Glob', 'read', location, given);
        if (location.kind === 'missing') return fileErrorResult(systemError('ENOENT'), given);
        if (location.dir === undefined) return errorResult(`Path ${quotePath(given)} is a file, not a directory; Glob searches directories.`);
        const rules = context.permissions?.governs('read') === true ? context.permissions : undefined;
        const start = location.relative;
        // What the rules hide is never read, matched or counted; without rules for reading, nothing is looked up.
        const visible = rules && ((below: string, directory: boolean): boolean => rules.visible(start === '.' ? below : `${start}/${below}`, directory));
        return await search(pattern, location.dir, start, { ...limits, visible }, signal, (err) => fileErrorResult(err, given));
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
  options: { maxEntries: number; onSearched: ((work: SearchWork) => void) | undefined; visible: Visible | undefined },
  signal: AbortSignal,
  failed: (err: unknown) => ToolResult,
): Promise<ToolResult> {
  const ignore = SKIPPED.filter((name) => !segment(name).test(pattern)).map((name) => `**/${name}/**`);
  // tinyglobby reads a leading ".." as "go up" even in a name like "..env"; escape its first dot.
  const normalised = path.posix.normalize(pattern);
  const query = normalised.startsWith('..') ? `\\${normalised}` : pattern;
  let matches: (relative: string) => boolean;
  try {
    // Compile here, where a failure is the caller's error; inside the crawler it would escape as an uncaught exception.
    matches = picomatch(query, { dot: true });
  } catch (err) {
    return errorResult(`Pattern ${quotePath(pattern)} is not a valid glob: ${(err as Error).message}`);
  }
  const budget: CrawlBudget = { entries: 0, opens: 0, timeOpens: 0, max: options.maxEntries, exhausted: false, tooLong: false };
  const tree = new HeldTree(start);
  // The modification times the crawl took; the crawler's own matching has the last word.
  const times = new Map<string, number | undefined>();
  let files: { relative: string; mtimeMs: number }[];
  try {
    // The crawler sees paths below a directory that exists only as a name: every one is mapped to
    // parts below `start` and opened from there (see HeldCrawl), so none is ever looked up whole.
    const maxBelow = MAX_PATH_LENGTH - (relative === '.' ? 0 : relative.length + 1);
    const crawl = new HeldCrawl({ tree, budget, maxBelow, matches, times, signal, visible: options.visible });
    let found: string[];
    try {
      found = await Promise.race([
        glob(query, {
          cwd: CRAWL_ROOT,
          dot: true,
          onlyFiles: true,
          expandDirectories: false,
          followSymbolicLinks: false,
          ignore,
          signal,
          debug: false,
          fs: crawl.fs,
        }),
        crawl.failure,
      ]);
    } finally {
      await crawl.close();
    }
    signal.throwIfAborted();
    files = await modificationTimes(tree, budget, found, times, signal);
  } catch (err) {
    return failed(err);
  } finally {
    await tree.close();
    options.onSearched?.({ opens: budget.opens + budget.timeOpens, entries: budget.entries });
  }
  let stopped = budget.exhausted
    ? `\n\n(The search stopped after opening ${budget.opens + budget.timeOpens} directories and reading ${budget.entries} directory entries; files further on were not looked at. Pass a narrower path or pattern.)`
    : '';
  if (budget.tooLong)
    stopped += `\n\n(Directories whose paths are longer than ${MAX_PATH_LENGTH} characters were not searched; no file tool takes such paths.)`;
  if (files.length === 0) return textResult(`No files found${stopped}`);
  for (const file of files) file.relative = relative === '.' ? file.relative : path.join(relative, file.relative);
  files.sort((a, b) => b.mtimeMs - a.mtimeMs || (a.relative < b.relative ? -1 : a.relative > b.relative ? 1 : 0));
  let text = files
    .slice(0, MAX_GLOB_RESULTS)
    .map((f) => displayName(f.relative))
    .join('\n');
  if (files.length > MAX_GLOB_RESULTS) {
    text += `\n\n(Showing the ${MAX_GLOB_RESULTS} most recently modified of ${files.length} matching files. Use a more specific pattern or path to narrow the search.)`;
  }
  return textResult(text + stopped);
}

/**
 * The regular files among `found` (paths below the tree's start) with their modification times:
 * those the crawl took, and the others taken now with lstat through the held directory of each,
 * so a name swapped for a link is not followed. Only a match the crawl's own matching missed is
 * looked up now; its directory is opened again, at most as many as the crawl could open.
 */
async function modificationTimes(
  tree: HeldTree,
  budget: CrawlBudget,
  found: readonly string[],
  times: ReadonlyMap<string, number | undefined>,
  signal: AbortSignal,
): Promise<{ relative: string; mtimeMs: number }[]> {
  const files: { relative: string; mtimeMs: number }[] = [];
  const byDirectory = new Map<string, string[]>();
  for (const match of found) {
    if (times.has(match)) {
      const mtimeMs = times.get(match);
      if (mtimeMs !== undefined) files.push({ relative: match, mtimeMs });
      continue;
    }
    const dir = path.posix.dirname(match);
    const names = byDirectory.get(dir);
    if (names) names.push(path.posix.basename(match));
    else byDirectory.set(dir, [path.posix.basename(match)]);
  }
  const mayOpen = (): boolean => {
    if (budget.timeOpens >= budget.max) {
      budget.exhausted = true;
      return false;
    }
    budget.timeOpens += 1;
    return true;
  };
  for (const parts of depthFirst([...byDirectory.keys()])) {
    signal.throwIfAborted();
    const dir = parts.join('/');
    const names = byDirectory.get(dir)!;
    await tree.with(
      parts,
      async (held) => {
        // In batches: one at a time is slow for big directories, all at once can exhaust descriptors.
        for (let first = 0; first < names.length; first += STAT_BATCH) {
          await Promise.all(
            names.slice(first, first + STAT_BATCH).map(async (name) => {
              const stats = await lstat(heldPath(held, name)).catch(() => undefined);
              if (stats?.isFile()) files.push({ relative: dir === '.' ? name : `${dir}/${name}`, mtimeMs: stats.mtimeMs });
            }),
          );
        }
      },
      mayOpen,
    );
  }
  return files;
}

/** Directory paths split into parts, in depth-first order: each directory right before what is below it. */
function depthFirst(dirs: readonly string[]): string[][] {
  return dirs
    .map((dir) => dir.split('/'))
    .sort((a, b) => {
      for (let i = 0; i < Math.min(a.length, b.length); i += 1) {
        if (a[i] !== b[i]) return a[i]! < b[i]! ? -1 : 1;
      }
      return a.length - b.length;
    });
}

/**
 * Most directory entries one search reads plus directories it opens: the crawler keeps every match
 * in memory, so a tree of millions of files would cost hundreds of MiB and seconds of the event
 * loop, and opens count too, so that no shape of tree (a chain thousands deep) costs more.
 */
export const MAX_CRAWLED_ENTRIES = 200_000;

/** What one search did; see GlobToolOptions.onSearched. */
export interface SearchWork {
  /** Directories opened, the crawl's and those opened again to take modification times. */
  opens: number;
  /** Directory entries read. */
  entries: number;
}

/**
 * Longest path from the workspace root of a directory the crawl reads, as long as the longest path
 * the file tools take. Each directory costs the crawler work in proportion to its path's length,
 * so without it a chain of directories 20000 deep took 17 s although each was opened once.
 */
const MAX_PATH_LENGTH = 4096;
