/**
 * The words of a command line, read as bash reads them, for the subset of bash the rules model:
 * unquoted text, backslash escapes, single quotes, `$'...'` without escapes, double quotes, and
 * plain variables (`$NAME`, `${NAME}`, `$1`, `$?`...). Any other construct throws `Unsupported`
 * naming it, so a line is only ever judged on a reading bash shares.
 */

/** A construct outside the subset the rules model; the message names it. */
export class Unsupported extends Error {
  override readonly name = 'Unsupported';
}

/** Throws `Unsupported` for a construct, named as the subject of the sentence. */
export function unsupported(construct: string): never {
  throw new Unsupported(`${construct} is not allowed under permission rules`);
}

/** One word as read: its source text, the characters bash tokenised (joined lines removed), and its value when literal. */
export interface LexedWord {
  readonly text: string;
  /** The word's characters as written, backslash-newline pairs removed: what says whether it is a keyword, an assignment or a descriptor. */
  readonly raw: string;
  /** The value after quote removal; undefined when bash expands part of it (a variable, a glob, braces, a tilde). */
  readonly value: string | undefined;
}

/** Bash's metacharacters: they end a word. */
export const METACHARACTERS = new Set([' ', '\t', '\n', ';', '&', '|', '<', '>', '(', ')']);
const NAME_START = /[A-Za-z_]/;
const NAME_PART = /[A-Za-z0-9_]/;
const SPECIAL_PARAMETERS = new Set(['?', '#', '$', '!', '@', '*', '-']);
// Characters after which a `$` is plain text to bash, unquoted and inside double quotes.
const LITERAL_DOLLAR_BEFORE = new Set([undefined, ...METACHARACTERS]);

/** A position in the line, skipping backslash-newline pairs where bash removes them (outside single quotes and comments). */
export class Cursor {
  i = 0;

  constructor(readonly source: string) {}

  /** Steps over backslash-newline pairs at the position: bash joins the lines before it reads a token. */
  join(): void {
    while (this.source[this.i] === '\\' && this.source[this.i + 1] === '\n') this.i += 2;
  }

  /** The character at the position, lines joined. */
  peek(): string | undefined {
    this.join();
    return this.source[this.i];
  }

  /** The character after the one `peek` gives, lines joined. */
  after(): string | undefined {
    this.join();
    let j = this.i + 1;
    while (this.source[j] === '\\' && this.source[j + 1] === '\n') j += 2;
    return this.source[j];
  }

  /** Steps over the character `peek` gave. */
  skip(): void {
    this.join();
    this.i++;
  }
}

// Characters that are themselves in an unquoted word: none of bash's metacharacters, quotes, escapes,
// expansions, globs, braces or tildes.
const PLAIN = new Uint8Array(128);
for (let code = 33; code < 127; code++) PLAIN[code] = 1;
for (const c of '|&;<>()$`\\"\'*?[{}~') PLAIN[c.charCodeAt(0)] = 0;

function plainAt(source: string, i: number): boolean {
  const code = source.charCodeAt(i);
  // Past ASCII (letters of other scripts), bash reads a character as part of the word.
  return code >= 128 || PLAIN[code] === 1;
}

/** Reads one word at the cursor, up to the next metacharacter. */
export function lexWord(cursor: Cursor): LexedWord {
  cursor.join();
  const source = cursor.source;
  const start = cursor.i;
  let value = '';
  let literal = true;
  // The last character read unquoted, for tildes after `=` and `:`.
  let previous: string | undefined;
  for (let c = cursor.peek(); c !== undefined && !METACHARACTERS.has(c); c = cursor.peek()) {
    if (plainAt(source, cursor.i)) {
      // A run of plain characters at once: the common case, and the one a long line is made of.
      let end = cursor.i + 1;
      while (end < source.length && plainAt(source, end)) end++;
      value += source.slice(cursor.i, end);
      previous = source[end - 1];
      cursor.i = end;
    } else if (c === '\\') {
      const escaped = source[cursor.i + 1];
      if (escaped === undefined) unsupported('a backslash at the end of the line');
      value += escaped;
      cursor.i += 2;
      previous = undefined;
    } else if (c === "'") {
      const end = source.indexOf("'", cursor.i + 1);
      if (end < 0) unsupported('an unterminated quote');
      value += source.slice(cursor.i + 1, end);
      cursor.i = end + 1;
      previous = undefined;
    } else if (c === '"') {
      const quoted = doubleQuoted(cursor);
      if (quoted === undefined) literal = false;
      else value += quoted;
      previous = undefined;
    } else if (c === '$') {
      const expanded = dollar(cursor, false);
      if (expanded === undefined) literal = false;
      else value += expanded;
      previous = undefined;
    } else if (c === '`') {
      unsupported('command substitution (`...`)');
    } else {
      // Globs and braces expand to words of their own, a tilde to a home directory: known only when the line runs.
      if (c !== '~' || cursor.i === start || previous === '=' || previous === ':') literal = false;
      value += c;
      cursor.i++;
      previous = c;
    }
  }
  const text = source.slice(start, cursor.i);
  const raw = text.includes('\\\n') ? text.replaceAll('\\\n', '') : text;
  // A lone `[` is the test command, which bash never reads as a glob.
  if (raw === '[') literal = true;
  return { text, raw, value: literal ? value : undefined };
}

