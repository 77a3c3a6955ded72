import { createRequire } from 'node:module';
import type { RE2JS } from 're2js';

// Loaded on the first pattern of a source's schema: a server without upstreams never pays for it.
let engine: typeof RE2JS | undefined;
const re2 = (): typeof RE2JS => (engine ??= (createRequire(import.meta.url)('re2js') as { RE2JS: typeof RE2JS }).RE2JS);

/**
 * Ajv's regular-expression engine for schemas toolport did not write (a source's, such as an
 * upstream MCP server's): RE2, whose matching takes time linear in the input. V8's backtracking
 * engine takes exponential time on `(a+)+$`, and quadratic time on `\d+x` over a 100,000-digit
 * string (9 s measured), so one such `pattern` in a listed schema would stall the server on each
 * call. What RE2 cannot express (back-references, lookaheads) fails to compile: the tool is refused.
 */
export const linearRegExp = Object.assign(
  (pattern: string): { test(input: string): boolean; toString(): string } => {
    const RE2 = re2();
    const compiled = RE2.compile(RE2.translateRegExp(pattern));
    // Ajv keys compiled patterns by toString: each pattern must give its own.
    return { test: (input: string) => compiled.matcher(input).find(), toString: () => `re2:${pattern}` };
  },
  { code: 'linearRegExp' },
);
