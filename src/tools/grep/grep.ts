import { constants, type Stats } from 'node:fs';
import { lstat, open, type FileHandle } from 'node:fs/promises';
import { Type, type Static } from 'typebox';
import { defineTool } from '../../core/define-tool.js';
import { errorResult } from '../../core/result.js';
import type { ToolContext, ToolDef, ToolResult } from '../../core/types.js';
import { QUOTED_NAMES } from '../display-name.js';
import { fileErrorResult } from '../files/errors.js';
import { quotePath } from '../../os/fs/describe.js';
import { checkLinkCount, checkPathRules } from '../files/rules.js';
import { LineCollector } from './lines.js';
import { searchPinned, type PinnedLimits } from './pinned.js';
import { RECORD_ARGS } from './records.js';
import { failedRun, grepResult, recordSink, runRg } from './run.js';
import { MAX_OUTPUT_CHARS } from '../output-cap.js';
import { OWN_FILE_GLOBS } from '../../os/fs/own-files.js';
import { renamer, rgCommand, rgRunner, type GrepConfinement, type RgCommand, type RgRunner } from '../../os/sandbox/rg-confined.js';
import { heldPath, systemError, type Location, type Workspace } from '../../os/fs/workspace.js';

export const DEFAULT_HEAD_LIMIT = 250;
/** Largest head_limit accepted; the output cap stops far fewer lines of ordinary length anyway. */
export const MAX_HEAD_LIMIT = 10_000;
export const GREP_TIMEOUT_MS = 30_000;
// rg prints at most this many characters of a line (minified files would fill the output alone).
const MAX_COLUMNS = 500;

export interface GrepToolOptions {
  /** The ripgrep program; `rg` on PATH unless given (tests point it at a missing one). */
  rgPath?: string;
  timeoutMs?: number;
  /**
   * Where rg runs (see `GrepConfinement`): `auto` (the default) uses the bubblewrap sandbox when a
   * trial run at the first call works; `on` refuses to search without it; `off` never uses it.
   * Under rules for reading, rg walks the workspace only to list names, there; it reads the files
   * through descriptors Grep holds (see `searchPinned`), which it cannot reach from the sandbox, so
   * it does that outside, with nothing to walk.
   */
  confine?: GrepConfinement;
  /** What a search under rules for reading may hold (see `searchPinned`). */
  ruled?: PinnedLimits;
}

// O_NONBLOCK: opening a FIFO would otherwise wait for a writer. O_NOFOLLOW: the walk found no
// symlink here; one now means the workspace changed since, and it is not followed.
const OPEN_FILE = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

const count = (what: string): ReturnType<typeof Type.Integer> =>
  Type.Integer({ minimum: 0, description: `${what} Requires output_mode: "content", ignored otherwise.` });

const inputSchema = Type.Object(
  {
    pattern: Type.String({ description: 'The regular expression pattern to search for in file contents (ripgrep syntax).' }),
    path: Type.Optional(
      Type.String({ description: 'File or directory to search in, absolute or relative to the workspace root (rg PATH). Defaults to the workspace root.' }),
    ),
    glob: Type.Optional(Type.String({ description: 'Glob pattern to filter files (e.g. "*.js", "*.{ts,tsx}") - maps to rg --glob.' })),
    type: Type.Optional(
      Type.String({
        description: 'File type to search (rg --type). Common types: js, ts, py, rust, go, java. More efficient than glob for standard file types.',
      }),
    ),
    output_mode: Type.Optional(
      Type.Enum(['content', 'files_with_matches', 'count'], {
        description:
          'Output mode: "content" shows matching lines (supports -A/-B/-C context, -n line numbers, head_limit), "files_with_matches" shows file paths (supports head_limit), "count" shows match counts per file (supports head_limit). Defaults to "files_with_matches".',
      }),
    ),
    '-i': Type.Optional(Type.Boolean({ description: 'Case insensitive search (rg -i).' })),
    '-n': Type.Optional(
      Type.Boolean({ description: 'Show line numbers in output (rg -n). Requires output_mode: "content", ignored otherwise. Defaults to true.' }),
    ),
    '-A': Type.Optional(count('Number of lines to show after each match (rg -A).')),
    '-B': Type.Optional(count('Number of lines to show before each match (rg -B).')),
    '-C': Type.Optional(count('Number of lines to show before and after each match (rg -C).')),
    multiline: Type.Optional(
      Type.Boolean({ description: 'Enable multiline mode where . matches newlines and patterns can span lines (rg -U --multiline-dotall). Default: false.' }),
    ),
    head_limit: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: MAX_HEAD_LIMIT,
        description: `Limit output to the first N lines/entries, like "| head -N": lines for content, file paths for files_with_matches, entries for count. Defaults to ${DEFAULT_HEAD_LIMIT}, at most ${MAX_HEAD_LIMIT}.`,
      }),
    ),
  },
  { additionalProperties: false },
);

