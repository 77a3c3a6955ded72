import { describeAbortReason, errorResult, textResult } from '../../core/result.js';
import type { ToolContext, ToolResult } from '../../core/types.js';
import { commandEnv, runProcess, type RunOutcome } from '../../os/proc/process.js';
import { isSandboxFailure, renamer, type RgCommand, type RgRunner } from '../../os/sandbox/rg-confined.js';
import { MAX_STDERR_CHARS, type LineCollector } from './lines.js';
import { RgRecords, type RgRecordsOptions } from './records.js';
import { capText, MAX_OUTPUT_CHARS } from '../output-cap.js';

/** One rg process, run to its end. */
export interface RgRun {
  outcome: RunOutcome;
  /** What it wrote to stderr, trimmed, as written (for the sandbox's own failures). */
  stderr: string;
  /** The same with paths renamed as in the results. */
  errors: string;
}

/** How a run's paths become paths from the workspace root: in result records, and in error text. */
export interface RgRename {
  line: (path: string) => string;
  errors: (text: string) => string;
}

/** Where a run's output goes: RgRecords for a search, or any reader of rg's stdout. */
export interface RgSink {
  write(chunk: Buffer): void;
  /** Called once rg has ended, for what is left of a record it cut off. */
  end(): void;
}

/** One rg search's output as lines in rg's usual form (see RgRecords), paths renamed by `rename`. */
export function recordSink(shape: Omit<RgRecordsOptions, 'rename'>, rename: RgRename, onLine: (line: string) => void): RgSink {
  return new RgRecords({ ...shape, rename: rename.line }, onLine);
}

/** Runs one rg process, its output to `sink`, its error output renamed by `rename` (by default as `renamer(command)` says). */
export async function runRg(command: RgCommand, sink: RgSink, timeoutMs: number, signal: AbortSignal, rename: RgRename = renamer(command)): Promise<RgRun> {
  const stderr: Buffer[] = [];
  let stderrBytes = 0;
  const outcome = await runProcess(command.file, command.args, {
    cwd: command.cwd,
    env: commandEnv(),
    timeoutMs,
    signal,
    onStdout: (chunk) => sink.write(chunk),
    onStderr: (chunk) => {
      if (stderrBytes < 4 * MAX_STDERR_CHARS) stderr.push(chunk);
      stderrBytes += chunk.length;
    },
  });
  if (!outcome.spawnError) sink.end();
  const text = Buffer.concat(stderr).toString('utf8').trim();
  return { outcome, stderr: text, errors: rename.errors(text) };
}

/**
 * The result for a run that failed as a whole (not started, aborted, the sandbox failed, rg
 * failed before it printed anything, or was killed), or undefined when its results stand.
 * `printed`: whether the search printed any result so far.
 */
export function failedRun(run: RgRun, runner: RgRunner, printed: boolean, context: ToolContext): ToolResult | undefined {
  const { outcome } = run;
  if (outcome.spawnError) {
    if (runner.sandbox !== undefined) return errorResult(`Grep could not start its sandbox (bubblewrap): ${outcome.spawnError.code ?? 'error'}.`);
    return errorResult(
      outcome.spawnError.code === 'ENOENT'
        ? `ripgrep (${runner.rg}) is not installed on the server, so Grep cannot run. Install it: apt-get install ripgrep (Debian/Ubuntu), or see https://github.com/BurntSushi/ripgrep#installation.`
        : // Node's message names the program's path on the server.
          `ripgrep could not be started (${outcome.spawnError.code ?? 'error'}).`,
    );
  }
  if (outcome.abortReason !== undefined) return errorResult(`Grep was aborted: ${describeAbortReason(outcome.abortReason)}`);
  if (isSandboxFailure(runner, run.stderr)) {
    // bwrap's messages name server paths; the client is told only that it failed.
    context.log.error({ tool: 'Grep', stderr: run.stderr.slice(0, MAX_STDERR_CHARS) }, 'Grep sandbox failed');
    return errorResult('Grep could not start its sandbox (bubblewrap); try again. The server log says why.');
  }
  const errors = capText(run.errors, MAX_STDERR_CHARS).text;
  if (outcome.exitCode === 2 && !printed) return errorResult(`ripgrep failed: ${errors || 'exit code 2'}`);
  if (outcome.exitCode !== 0 && outcome.exitCode !== 1 && outcome.exitCode !== 2 && !outcome.timedOut) {
    return errorResult(`ripgrep failed (${outcome.exitSignal ?? `exit code ${outcome.exitCode}`}): ${errors}`);
  }
  return undefined;
}

/** What a search adds after its results: a timeout, the errors rg reported, notes of its own. */
export interface SearchEnd {
  /** The timeout, when a run hit it. */
  timedOutAfterMs: number | undefined;
  /** Errors rg reported besides its results; empty: none. */
  errors: string;
  /** Further notes, last. */
  notes?: readonly string[];
}

/** The result of a search: a header with the figures of what was kept, the lines, and notes on what was left out. */
export function grepResult(lines: LineCollector, mode: string, end: SearchEnd): ToolResult {
  const kept = lines.kept;
  const files = `${lines.total} file${lines.total === 1 ? '' : 's'}`;
  const header =
    lines.total === 0
      ? ['No matches found']
      : mode === 'files_with_matches'
        ? [`Found ${files}`]
        : mode === 'count'
          ? [`Found ${lines.countSum} matching line${lines.countSum === 1 ? '' : 's'} in ${files}`]
          : [];
  const notes: string[] = [];
  if (lines.total > kept.length) {
    const shown = `Showing the first ${kept.length} of ${lines.total} ${mode === 'content' ? 'lines' : 'entries'}`;
    notes.push(
      lines.full
        ? `[${shown}: the output is limited to ${MAX_OUTPUT_CHARS} characters; narrow the search with path, glob or type to see more]`
        : `[${shown}; raise head_limit or narrow the search to see more]`,
    );
  }
  const timedOut = end.timedOutAfterMs !== undefined;
  if (timedOut) notes.push(`(ripgrep timed out after ${end.timedOutAfterMs} ms; results are incomplete. Narrow the search with path, glob or type.)`);
  if (end.errors) notes.push(`(ripgrep reported errors: ${capText(end.errors, MAX_STDERR_CHARS).text})`);
  notes.push(...(end.notes ?? []));
  // concat, not push(...kept): spreading a long array overflows the call stack.
  return textResult(capText(header.concat(kept, notes).join('\n'), MAX_OUTPUT_CHARS).text, timedOut);
}
