/**
 * Limits on glob patterns, checked before picomatch compiles one. picomatch turns a glob into a
 * backtracking regular expression, and some shapes take exponential time on hostile names: each
 * extra `*` in a path segment multiplies the work by the segment's length (`*a*a*a*a*a*a*c`
 * against a name of 100 `a`s held the event loop for minutes), so do extra `*` in the other
 * segments (three segments of `*a*` take seconds) and each `**` (by the path's depth), each brace
 * alternative adds a pass, and nested extglobs explode on their own. Worst cases found by a random search within these limits:
 * a few ms against a 254-character name, ~150 ms against a path of 15 such names, and up to
 * ~0.5 s against a path 2000 directories deep.
 */

/** Most wildcards (a `*`, or a run such as `**`) one path segment may hold. */
export const MAX_SEGMENT_WILDCARDS = 2;
/** Most wildcards in a whole pattern, a `**` counting as one. */
export const MAX_PATTERN_WILDCARDS = 3;
/** Most `**` (globstars) in a pattern. */
export const MAX_GLOBSTARS = 2;
/** Most patterns the braces of one pattern may expand to (`{a,b}/{c,d}` expands to 4). */
export const MAX_BRACE_EXPANSIONS = 16;

/** The limits in one sentence, for tool descriptions and refusals. */
export const PATTERN_LIMITS =
  `To keep matching fast, a pattern may use "*" at most ${MAX_SEGMENT_WILDCARDS} times in one path segment and ${MAX_PATTERN_WILDCARDS} times in all ` +
  `("**" counts as one, may appear twice, and only as a whole segment), its braces may expand to at most ${MAX_BRACE_EXPANSIONS} alternatives, ` +
  'and extglobs such as "@(a|b)" are refused.';

// Marks both ends of a brace alternative in an expansion: picomatch compiles `*{*a,b}` to two
// wildcards in a row, which backtrack like `*a*`, so stars on either side of it count apart.
const BOUNDARY = '\0';

// An extglob opener: one of @ ! + * ? right before "(", unless escaped.
const EXTGLOB = /(?<!\\)(?:\\\\)*[@!+*?]\(/;

/**
 * Why a glob pattern is refused, as the rest of a sentence that starts with the pattern (for
 * example `has 3 "*" wildcards in one path segment ...`), or undefined when it may be compiled.
 * Braces are counted per alternative: the pattern is written out as each of its expansions, and
 * every expansion must keep the limits. Escaped characters (`\*`) never count. A `*` inside a
 * bracket expression (`[*]`) is literal to picomatch but counted here: rare, and on the safe side.
 */
export function patternProblem(pattern: string): string | undefined {
  if (EXTGLOB.test(pattern)) {
    return 'uses extglob syntax ("@(", "!(", "+(", "*(" or "?("), which is refused because it can make matching take minutes. Use braces such as "{a,b}" or a simpler pattern.';
  }
  // NUL cannot be in a file name; it is taken here to mark where a brace alternative starts and ends.
  const expansions = expandBraces(pattern.replaceAll(BOUNDARY, '_'), MAX_BRACE_EXPANSIONS);
  if (expansions === undefined) {
    return `has braces that expand to more than ${MAX_BRACE_EXPANSIONS} alternatives. ${PATTERN_LIMITS} Use fewer alternatives, or several calls.`;
  }
  for (const expansion of expansions) {
    const { segmentMax, total, globstars, strayGlobstar } = countWildcards(expansion);
    const shown = expansion.replaceAll(BOUNDARY, '');
    const where = shown === pattern ? '' : ` (in ${JSON.stringify(shown)}, one of its brace alternatives)`;
    if (strayGlobstar) {
      return `uses "**" inside a path segment${where}. "**" must be a whole segment, as in "src/**/*.ts"; within a name use "*".`;
    }
    const what =
      segmentMax > MAX_SEGMENT_WILDCARDS
        ? `has ${segmentMax} "*" wildcards in one path segment`
        : total > MAX_PATTERN_WILDCARDS
          ? `has ${total} "*" wildcards in all`
          : globstars > MAX_GLOBSTARS
            ? `has ${globstars} "**" globstars`
            : undefined;
    if (what !== undefined) return `${what}${where}. ${PATTERN_LIMITS} Use a simpler pattern, such as "*foo*" or "**/*.ts".`;
  }
  return undefined;
}

interface WildcardCount {
  /** The most wildcards in one path segment. */
  segmentMax: number;
  /** Wildcards in the whole pattern, a `**` counting as one. */
  total: number;
  /** `**` path segments. */
  globstars: number;
  /** A run of two or more `*` that is not a whole path segment. */
  strayGlobstar: boolean;
}

/**
 * Counts the wildcards of a brace-free pattern. A wildcard is a run of `*`; a BOUNDARY mark ends a
 * run, since picomatch compiles the stars on either side of a brace apart. `**` is a globstar only
 * as a whole path segment: anywhere else picomatch compiles it to a plain `*` or, next to a brace
 * or at the start (`**.ts`), to a wildcard that crosses "/" and backtracks over every character of
 * the path, so it is refused.
 */
function countWildcards(pattern: string): WildcardCount {
  const count: WildcardCount = { segmentMax: 0, total: 0, globstars: 0, strayGlobstar: false };
  let runs: number[] = [];
  let run = 0;
  let text = '';
  const endRun = (): void => {
    if (run > 0) runs.push(run);
    run = 0;
  };
  const endSegment = (): void => {
    endRun();
    const globstar = runs.length === 1 && runs[0]! >= 2 && /^\*+$/.test(text);
    if (!globstar && runs.some((r) => r >= 2)) count.strayGlobstar = true;
    const wildcards = globstar ? 1 : runs.length;
    count.segmentMax = Math.max(count.segmentMax, wildcards);
    count.total += wildcards;
    if (globstar) count.globstars += 1;
    runs = [];
    text = '';
  };
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c === '*') {
      run += 1;
      text += c;
      continue;
    }
    endRun();
    if (c === '/') {
      endSegment();
    } else if (c === '\\') {
      // An escaped character is literal: it neither counts nor ends a segment.
      text += pattern.slice(i, i + 2);
      i += 1;
    } else if (c !== BOUNDARY) {
      text += c;
    }
  }
  endSegment();
  return count;
}