type GrepInput = Static<typeof inputSchema>;

const DESCRIPTION = [
  'A powerful search tool built on ripgrep.',
  '',
  '- Supports full regex syntax (e.g. "log.*Error", "function\\s+\\w+"). Literal braces need escaping: `interface\\{\\}` finds `interface{}` in Go code.',
  '- Filter files with `glob` (e.g. "*.js", "**/*.tsx") or `type` (e.g. "js", "py", "rust").',
  '- Output modes: "files_with_matches" (default) lists file paths, "content" shows matching lines, "count" shows counts of matching lines per file.',
  '- Patterns match within single lines; use `multiline: true` for patterns that span lines.',
  '- Searches the workspace only; paths in the output are relative to the workspace root, sorted by path.',
  `- ${QUOTED_NAMES}`,
  `- Follows ripgrep's defaults: files listed in .gitignore/.ignore are skipped, as are hidden files and directories (such as .git) and binary files; node_modules directories are skipped too. A glob that matches an ignored file brings it back, as in rg. Symbolic links are not followed. Lines longer than ${MAX_COLUMNS} characters are shortened.`,
  `- At most head_limit (default ${DEFAULT_HEAD_LIMIT}) lines or entries and ${MAX_OUTPUT_CHARS} characters are returned; narrow the search or raise head_limit for more.`,
].join('\n');

