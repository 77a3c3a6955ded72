import type { Dirent } from 'node:fs';
import { opendir, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import picomatch from 'picomatch';
import { Type } from 'typebox';
import { defineTool } from '../core/define-tool.js';
import type { Permissions } from '../core/permissions.js';
import { errorResult } from '../core/result.js';
import type { Static } from 'typebox';
import type { ErrorResult, ToolDef, ToolResult } from '../core/types.js';
import { displayName, QUOTED_NAMES } from './display-name.js';
import { fileErrorResult } from './files/errors.js';
import { checkPathRules } from './files/rules.js';
import { quotePath } from '../os/fs/describe.js';
import { MAX_PATTERN_LENGTH } from './glob/glob.js';
import { PATTERN_LIMITS, patternProblem } from './glob/limits.js';
import { isOwnFileName } from '../os/fs/own-files.js';
import { heldPath, systemError, type Location, type Workspace } from '../os/fs/workspace.js';

/** Most entries one listing shows; the rest are counted in a note. */
export const MAX_LS_ENTRIES = 1000;
/**
 * Most symlinks one listing resolves. Each is walked through the workspace, and a link whose
 * target climbs up and down (`d/../d/../...`) through other such links takes the walk to its cap
 * of steps, tens of milliseconds: a directory of a thousand such links would hold one call for a
 * minute. The rest are shown unresolved.
 */
export const MAX_RESOLVED_LINKS = 50;
// LS's own text between a link's name and its target.
const ARROW = ' -> ';

const LsEntrySchema = Type.Object(
  {
    name: Type.String({ description: "The entry's name, exactly (the text quotes names that hold unusual characters)." }),
    type: Type.Enum(['file', 'directory', 'symlink', 'other'], { type: 'string', description: 'What the entry is; "other" is a device, pipe or socket.' }),
    target: Type.Optional(
      Type.String({
        description:
          'For a symbolic link: its target, relative to the workspace root, ending in "/" for a directory. Absent for a link that leads outside the workspace or to nothing, or that was not resolved (past the links resolved per listing).',
      }),
    ),
  },
  { additionalProperties: false },
);

/** LS's structured content: the listing as data, for programs (MCP's structuredContent). */
export const LsOutputSchema = Type.Object(
  {
    path: Type.String({ description: 'The directory listed, relative to the workspace root ("." for the root).' }),
    entries: Type.Array(LsEntrySchema, { description: `The entries shown, sorted by name: at most the first ${MAX_LS_ENTRIES}.` }),
    total: Type.Integer({ minimum: 0, description: 'The entries not ignored, in all: more than those shown when the listing was cut.' }),
    ignored: Type.Integer({ minimum: 0, description: 'The entries ignore left out.' }),
  },
  { additionalProperties: false },
);

/** One listing, as LS's structured content. */
export type LsOutput = Static<typeof LsOutputSchema>;
type LsEntry = LsOutput['entries'][number];

export interface LsToolOptions {
  /** Most symlinks one listing resolves (default MAX_RESOLVED_LINKS). */
  maxResolvedLinks?: number;
}

/** LS: the entries of one directory inside the workspace. */
export function createLsTool(ws: Workspace, options: LsToolOptions = {}): ToolDef {
  const maxLinks = options.maxResolvedLinks ?? MAX_RESOLVED_LINKS;
  return defineTool({
    name: 'LS',
    description: [
      'Lists the entries of one directory in the workspace (not recursive), sorted by name, one per line.',
      'Directories end with "/". A symbolic link is shown as "name -> target", with the target relative to the workspace root (and "/" when it is a directory); a link that points outside the workspace or to nothing is shown as "name -> (outside the workspace or broken)" and is not followed.',
      `At most ${maxLinks} links are resolved per listing, the first by name; the others are shown as "name -> (not resolved: too many links)".`,
      `${QUOTED_NAMES} So are names that hold "${ARROW}".`,
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
    // Declared once, above: every workspace's LS shares the schema object, so it is compiled once.
    outputSchema: LsOutputSchema,
    annotations: { title: 'List directory', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    rules: { access: 'read' },
    async execute({ path: given, ignore }, context) {
      const { signal } = context;
      for (const pattern of ignore ?? []) {
        const problem = patternProblem(pattern);
        if (problem !== undefined) return errorResult(`Ignore pattern ${quotePath(pattern)} ${problem}`);
      }
      const shown = quotePath(given);
      let location: Location;
      try {
        location = await ws.locate(given);
      } catch (err) {
        return failed(fileErrorResult(err, given));
      }
      try {
        checkPathRules(context, 'LS', 'read', location, given);
        if (location.kind === 'missing') return failed(fileErrorResult(systemError('ENOENT'), given));
        if (location.dir === undefined) return errorResult(`Path ${shown} is a file, not a directory; use Read to read it.`);
        // What the rules hide is left out as if absent; without rules for reading, nothing is looked up.
        const rules = context.permissions?.governs('read') === true ? context.permissions : undefined;
        const dirPath = location.relative;
        const hidden = rules && ((name: string, directory: boolean): boolean => !rules.visible(dirPath === '.' ? name : `${dirPath}/${name}`, directory));
        let ignored: ((name: string) => boolean) | undefined;
        try {
          ignored = ignore && ignore.length > 0 ? picomatch([...ignore], { dot: true }) : undefined;
        } catch (err) {
          return errorResult(`The ignore patterns are not valid globs: ${(err as Error).message}`);
        }
        let first: FirstEntries;
        try {
          // Through the descriptor the walk ended on: the directory that was checked, wherever it is now.
          first = await firstEntries(location.dir, ignored, hidden, signal);
        } catch (err) {
          return failed(fileErrorResult(err, given));
        }
        return await listing(ws, location.relative, shown, first, { maxLinks, rules }, signal);
      } finally {
        await location.close();
      }
    },
  });
}

interface FirstEntries {
  /** The first MAX_LS_ENTRIES entries by name, sorted. */
  kept: Dirent[];
  /** Entries not ignored, in all. */
  total: number;
  ignored: number;
}

/**
 * Reads the held directory as a stream and keeps only the first entries by name: a directory of
 * a million entries costs the memory of a thousand, whatever its size.
 */
async function firstEntries(
  dir: FileHandle,
  ignored: ((name: string) => boolean) | undefined,
  hidden: ((name: string, directory: boolean) => boolean) | undefined,
  signal: AbortSignal,
): Promise<FirstEntries> {
  const kept: Dirent[] = [];
  let total = 0;
  let ignoredCount = 0;
  for await (const entry of await opendir(heldPath(dir), { bufferSize: 256 })) {
    if (isOwnFileName(entry.name) || hidden?.(entry.name, entry.isDirectory()) === true) continue;
    if (ignored && (ignored(entry.name) || (entry.isDirectory() && ignored(`${entry.name}/`)))) {
      ignoredCount += 1;
      continue;
    }
    total += 1;
    if (total % 4096 === 0) signal.throwIfAborted();
    if (kept.length === MAX_LS_ENTRIES && !(entry.name < kept[MAX_LS_ENTRIES - 1]!.name)) continue;
    // Binary search for the place, then insert; the list never grows past the cap.
    let low = 0;
    let high = kept.length;
    while (low < high) {
      const mid = (low + high) >>> 1;
      if (kept[mid]!.name < entry.name) low = mid + 1;
      else high = mid;
    }
    kept.splice(low, 0, entry);
    if (kept.length > MAX_LS_ENTRIES) kept.pop();
  }
  return { kept, total, ignored: ignoredCount };
}

/** The listing of a directory's first entries, with the counts of what was left out. */
async function listing(
  ws: Workspace,
  relative: string,
  shown: string,
  { kept, total, ignored }: FirstEntries,
  { maxLinks, rules }: { maxLinks: number; rules: Permissions | undefined },
  signal: AbortSignal,
): Promise<{ content: ToolResult['content']; structuredContent: LsOutput }> {
  const ignoredNote = ignored > 0 ? ` (${ignored} ignored)` : '';
  const entries: LsEntry[] = [];
  const structuredContent = { path: relative, entries, total, ignored };
  if (total === 0) return { content: [{ type: 'text', text: `Directory ${shown} has no entries${ignoredNote}.` }], structuredContent };

  const lines: string[] = [];
  let links = 0;
  for (const entry of kept) {
    signal.throwIfAborted();
    const name = displayName(entry.name, ARROW);
    if (entry.isDirectory()) {
      lines.push(`${name}/`);
      entries.push({ name: entry.name, type: 'directory' });
    } else if (!entry.isSymbolicLink()) {
      lines.push(name);
      entries.push({ name: entry.name, type: entry.isFile() ? 'file' : 'other' });
    } else if (++links > maxLinks) {
      lines.push(`${name}${ARROW}(not resolved: too many links)`);
      entries.push({ name: entry.name, type: 'symlink' });
    } else {
      const target = await linkTarget(ws, relative, entry.name, rules);
      const slash = target?.directory === true ? '/' : '';
      lines.push(`${name}${ARROW}${target === undefined ? '(outside the workspace or broken)' : `${displayName(target.relative, ARROW)}${slash}`}`);
      entries.push(target === undefined ? { name: entry.name, type: 'symlink' } : { name: entry.name, type: 'symlink', target: `${target.relative}${slash}` });
    }
  }
  let text = `Directory ${shown}, ${total} entr${total === 1 ? 'y' : 'ies'}${ignoredNote}:\n${lines.join('\n')}`;
  if (links > maxLinks) {
    text += `\n\n(Only the first ${maxLinks} of ${links} symbolic links were resolved. To see where another one leads, list this directory with ignore patterns that leave out the others.)`;
  }
  if (total > MAX_LS_ENTRIES) {
    text += `\n\n(${total - MAX_LS_ENTRIES} more entries not shown; only the first ${MAX_LS_ENTRIES} by name are listed. Use Glob or ignore to narrow down.)`;
  }
  return { content: [{ type: 'text', text }], structuredContent };
}

/** A file error as LS's failure: the type says it has no structured content, which a failure needs none of. */
function failed(result: ToolResult): ErrorResult {
  return { content: result.content, isError: true };
}

/**
 * Where a symlink in the listed directory leads (relative to the workspace root), found by walking
 * `<directory>/<name>` through the workspace, which expands links by its own confined rules, never
 * by following one: undefined for a target outside or missing, and nothing about it is said. A
 * target the rules hide is absent to the caller, so its link reads as broken.
 */
async function linkTarget(
  ws: Workspace,
  relative: string,
  name: string,
  rules: Permissions | undefined,
): Promise<{ relative: string; directory: boolean } | undefined> {
  let target: Location | undefined;
  try {
    target = await ws.locate(relative === '.' ? name : path.join(relative, name));
    if (target.kind === 'missing') throw systemError('ENOENT');
    const directory = target.kind === 'directory';
    if (rules !== undefined && !rules.visible(target.relative, directory)) return undefined;
    return { relative: target.relative, directory };
  } catch {
    return undefined;
  } finally {
    await target?.close();
  }
}
