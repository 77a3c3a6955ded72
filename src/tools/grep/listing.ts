import type { FileHandle } from 'node:fs/promises';
import type { Permissions } from '../../core/permissions.js';
import type { Location, Workspace } from '../../os/fs/workspace.js';
import { renamer, rgCommand, type RgRunner } from '../../os/sandbox/rg-confined.js';
import { runRg, type RgRun, type RgSink } from './run.js';

/** What to list: a directory pinned by the walk, and rg's options that choose the files of a walk (ending before `--`). */
export interface ListingRequest {
  ws: Workspace;
  runner: RgRunner;
  location: Location;
  dir: FileHandle;
  selection: readonly string[];
  timeoutMs: number;
}

/** The files a search would look at, less those the rules hide. */
export interface Listing {
  /** rg's run; its errors less those that name a hidden path, and exit code 2 only while some are left. */
  run: RgRun;
  /** Paths below the directory listed, in rg's order (by path). */
  files: string[];
  /** True when the list stopped at `maxFiles`. */
  stopped: boolean;
}

// An error of rg's about a path it walked: an I/O error, or a line of an ignore file it cannot read.
const PATH_ERROR = /^rg: (.+): (?:line \d+: .*|[^:]*\(os error \d+\))$/;

/**
 * The files rg would search in the directory, by name (`--files`: rg reads directories and ignore
 * files, never what the files hold), less those the rules hide, at most `maxFiles`. rg runs as
 * for a search, in its sandbox when it has one. Its errors that may name a hidden path are left
 * out, as the path would be.
 */
export async function listFiles(request: ListingRequest, permissions: Permissions, maxFiles: number, signal: AbortSignal): Promise<Listing> {
  const { location } = request;
  const args = ['--files', '--null', '--sort=path', ...request.selection, '--'];
  const command = rgCommand(request.runner, request.ws, { relative: location.relative, dir: request.dir }, args);
  const rename = renamer(command);
  const prefix = location.relative === '.' ? '' : `${location.relative}/`;
  const files: string[] = [];
  const stop = new AbortController();
  let stopped = false;
  const take = (raw: string): void => {
    const relative = rename.line(raw);
    if (stopped || !relative.startsWith(prefix) || !visible(permissions, relative, false)) return;
    if (files.length === maxFiles) {
      stopped = true;
      stop.abort();
      return;
    }
    files.push(relative.slice(prefix.length));
  };
  const run = await runRg(command, new NulSeparated(take), request.timeoutMs, AbortSignal.any([signal, stop.signal]), rename);
  const errors = withoutHidden(run.errors, permissions);
  // Errors about hidden paths alone: as if those paths were absent, which rg would not have complained of.
  const exitCode = run.outcome.exitCode === 2 && errors === '' ? 1 : run.outcome.exitCode;
  return { run: { ...run, errors, outcome: { ...run.outcome, exitCode } }, files, stopped };
}

/** Reads rg's `--files --null` output: one path before each NUL. */
class NulSeparated implements RgSink {
  readonly #take: (path: string) => void;
  #rest: Buffer = Buffer.alloc(0);

  constructor(take: (path: string) => void) {
    this.#take = take;
  }

  write(chunk: Buffer): void {
    let buffer = this.#rest.length === 0 ? chunk : Buffer.concat([this.#rest, chunk]);
    for (let end = buffer.indexOf(0); end >= 0; end = buffer.indexOf(0)) {
      this.#take(buffer.subarray(0, end).toString('utf8'));
      buffer = buffer.subarray(end + 1);
    }
    // No path is longer than PATH_MAX; a longer rest is not one.
    this.#rest = buffer.length > 4096 ? Buffer.alloc(0) : buffer;
  }

  end(): void {
    this.#rest = Buffer.alloc(0);
  }
}

/** Whether the rules let a search see a path; one they cannot read (not a plain relative path) is taken as hidden. */
function visible(permissions: Permissions, relative: string, directory: boolean): boolean {
  try {
    return permissions.visible(relative, directory);
  } catch {
    return false;
  }
}

/**
 * rg's error text less the lines about a path the rules hide. A path may hold ": ", so every
 * way of reading the line's path is checked, as a file and as a directory; a line about no path
 * (a glob or a file type rg cannot read) is kept.
 */
export function withoutHidden(text: string, permissions: Permissions): string {
  const kept = text.split('\n').filter((line) => {
    const named = PATH_ERROR.exec(line)?.[1];
    if (named === undefined) return true;
    const readings = [named];
    for (let at = named.indexOf(': '); at > 0; at = named.indexOf(': ', at + 1)) readings.push(named.slice(0, at));
    return readings.every((path) => visible(permissions, path, false) && visible(permissions, path, true));
  });
  return kept.join('\n').trim();
}
