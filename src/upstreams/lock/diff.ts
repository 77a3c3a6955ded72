import { canonicalJson, withSortedKeys } from '../canonical-json.js';
import { printable, type WireTool } from '../definitions.js';

/** One difference between the lock and an upstream's tools, with the definitions to show. */
export interface ShownChange {
  kind: 'changed' | 'new' | 'removed' | 'refused';
  upstream: string;
  tool: string;
  /** Why the checks refused it (`refused` only). */
  reason?: string;
  before: WireTool | undefined;
  after: WireTool | undefined;
}

// Unchanged lines shown around a change; longer unchanged runs are folded into one line.
const CONTEXT_LINES = 2;
// Past this many line pairs a field is shown whole before and after: the comparison stays cheap.
const MAX_COMPARED_PAIRS = 4_000_000;
// A longer line of upstream text is shown in pieces of this many characters, each on a line of its
// own after `↳ `: whole, so a change past the cut shows, and compared piece by piece.
const MAX_LINE_CHARS = 2000;
const ESCAPES_NOTE =
  'Characters that would not show (invisible, format and control characters, variation selectors, spaces other than U+0020) are written as \\u{…} with their code point, and a backslash in a description as \\\\.';
const SAME_LOOKING_NOTE = '(the two look the same: every character past ASCII is written as \\u{…})';

/**
 * `toolport upstreams diff` in words: per tool, each field that differs (`name` aside) as lines,
 * `-` before and `+` after: a description as its text, anything else as indented JSON with sorted
 * keys. Upstream text is made printable first, so hidden characters show as escapes (and the text
 * says so) and cannot move the terminal; a field whose lines still read the same before and after
 * (equal under NFKC: é composed or not, a full-width letter) is shown again with every character
 * past ASCII escaped.
 */
export function lockDiffText(hasLock: boolean, changes: readonly ShownChange[]): string {
  const count = (kind: ShownChange['kind']) => changes.filter((c) => c.kind === kind).length;
  if (hasLock && changes.length === 0) return 'The lock file pins exactly the tools the upstreams list.\n';
  const refused = count('refused');
  const lines = [
    (hasLock
      ? `${count('changed')} changed, ${count('new')} new, ${count('removed')} removed since the lock file was written; changed and new tools are not served until \`toolport upstreams lock\` runs again.`
      : `There is no lock file, so every tool is served; \`toolport upstreams lock\` would pin these ${changes.length - refused}.`) +
      (refused === 0
        ? ''
        : ` ${refused} listed ${refused === 1 ? 'tool is' : 'tools are'} refused by toolport's checks and not served whatever the lock says (an upstream's "tools" filter can leave ${refused === 1 ? 'it' : 'them'} out).`),
  ];
  const escaped = { any: false };
  for (const change of changes) {
    const why = change.reason === undefined ? '' : `: ${change.reason}`;
    lines.push('', `${change.kind} ${printable(change.upstream)} / ${printable(change.tool)}${why}`);
    if (change.kind === 'removed') continue;
    for (const field of changedFields(change.before, change.after)) {
      let [before, after] = [fieldLines(field, change.before, escaped), fieldLines(field, change.after, escaped)];
      const sameLooking = before.join('\n').normalize('NFKC') === after.join('\n').normalize('NFKC');
      if (sameLooking) [before, after] = [fieldLines(field, change.before, escaped, true), fieldLines(field, change.after, escaped, true)];
      lines.push(`  ${printable(field)}:${sameLooking ? ` ${SAME_LOOKING_NOTE}` : ''}`, ...lineDiff(before, after).map((line) => `    ${line}`));
    }
  }
  if (escaped.any) lines.splice(1, 0, ESCAPES_NOTE);
  return `${lines.join('\n')}\n`;
}

function changedFields(before: WireTool | undefined, after: WireTool | undefined): string[] {
  const fields = new Set([...Object.keys(before ?? {}), ...Object.keys(after ?? {})]);
  fields.delete('name');
  return [...fields].sort().filter((field) => textOf(before?.[field]) !== textOf(after?.[field]));
}

function textOf(value: unknown): string | undefined {
  return value === undefined ? undefined : canonicalJson(value);
}

