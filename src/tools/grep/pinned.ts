import { constants } from 'node:fs';
import { mkdir, mkdtemp, open, rm, symlink, type FileHandle } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Permissions } from '../../core/permissions.js';
import { describeAbortReason, errorResult } from '../../core/result.js';
import type { ToolContext, ToolResult } from '../../core/types.js';
import { HeldTree } from '../../os/fs/held-dir.js';
import { heldPath } from '../../os/fs/workspace.js';
import type { RgCommand } from '../../os/sandbox/rg-confined.js';
import { displayName } from '../display-name.js';
import { LineCollector } from './lines.js';
import { listFiles, type ListingRequest } from './listing.js';
import { failedRun, grepResult, recordSink, runRg, type RgRename, type RgRun } from './run.js';

/** Most files one search under rules for reading holds the names of; a note says when it stopped there. */
export const MAX_RULED_FILES = 100_000;
/** Files held open and searched by one rg process: few enough to leave descriptors for other calls. */
export const RULED_BATCH = 256;

/** How much one search under rules for reading may hold (tests make them small). */
export interface PinnedLimits {
  /** Most files listed (default MAX_RULED_FILES). */
  maxFiles?: number;
  /** Files per rg process (default RULED_BATCH). */
  batch?: number;
}

// Files opened at once.
const OPENS_AT_ONCE = 64;
const OPEN_FILE = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;
// What opening a listed file fails with when it changed since it was listed: gone, a symlink or a directory now, a FIFO.
const CHANGED = new Set(['ENOENT', 'ENOTDIR', 'ELOOP', 'EISDIR', 'ENXIO']);
// The names of the links to the held files (see searchBatch): 7 digits, so they sort as the files do.
const LINK_NAME = /\.\/\d{7}/;
const LINK_NAMES = new RegExp(LINK_NAME.source, 'g');

/** One search of a directory under rules for reading (see `searchPinned`): the directory, pinned by the walk (the rules have passed it), and how to search it. */
export interface PinnedSearch extends ListingRequest {
  /** rg's options for searching and printing. */
  search: readonly string[];
  pattern: string;
  mode: string;
  lineNumbers: boolean;
  /** True when rg prints `--` between groups of lines (content mode with context). */
  separated: boolean;
  limit: number;
  limits: PinnedLimits;
}

/**
 * Grep under rules for reading. rg walks the directory only to list the files it would search
 * (`--files`: names, never contents); the files the rules hide are dropped from that list, the
 * others are opened here through held directories without following a symlink, and those that
 * are regular files with one name are searched by rg through the descriptors held, in batches.
 * So rg never reads a file the rules hide, not even one a swapped directory or symlink would lead
 * it to (rg opens what it walks by name, and follows a directory swapped for a link meanwhile),
 * and every count and note is made of what was searched. As with Read, the rules see the name a
 * file had when it was opened and how many names it had when it was checked: a file with a second
 * name then is left out; a name it gets afterwards is not seen, nor is a rename (rules are on
 * paths; who may rename files may move a denied file's bytes to any path). rg reads the ignore
 * files of the tree (.gitignore, .ignore) to list it, hidden ones too: what they hold decides
 * which files are listed, and never shows otherwise.
 */
export async function searchPinned(s: PinnedSearch, permissions: Permissions, context: ToolContext): Promise<ToolResult> {
  const deadline = performance.now() + s.timeoutMs;
  const left = (): number => Math.max(1, Math.ceil(deadline - performance.now()));
  const batchSize = s.limits.batch ?? RULED_BATCH;
  const maxFiles = s.limits.maxFiles ?? MAX_RULED_FILES;
  const listed = await listFiles(s, permissions, maxFiles, context.signal);
  // Stopped at its most files, rg was killed on purpose: what it listed stands.
  if (!listed.stopped || context.signal.aborted) {
    const failure = failedRun(listed.run, s.runner, listed.files.length > 0, context);
    if (failure !== undefined) return failure;
  }
  const errors: string[] = [];
  if (listed.run.outcome.exitCode === 2) errors.push(listed.run.errors);
  const notes = listed.stopped
    ? [`(Only the first ${maxFiles} files were searched: under this key's rules Grep looks at no more per call. Narrow the search with path, glob or type.)`]
    : [];
  const lines = new LineCollector(s.limit, (line) => line);
  let timedOut = listed.run.outcome.timedOut;
  // rg reads the held files through links in a directory of the server's own, outside the workspace.
  const links = await mkdtemp(path.join(tmpdir(), 'toolport-grep-'));
  const tree = new HeldTree(s.dir);
  try {
    // At least one run, even with no file: rg still checks the pattern.
    for (let first = 0; !timedOut && (first === 0 || first < listed.files.length); first += batchSize) {
      if (context.signal.aborted) return errorResult(`Grep was aborted: ${describeAbortReason(context.signal.reason)}`);
      const batch = await openFiles(tree, s.location.relative, listed.files.slice(first, first + batchSize), errors);
      if (batch.length === 0 && first > 0) continue;
      const run = await searchBatch(s, path.join(links, String(first)), batch, lines, left(), context.signal);
      const failure = failedRun(run, { ...s.runner, sandbox: undefined }, lines.total > 0 || LINK_NAME.test(run.stderr), context);
      if (failure !== undefined) return failure;
      if (run.outcome.exitCode === 2 && run.errors !== '') errors.push(run.errors);
      timedOut = run.outcome.timedOut || (performance.now() >= deadline && first + batchSize < listed.files.length);
    }
  } finally {
    await tree.close();
    await rm(links, { recursive: true, force: true });
  }
  return grepResult(lines, s.mode, { timedOutAfterMs: timedOut ? s.timeoutMs : undefined, errors: errors.filter(Boolean).join('\n'), notes });
}