// The value of a double-quoted part at the cursor (on its opening quote), or undefined when it holds a variable.
function doubleQuoted(cursor: Cursor): string | undefined {
  cursor.i++;
  let value = '';
  let literal = true;
  for (;;) {
    const c = cursor.peek();
    if (c === undefined) unsupported('an unterminated quote');
    if (c === '"') {
      cursor.i++;
      return literal ? value : undefined;
    }
    if (c === '\\') {
      const escaped = cursor.source[cursor.i + 1];
      if (escaped !== undefined && '$`"\\'.includes(escaped)) {
        value += escaped;
        cursor.i += 2;
      } else {
        value += c;
        cursor.i++;
      }
    } else if (c === '$') {
      const expanded = dollar(cursor, true);
      if (expanded === undefined) literal = false;
      else value += expanded;
    } else if (c === '`') {
      unsupported('command substitution (`...`)');
    } else {
      value += c;
      cursor.i++;
    }
  }
}

// A `$` at the cursor: a plain variable (undefined: its value is not known), a literal `$'...'` or `$`, or a refusal.
function dollar(cursor: Cursor, quoted: boolean): string | undefined {
  cursor.i++;
  const c = cursor.peek();
  if (c !== undefined && NAME_START.test(c)) {
    while (NAME_PART.test(cursor.peek() ?? '')) cursor.i++;
    return undefined;
  }
  if (c !== undefined && (/[0-9]/.test(c) || SPECIAL_PARAMETERS.has(c))) {
    cursor.i++;
    return undefined;
  }
  if (c === '{') return braced(cursor);
  if (c === '(') return unsupported(cursor.after() === '(' ? 'arithmetic expansion ($((...)))' : 'command substitution ($(...))');
  if (c === '[') return unsupported('arithmetic expansion ($[...])');
  if (c === "'" && !quoted) return ansiC(cursor);
  if (c === '"' && !quoted) return unsupported('a translated string ($"...")');
  if (LITERAL_DOLLAR_BEFORE.has(c) || (quoted && c === '"')) return '$';
  return unsupported(`a "$" before "${c}"`);
}

// `${NAME}`, `${1}`, `${?}`: anything else inside the braces is an operator bash evaluates.
function braced(cursor: Cursor): undefined {
  cursor.i++;
  const c = cursor.peek() ?? '';
  if (NAME_START.test(c)) {
    while (NAME_PART.test(cursor.peek() ?? '')) cursor.i++;
  } else if (/[0-9]/.test(c)) {
    while (/[0-9]/.test(cursor.peek() ?? '')) cursor.i++;
  } else if (SPECIAL_PARAMETERS.has(c) && cursor.after() === '}') {
    cursor.i++;
  }
  if (cursor.peek() !== '}') unsupported('parameter expansion with an operator (${...})');
  cursor.i++;
  return undefined;
}

// `$'...'`: bash decodes escapes in it; without any, it is the text between the quotes.
function ansiC(cursor: Cursor): string {
  const end = cursor.source.indexOf("'", cursor.i + 1);
  if (end < 0) unsupported('an unterminated quote');
  const inner = cursor.source.slice(cursor.i + 1, end);
  if (inner.includes('\\')) unsupported("an escape inside $'...'");
  cursor.i = end + 1;
  return inner;
}
