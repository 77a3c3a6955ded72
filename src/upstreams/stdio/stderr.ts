import type { ChildProcess } from 'node:child_process';
import type { Logger } from 'pino';

/** Longest stderr line kept in the log; the rest of a longer one is left out. */
const MAX_STDERR_LINE = 4096;
/** Text read past the cut of a long stderr line before it is redacted, so a secret that spans the cut is still found. */
const STDERR_REDACT_SLACK = 4096;
/** Most stderr lines logged per second; past it, lines are counted and the count logged. */
const MAX_STDERR_LINES_PER_SECOND = 50;

/**
 * The process's stderr in the log, a line per entry, rate-bounded so a chatty process cannot flood
 * it. A long line is redacted before it is cut to {@link MAX_STDERR_LINE}, with text past the cut
 * to spare, and the rest of it is left out: a secret is never split between two entries.
 */
export function forwardStderr(child: ChildProcess, log: Logger, redact: (text: string) => string, onLine?: (line: string) => void): void {
  let partial = '';
  // Inside a line already logged in part: the rest of it, up to the next newline, is left out.
  let skipping = false;
  let windowStart = 0;
  let inWindow = 0;
  let dropped = 0;
  const emit = (line: string, cut: boolean): void => {
    const now = Date.now();
    if (now - windowStart >= 1000) {
      if (dropped > 0) log.warn({ dropped }, 'upstream stderr lines dropped (more than 50 a second)');
      windowStart = now;
      inWindow = 0;
      dropped = 0;
    }
    if (++inWindow > MAX_STDERR_LINES_PER_SECOND) {
      dropped++;
      return;
    }
    const text = redact(line);
    log.info({ stderr: cut || text.length > MAX_STDERR_LINE ? `${text.slice(0, MAX_STDERR_LINE)}…` : text }, 'upstream stderr');
  };
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', (chunk: string) => {
    const pieces = chunk.split('\n');
    const rest = pieces.pop() ?? '';
    for (const piece of pieces) {
      const line = partial + piece;
      partial = '';
      if (skipping) skipping = false;
      else if (line.trim() !== '') {
        onLine?.(line);
        emit(line.replace(/\r$/, ''), false);
      }
    }
    if (skipping) return;
    partial += rest;
    if (partial.length > MAX_STDERR_LINE + STDERR_REDACT_SLACK) {
      emit(partial, true);
      partial = '';
      skipping = true;
    }
  });
  child.stderr!.on('end', () => {
    if (!skipping && partial.trim() !== '') emit(partial, false);
  });
}