interface HeldFile {
  /** From the workspace root. */
  relative: string;
  handle: FileHandle;
}

/**
 * Opens `files` (paths below the held tree's start) through their held directories without
 * following a symlink, and keeps those that are regular files with one name. One that changed
 * since it was listed is left out; one that cannot be opened is noted in `errors`.
 */
async function openFiles(tree: HeldTree, relative: string, files: readonly string[], errors: string[]): Promise<HeldFile[]> {
  const opened: (HeldFile | undefined)[] = [];
  // Listed by path, so the files of one directory come together.
  for (let first = 0; first < files.length;) {
    const dir = path.posix.dirname(files[first]!);
    let end = first;
    while (end < files.length && path.posix.dirname(files[end]!) === dir) end += 1;
    const names = files.slice(first, end);
    const at = opened.length;
    opened.length += names.length;
    const open = async (held: FileHandle): Promise<void> => {
      for (let i = 0; i < names.length; i += OPENS_AT_ONCE) {
        await Promise.all(
          names.slice(i, i + OPENS_AT_ONCE).map(async (below, j) => {
            opened[at + i + j] = await openHeld(held, path.posix.basename(below), fromRoot(relative, below), errors);
          }),
        );
      }
    };
    // A directory that is a symlink now, or gone, leaves its files out (undefined); one that cannot be opened is noted.
    await tree.with(dir === '.' ? [] : dir.split('/'), open).catch((err: unknown) => {
      errors.push(`${displayName(fromRoot(relative, dir))}: cannot be opened (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
    });
    first = end;
  }
  return opened.filter((file) => file !== undefined);
}

async function openHeld(dir: FileHandle, name: string, relative: string, errors: string[]): Promise<HeldFile | undefined> {
  let handle: FileHandle;
  try {
    handle = await open(heldPath(dir, name), OPEN_FILE);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'error';
    if (!CHANGED.has(code)) errors.push(`${displayName(relative)}: cannot be opened (${code})`);
    return undefined;
  }
  try {
    const stats = await handle.stat();
    // A file with another name may be one the rules hide under that name: it is left out, as if absent.
    if (stats.isFile() && stats.nlink === 1) return { relative, handle };
  } catch {
    // Left out, as if absent.
  }
  await handle.close();
  return undefined;
}

/**
 * Searches the held files with one rg process. rg is given a directory of the server's own that
 * holds a link to each descriptor (/proc/<pid>/fd/<n>), named in the files' order, and follows
 * them: one level below what it was given, each is searched as a file of a walk (binary files
 * skipped, as in every search), not as a file named on its command line. The links are removed
 * before the files are closed, so none can ever lead to a descriptor number used again.
 */
async function searchBatch(
  s: PinnedSearch,
  dir: string,
  files: readonly HeldFile[],
  lines: LineCollector,
  timeoutMs: number,
  signal: AbortSignal,
): Promise<RgRun> {
  const names = new Map<string, string>();
  try {
    await mkdir(dir, { mode: 0o700 });
    await Promise.all(
      files.map((file, i) => {
        const name = String(i).padStart(7, '0');
        names.set(`./${name}`, file.relative);
        return symlink(`/proc/${process.pid}/fd/${file.handle.fd}`, path.join(dir, name));
      }),
    );
    const command: RgCommand = { file: s.runner.rg, args: [...s.search, '--follow', '--no-ignore', '--', s.pattern, '.'], cwd: dir, from: undefined, to: '' };
    const rename: RgRename = { line: (p) => names.get(p) ?? p, errors: (text) => text.replace(LINK_NAMES, (link) => names.get(link) ?? link) };
    let first = true;
    const sink = recordSink({ mode: s.mode, lineNumbers: s.lineNumbers, file: undefined }, rename, (line) => {
      // One rg run prints `--` between the groups of two files; between two runs it is printed here.
      if (first && s.separated && lines.total > 0) lines.add('--');
      first = false;
      lines.add(line);
    });
    return await runRg(command, sink, timeoutMs, signal, rename);
  } finally {
    await rm(dir, { recursive: true, force: true });
    await Promise.all(files.map((file) => file.handle.close()));
  }
}

function fromRoot(relative: string, below: string): string {
  return relative === '.' ? below : `${relative}/${below}`;
}