/** The Grep tool, with Claude Code's name and input, backed by ripgrep (`rg`). */
export function createGrepTool(ws: Workspace, options: GrepToolOptions = {}): ToolDef {
  const rgPath = options.rgPath ?? 'rg';
  const timeoutMs = options.timeoutMs ?? GREP_TIMEOUT_MS;
  const confine = options.confine ?? 'auto';
  let runner: Promise<RgRunner> | undefined;
  let logged = false;
  // Decided at the first call, once: the trial run of the sandbox costs a process start.
  const decide = async (log: ToolContext['log']): Promise<RgRunner> => {
    runner ??= rgRunner(ws, rgPath, confine);
    const decided = await runner;
    // Looked for again next time: it may have been installed meanwhile.
    if (!decided.found) runner = undefined;
    else if (!logged) {
      logged = true;
      if (decided.problem === undefined) log.info({ tool: 'Grep', confine, sandbox: decided.sandbox !== undefined }, 'Grep runs ripgrep');
      else log.warn({ tool: 'Grep', confine, sandbox: false, reason: decided.problem }, 'Grep cannot run ripgrep in its sandbox');
    }
    return decided;
  };
  return defineTool({
    name: 'Grep',
    description: DESCRIPTION,
    inputSchema,
    annotations: { title: 'Grep', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    timeoutMs: timeoutMs + 10_000,
    rules: { access: 'read' },
    async execute(input, context) {
      const given = input.path ?? '.';
      let location: Location;
      try {
        location = await ws.locate(given);
      } catch (err) {
        return fileErrorResult(err, given);
      }
      let file: FileHandle | undefined;
      try {
        // The rules see the path the walk resolved, before anything there is opened.
        checkPathRules(context, 'Grep', 'read', location, given);
        const permissions = context.permissions?.governs('read') === true ? context.permissions : undefined;
        if (location.kind === 'missing') return fileErrorResult(systemError('ENOENT'), given);
        if (location.dir === undefined) {
          const opened = await openRegularFile(location, given);
          if ('refusal' in opened) return opened.refusal;
          file = opened.handle;
          checkLinkCount(context, 'Grep', given, opened.links);
        }
        const decided = await decide(context.log);
        if (confine === 'on' && decided.found && decided.sandbox === undefined) {
          return errorResult('Grep runs ripgrep only inside its sandbox (bubblewrap), and the sandbox does not work on this server. The server log says why.');
        }
        const mode = input.output_mode ?? 'files_with_matches';
        const shape = { mode, lineNumbers: input['-n'] !== false, searchesFile: file !== undefined };
        const limit = input.head_limit ?? DEFAULT_HEAD_LIMIT;
        if (permissions !== undefined && location.dir !== undefined) {
          // As rg reads them: -A or -B after -C overrides -C (both sides), so -C counts only alone.
          const sides = input['-A'] === undefined && input['-B'] === undefined ? [input['-C']] : [input['-A'], input['-B']];
          const search = { ws, runner: decided, location, dir: location.dir, pattern: input.pattern, limit, timeoutMs, limits: options.ruled ?? {}, ...shape };
          const args = {
            selection: selectionArgs(input),
            search: searchArgs(input, mode),
            separated: mode === 'content' && sides.some((n) => n !== undefined && n > 0),
          };
          return await searchPinned({ ...search, ...args }, permissions, context);
        }
        // Under rules, rg reads the file held here, never its path again: in the sandbox it would be looked up by name, and a
        // directory on the way swapped for a link could lead it to a file the rules hide.
        const runner = permissions !== undefined ? { ...decided, sandbox: undefined } : decided;
        const command = rgCommand(runner, ws, { relative: location.relative, dir: location.dir, file }, rgArgs(input, mode));
        return await search(command, runner, shape, limit, timeoutMs, context);
      } catch (err) {
        return fileErrorResult(err, given);
      } finally {
        await file?.close();
        await location.close();
      }
    },
  });
}

type Opened = { handle: FileHandle; links: number } | { refusal: ToolResult };

/**
 * Opens the file a location pins, through its held parent, without following a symlink. A FIFO,
 * socket or device is refused before it is opened (rg would wait on a FIFO for a writer).
 */
async function openRegularFile(location: Location, given: string): Promise<Opened> {
  const shown = quotePath(given);
  const changed = { refusal: errorResult(`Path ${shown} was replaced by a symbolic link while in use; it was not followed. Try again.`) };
  const special = {
    refusal: errorResult(`Path ${shown} is not a regular file (it is a FIFO, socket or device); Grep searches regular files and directories.`),
  };
  const entry = await lstat(heldPath(location.parent, location.name));
  if (entry.isSymbolicLink()) return changed;
  if (!entry.isFile()) return special;
  let handle: FileHandle;
  try {
    handle = await open(heldPath(location.parent, location.name), OPEN_FILE);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ELOOP') return changed;
    throw err;
  }
  let stats: Stats;
  try {
    stats = await handle.stat();
  } catch (err) {
    await handle.close();
    throw err;
  }
  if (stats.isFile()) return { handle, links: stats.nlink };
  await handle.close();
  return special;
}

/** What rg prints: its output mode, whether line numbers are shown, whether it searches one file. */
interface OutputShape {
  mode: string;
  lineNumbers: boolean;
  searchesFile: boolean;
}

/** Runs one rg process and turns what it printed into the result. */
async function search(command: RgCommand, runner: RgRunner, shape: OutputShape, limit: number, timeoutMs: number, context: ToolContext): Promise<ToolResult> {
  // Paths are renamed and escaped record by record (see RgRecords); the lines come out final.
  const lines = new LineCollector(limit, (line) => line);
  const file = shape.searchesFile ? command.args.at(-1) : undefined;
  const rename = renamer(command);
  const records = recordSink({ mode: shape.mode, lineNumbers: shape.lineNumbers, file }, rename, (line) => lines.add(line));
  const run = await runRg(command, records, timeoutMs, context.signal, rename);
  const failure = failedRun(run, runner, lines.total > 0, context);
  if (failure !== undefined) return failure;
  return grepResult(lines, shape.mode, {
    timedOutAfterMs: run.outcome.timedOut ? timeoutMs : undefined,
    errors: run.outcome.exitCode === 2 ? run.errors : '',
  });
}

/** rg's options that choose which files a walk searches: the client's glob and type, never node_modules or the server's own files. */
function selectionArgs(input: GrepInput): string[] {
  const args = ['--no-follow', '--glob=!node_modules/'];
  if (input.glob !== undefined) args.push('--glob', input.glob);
  if (input.type !== undefined) args.push('--type', input.type);
  // Last, so they win over the client's glob: the server's own temporary and lock files.
  for (const own of OWN_FILE_GLOBS) args.push(`--glob=!${own}`);
  return args;
}

/** rg's options for how it searches and prints, whichever files it is given. */
function searchArgs(input: GrepInput, mode: string): string[] {
  const args = ['--color=never', '--no-heading', '--with-filename', '--sort=path', ...RECORD_ARGS];
  args.push(`--max-columns=${MAX_COLUMNS}`, '--max-columns-preview');
  if (input['-i']) args.push('--ignore-case');
  if (input.multiline) args.push('--multiline', '--multiline-dotall');
  if (mode === 'files_with_matches') args.push('--files-with-matches');
  else if (mode === 'count') args.push('--count');
  else {
    // Always: the separator after the number tells a match from a context line (RgRecords drops it if -n is false).
    args.push('--line-number');
    // rg lets -A and -B override -C when they come after it.
    if (input['-C'] !== undefined) args.push('--context', String(input['-C']));
    if (input['-A'] !== undefined) args.push('--after-context', String(input['-A']));
    if (input['-B'] !== undefined) args.push('--before-context', String(input['-B']));
  }
  return args;
}

/** rg's options for a search, up to `--` and the pattern; the path to search comes after. */
function rgArgs(input: GrepInput, mode: string): string[] {
  // `--` ends the options: a pattern or path starting with "-" is taken as text.
  return [...searchArgs(input, mode), ...selectionArgs(input), '--', input.pattern];
}
