import { canonicalJson, withSortedKeys } from './canonical-json.js';
import { printable, type WireTool } from './definitions.js';

/** One difference between the lock and an upstream's tools, with the definitions to show. */
export interface ShownChange {
  kind: 'changed' | 'new' | 'removed';
  upstream: string;
  tool: string;
  before: WireTool | undefined;
  after: WireTool | undefined;
}

// Unchanged lines shown around a change; longer unchanged runs are folded into one line.
const CONTEXT_LINES = 2;
// Past this many line pairs a field is shown whole before and after: the comparison stays cheap.
const MAX_COMPARED_PAIRS = 4_000_000;
// Each line of upstream text is written out whole unless absurdly long.
const MAX_LINE_CHARS = 2000;

/**
 * `toolport upstreams diff` in words: per tool, each field that differs (`name` aside) as lines,
 * `-` before and `+` after: a description as its text, anything else as indented JSON with sorted
 * keys. Upstream text is made printable first, so hidden characters show and cannot move the terminal.
 */
export function lockDiffText(hasLock: boolean, changes: readonly ShownChange[]): string {
  const count = (kind: ShownChange['kind']) => changes.filter((c) => c.kind === kind).length;
  if (hasLock && changes.length === 0) return 'The lock file pins exactly the tools the upstreams list.\n';
  const lines = [
    hasLock
      ? `${count('changed')} changed, ${count('new')} new, ${count('removed')} removed since the lock file was written; changed and new tools are not served until \`toolport upstreams lock\` runs again.`
      : `There is no lock file, so every tool is served; \`toolport upstreams lock\` would pin these ${changes.length}.`,
  ];
  for (const change of changes) {
    lines.push('', `${change.kind} ${printable(change.upstream)} / ${printable(change.tool)}`);
    if (change.kind === 'removed') continue;
    for (const field of changedFields(change.before, change.after)) {
      lines.push(`  ${printable(field)}:`, ...lineDiff(fieldLines(change.before?.[field]), fieldLines(change.after?.[field])).map((line) => `    ${line}`));
    }
  }
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

function fieldLines(value: unknown): string[] {
  if (value === undefined) return [];
  const text = typeof value === 'string' ? value : JSON.stringify(withSortedKeys(value), null, 2);
  return text.split('\n').map((line) => printable(line, MAX_LINE_CHARS));
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