/** The lines `field` of `wire` is shown as; sets `escaped.any` when one had to be escaped. `ascii`: every character past ASCII escaped too. */
function fieldLines(field: string, wire: WireTool | undefined, escaped: { any: boolean }, ascii = false): string[] {
  const value = wire?.[field];
  if (value === undefined) return [];
  // A description is shown as text, where a backslash is doubled so no text can pass for an escape; JSON doubles its own.
  const text = typeof value === 'string' ? value.replaceAll('\\', '\\\\') : JSON.stringify(withSortedKeys(value), null, 2);
  if (typeof value === 'string' && value.includes('\\')) escaped.any = true;
  return text.split('\n').flatMap((line) =>
    piecesOf(line).map((piece, i) => {
      const shown = ascii ? piece.replace(PAST_ASCII, escape) : printable(piece, Number.POSITIVE_INFINITY);
      if (shown !== piece) escaped.any = true;
      return i === 0 ? shown : `↳ ${shown}`;
    }),
  );
}

const PAST_ASCII = /[^\x20-\x7e]/gu;

function escape(char: string): string {
  return `\\u{${char.codePointAt(0)!.toString(16).toUpperCase()}}`;
}

/** `line` in pieces of at most {@link MAX_LINE_CHARS} characters (code points, so no pair is split). */
function piecesOf(line: string): string[] {
  if (line.length <= MAX_LINE_CHARS) return [line];
  const chars = [...line];
  const pieces: string[] = [];
  for (let i = 0; i < chars.length; i += MAX_LINE_CHARS) pieces.push(chars.slice(i, i + MAX_LINE_CHARS).join(''));
  return pieces;
}

/** A line diff: common lines kept (near a change) with two spaces, removed with `- `, added with `+ `. */
function lineDiff(before: string[], after: string[]): string[] {
  let start = 0;
  while (start < before.length && start < after.length && before[start] === after[start]) start++;
  let endBefore = before.length;
  let endAfter = after.length;
  while (endBefore > start && endAfter > start && before[endBefore - 1] === after[endAfter - 1]) [endBefore, endAfter] = [endBefore - 1, endAfter - 1];
  const ops: Array<[' ' | '-' | '+', string]> = [
    ...before.slice(0, start).map((line) => [' ', line] as [' ', string]),
    ...middle(before.slice(start, endBefore), after.slice(start, endAfter)),
    ...before.slice(endBefore).map((line) => [' ', line] as [' ', string]),
  ];
  const near = (i: number) => ops.slice(Math.max(0, i - CONTEXT_LINES), i + CONTEXT_LINES + 1).some(([op]) => op !== ' ');
  const out: string[] = [];
  ops.forEach(([op, line], i) => {
    if (op !== ' ' || near(i)) out.push(`${op} ${line}`.trimEnd());
    else if (out.at(-1) !== '  …') out.push('  …');
  });
  return out;
}

/** The differing middle by longest common subsequence; a middle too large to compare is shown whole, before then after. */
function middle(before: string[], after: string[]): Array<[' ' | '-' | '+', string]> {
  const removedAll = before.map((line) => ['-', line] as ['-', string]);
  const addedAll = after.map((line) => ['+', line] as ['+', string]);
  if (before.length * after.length > MAX_COMPARED_PAIRS || before.length === 0 || after.length === 0) return [...removedAll, ...addedAll];
  const width = after.length + 1;
  // common[i * width + j]: length of the longest common subsequence of before[i..] and after[j..].
  const common = new Uint32Array((before.length + 1) * width);
  for (let i = before.length - 1; i >= 0; i--) {
    for (let j = after.length - 1; j >= 0; j--) {
      common[i * width + j] =
        before[i] === after[j] ? common[(i + 1) * width + j + 1]! + 1 : Math.max(common[(i + 1) * width + j]!, common[i * width + j + 1]!);
    }
  }
  const ops: Array<[' ' | '-' | '+', string]> = [];
  let i = 0;
  let j = 0;
  while (i < before.length && j < after.length) {
    if (before[i] === after[j]) {
      ops.push([' ', before[i]!]);
      [i, j] = [i + 1, j + 1];
    } else if (common[(i + 1) * width + j]! >= common[i * width + j + 1]!) ops.push(['-', before[i++]!]);
    else ops.push(['+', after[j++]!]);
  }
  return [...ops, ...removedAll.slice(i), ...addedAll.slice(j)];
}
