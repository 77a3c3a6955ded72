/** Longest line shown in full; longer ones are cut with a marker saying how much was left out. */
export const MAX_LINE_CHARS = 2000;

/**
 * Splits text into lines as an editor counts them: on `\n`, with a trailing `\r` removed from each
 * line and no empty last line after a final newline. Empty text has no lines.
 */
export function splitLines(text: string): string[] {
  if (text === '') return [];
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  return lines.map((line) => (line.endsWith('\r') ? line.slice(0, -1) : line));
}

/** A line cut to `MAX_LINE_CHARS`, never between the two halves of a surrogate pair. */
export function truncateLine(line: string): string {
  if (line.length <= MAX_LINE_CHARS) return line;
  let cut = MAX_LINE_CHARS;
  const last = line.charCodeAt(cut - 1);
  if (last >= 0xd800 && last <= 0xdbff) cut -= 1;
  return `${line.slice(0, cut)}... [line truncated, ${line.length - cut} more characters]`;
}

/** One line in `cat -n` style: the number right-aligned to width 6, a tab, the (cut) line. */
export function numberLine(lineNumber: number, line: string): string {
  return `${String(lineNumber).padStart(6)}\t${truncateLine(line)}`;
}

/** How many lines `splitLines` would give, without building them. */
export function countLines(text: string): number {
  if (text === '') return 0;
  let breaks = 0;
  for (let at = text.indexOf('\n'); at !== -1; at = text.indexOf('\n', at + 1)) breaks += 1;
  return text.endsWith('\n') ? breaks : breaks + 1;
}

/**
 * The lines of `text` from the 0-based line `first` on, cut as `splitLines` cuts them, one at a
 * time: a caller that stops early never pays for the rest of a large file.
 */
export function* linesFrom(text: string, first: number): Generator<string> {
  let pos = 0;
  for (let skipped = 0; skipped < first; skipped += 1) {
    const next = text.indexOf('\n', pos);
    if (next === -1) return;
    pos = next + 1;
  }
  while (pos < text.length) {
    const next = text.indexOf('\n', pos);
    const line = next === -1 ? text.slice(pos) : text.slice(pos, next);
    yield line.endsWith('\r') ? line.slice(0, -1) : line;
    if (next === -1) return;
    pos = next + 1;
  }
}