/**
 * The patterns the braces of `pattern` expand to, each alternative between two BOUNDARY marks, or
 * undefined when there would be more than `limit`. As in picomatch, only a group with a comma at
 * its top level is a choice (`{a}` and the range `{1..3}` are not), an unmatched brace is literal,
 * and escaped braces and commas are text.
 */
function expandBraces(pattern: string, limit: number): string[] | undefined {
  const group = firstBraceGroup(pattern);
  if (group === undefined) return limit >= 1 ? [pattern] : undefined;
  const before = pattern.slice(0, group.start);
  const after = pattern.slice(group.end + 1);
  const out: string[] = [];
  for (const alternative of group.alternatives) {
    const more = expandBraces(before + BOUNDARY + alternative + BOUNDARY + after, limit - out.length);
    if (more === undefined) return undefined;
    for (const expansion of more) out.push(expansion);
  }
  return out;
}

interface BraceGroup {
  /** Index of `{`. */
  start: number;
  /** Index of the matching `}`. */
  end: number;
  alternatives: string[];
}

function firstBraceGroup(pattern: string): BraceGroup | undefined {
  for (let start = 0; start < pattern.length; start++) {
    if (pattern[start] === '\\') {
      start += 1;
      continue;
    }
    if (pattern[start] !== '{') continue;
    let depth = 0;
    let piece = start + 1;
    const alternatives: string[] = [];
    for (let i = start + 1; i < pattern.length; i++) {
      const c = pattern[i];
      if (c === '\\') i += 1;
      else if (c === '{') depth += 1;
      else if (c === '}' && depth > 0) depth -= 1;
      else if (c === ',' && depth === 0) {
        alternatives.push(pattern.slice(piece, i));
        piece = i + 1;
      } else if (c === '}') {
        if (alternatives.length === 0) break;
        alternatives.push(pattern.slice(piece, i));
        return { start, end: i, alternatives };
      }
    }
    // Unmatched, or no top-level comma: literal here; a group inside it is still looked for.
  }
  return undefined;
}
