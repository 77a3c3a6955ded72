/**
 * One word of a simple command as the shell would see it: its source text and, when the word is
 * literal, its value after quote removal. `value` is undefined for a word the shell expands
 * (variables, substitutions, globs, braces, a tilde), whose value is only known when it runs.
 */
export interface ShellWord {
  readonly text: string;
  readonly value: string | undefined;
}

/**
 * Bash's reserved words. A command named by one means the grammar read a construct as a plain
 * command (`time { curl; }` is `time` with the words `{` and `curl`), so its parts are not what runs.
 */
export const SHELL_KEYWORDS: ReadonlySet<string> = new Set([
  '!',
  '{',
  '}',
  '[[',
  ']]',
  'case',
  'coproc',
  'do',
  'done',
  'elif',
  'else',
  'esac',
  'fi',
  'for',
  'function',
  'if',
  'in',
  'select',
  'then',
  'until',
  'while',
]);

/** A character that makes an unquoted word expand, described for a message; undefined when `raw[i]` is literal there. */
export function expansionAt(raw: string, i: number, previous: string | undefined, atWordStart: boolean): string | undefined {
  const c = raw[i];
  switch (c) {
    case '$':
    case '`':
      return 'an expansion';
    case '*':
    case '?':
    case '[':
      return 'a glob';
    case '{':
      return 'a brace expansion';
    case '~':
      // Bash expands a tilde at the start of a word and, in assignment-like words, after = or :.
      return (i === 0 && atWordStart) || previous === '=' || previous === ':' ? 'a tilde' : undefined;
    default:
      return undefined;
  }
}
