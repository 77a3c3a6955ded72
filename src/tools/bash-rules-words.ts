import type { Node } from 'web-tree-sitter';

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

/** The value of an unquoted word piece after backslash removal, or undefined when it expands. */
export function unquoteBare(raw: string, atWordStart: boolean): string | undefined {
  let out = '';
  let previous: string | undefined;
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i] as string;
    if (c === '\\') {
      // A trailing backslash joins the next line; the parser never leaves one in a finished word.
      if (i + 1 >= raw.length) return undefined;
      const next = raw[++i] as string;
      if (next !== '\n') out += next;
      previous = undefined;
      continue;
    }
    // Quotes and parentheses never belong in a bare word piece; one here means the parser saw something else.
    if (c === "'" || c === '"' || c === '(' || c === ')') return undefined;
    if (expansionAt(raw, i, previous, atWordStart) !== undefined) return undefined;
    out += c;
    previous = c;
  }
  return out;
}

/** The value of the inside of a double-quoted string, or undefined when it expands. */
export function unquoteDouble(inner: string): string | undefined {
  let out = '';
  for (let i = 0; i < inner.length; i++) {
    const c = inner[i] as string;
    if (c === '\\' && i + 1 < inner.length) {
      const next = inner[i + 1] as string;
      if ('$`"\\\n'.includes(next)) {
        if (next !== '\n') out += next;
        i++;
        continue;
      }
    }
    if (c === '$' || c === '`') return undefined;
    out += c;
  }
  return out;
}

/** The literal value of a word node (word, quotes, concatenation...), or undefined when the shell expands it. */
export function literalValue(node: Node, atWordStart: boolean): string | undefined {
  const text = node.text;
  switch (node.type) {
    case 'word':
      return unquoteBare(text, atWordStart);
    case 'number':
      return node.namedChildCount === 0 ? unquoteBare(text, atWordStart) : undefined;
    case 'raw_string':
      return text.length >= 2 && text.startsWith("'") && text.endsWith("'") ? text.slice(1, -1) : undefined;
    case 'string':
      // `$"..."` is translated through the locale, so its value is not what it says.
      if (!text.startsWith('"') || !text.endsWith('"') || text.length < 2) return undefined;
      if (node.namedChildren.some((child) => child.type !== 'string_content')) return undefined;
      return unquoteDouble(text.slice(1, -1));
    case 'ansi_c_string':
      // Escapes in $'...' (\x6e, \156, \u...) are decoded by the shell; treat any as not literal rather than decode them.
      return text.startsWith("$'") && text.endsWith("'") && !text.includes('\\') ? text.slice(2, -1) : undefined;
    case 'concatenation':
    case 'command_name':
      return joinedValue(node, atWordStart);
    default:
      return undefined;
  }
}

// A concatenation is literal when every piece is, and the pieces cover its whole text (no token the grammar left out).
function joinedValue(node: Node, atWordStart: boolean): string | undefined {
  const pieces = node.children;
  let value = '';
  let covered = '';
  for (const [index, piece] of pieces.entries()) {
    if (!piece.isNamed) return undefined;
    const part = literalValue(piece, atWordStart && index === 0);
    if (part === undefined) return undefined;
    value += part;
    covered += piece.text;
  }
  return pieces.length > 0 && covered === node.text ? value : undefined;
}

/** A word node as a `ShellWord`. */
export function shellWord(node: Node): ShellWord {
  // A lone `{` expands to nothing else; seen where a command should be, it is the keyword.
  if (node.type === 'word' && node.text === '{') return { text: '{', value: '{' };
  return { text: node.text, value: literalValue(node, true) };
}

/** A `NAME=value` argument of a declaration builtin (`export X=1`) as one word. */
export function assignmentWord(node: Node): ShellWord {
  const name = node.childForFieldName('name');
  const value = node.childForFieldName('value');
  if (name?.type !== 'variable_name') return { text: node.text, value: undefined };
  if (value === null) return { text: node.text, value: node.text };
  const head = node.text.slice(0, value.startIndex - node.startIndex);
  const literal = literalValue(value, true);
  return { text: node.text, value: literal === undefined ? undefined : head + literal };
}
