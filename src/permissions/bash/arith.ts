/**
 * Bash evaluates arithmetic recursively: a variable named in `$((x))`, `(( x ))`, `a[x]`, `[[ x -eq 0 ]]`
 * or `${s:x}` is read as an expression in turn, and an array subscript in that expression has its
 * `$(...)` run. So under rules, arithmetic may hold number literals and operators, and names only as
 * the target of a plain `=` (which reads nothing).
 */

const NUMBER = /^(0[xX][0-9a-fA-F]+|[0-9]+#[0-9A-Za-z@_]+|[0-9]+)/;
// Longest first: `**=` before `**` before `*`.
const OPERATOR = /^(\*\*=?|<<=?|>>=?|&&|\|\||\+\+|--|[-+*/%&|^]=|[<>!=]=|[-+*/%<>!~&|^?:,()=])/;
const NAME = /^[A-Za-z_][A-Za-z0-9_]*/;
const BLANK = /^[ \t\n]+/;

/** Whether `text` is arithmetic bash evaluates without reading any variable: numbers, operators, `NAME =` targets when `assign`. */
export function plainArithmetic(text: string, assign: boolean): boolean {
  let rest = text;
  while (rest !== '') {
    const token = BLANK.exec(rest) ?? NUMBER.exec(rest) ?? OPERATOR.exec(rest);
    if (token !== null) {
      rest = rest.slice(token[0].length);
      continue;
    }
    const name = NAME.exec(rest);
    if (name === null || !assign) return false;
    rest = rest.slice(name[0].length).replace(BLANK, '');
    // `x = 1` sets x without reading it; `x == 1`, `x += 1` and `x` alone read it.
    if (!rest.startsWith('=') || rest.startsWith('==')) return false;
  }
  return true;
}

/** A variable name as builtins take one, with a subscript only of numbers (`a[2]`), so nothing in it is evaluated. */
export function plainName(text: string): boolean {
  const subscript = /^[A-Za-z_][A-Za-z0-9_]*(?:\[(.*)\])?$/s.exec(text);
  return subscript !== null && (subscript[1] === undefined || plainArithmetic(subscript[1], false));
}
