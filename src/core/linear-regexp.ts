import { RE2JS } from 're2js';

/**
 * Ajv's regular-expression engine for schemas toolport did not write (a source's, such as an
 * upstream MCP server's): RE2, whose matching takes time linear in the input. V8's backtracking
 * engine takes exponential time on `(a+)+$`, and quadratic time on `\d+x` over a 100,000-digit
 * string (9 s measured), so one such `pattern` in a listed schema would stall the server on each
 * call. What RE2 cannot express (back-references, lookaheads) fails to compile: the tool is refused.
 */
export const linearRegExp = Object.assign(
  (pattern: string): { test(input: string): boolean; toString(): string } => {
    const compiled = RE2JS.compile(RE2JS.translateRegExp(pattern));
    // Ajv keys compiled patterns by toString: each pattern must give its own.
    return { test: (input: string) => compiled.matcher(input).find(), toString: () => `re2:${pattern}` };
  },
  { code: 'linearRegExp' },
);
