import { HereDocuments } from './here-documents.js';
import { Cursor, lexWord, METACHARACTERS, unsupported, Unsupported, type LexedWord } from './lexer.js';
import type { ShellWord } from './words.js';

/** What a redirection does with its target: opens a path to read, write or both, duplicates a descriptor, or feeds text. */
export type RedirectAccess = 'read' | 'write' | 'read-write' | 'descriptor' | 'text';

/** A redirection as written: the operator, and the target after quote removal (a path for file access). */
export interface Redirect {
  readonly operator: string;
  readonly target: ShellWord;
  readonly access: RedirectAccess;
}

/** A variable a command sets: before it (`LANG=C git status`), or alone (`x=1`). */
export interface Assignment {
  readonly name: string;
  readonly value: ShellWord;
}

/** A simple command: its text as written, its words, the variables set before it and its redirections. No words: assignments or redirections alone. */
export interface SimpleCommand {
  readonly text: string;
  readonly words: readonly ShellWord[];
  readonly assignments: readonly Assignment[];
  readonly redirects: readonly Redirect[];
}

/** A line read whole (its simple commands in source order), or why it is refused. */
export type ParsedLine =
  | { readonly kind: 'commands'; readonly commands: readonly SimpleCommand[] }
  | { readonly kind: 'refused'; readonly reason: string }
  | { readonly kind: 'too-many' };

/** Deepest nesting of subshells and groups read. */
export const MAX_GROUPS = 64;

// Reserved words that open constructs the rules do not model, as a refusal names them.
const CONSTRUCTS: Readonly<Record<string, string>> = {
  if: 'an if statement',
  then: 'an if statement',
  elif: 'an if statement',
  else: 'an if statement',
  fi: 'an if statement',
  case: 'a case statement',
  esac: 'a case statement',
  for: 'a for loop',
  select: 'a select loop',
  while: 'a while loop',
  until: 'an until loop',
  do: 'a loop',
  done: 'a loop',
  in: 'a for loop or a case statement',
  function: 'a function definition',
  coproc: 'a coprocess',
  '[[': 'a [[ ]] test (use [ ] or test)',
  ']]': 'a [[ ]] test (use [ ] or test)',
  '}': 'an unmatched "}"',
};
const ASSIGNMENT = /^([A-Za-z_][A-Za-z0-9_]*)\+?=/;
const ARRAY_ELEMENT = /^[A-Za-z_][A-Za-z0-9_]*\[/;

/**
 * Reads a whole line in the subset of bash the rules model: lists (`;`, `&`, `&&`, `||`, newlines),
 * pipelines (`|`, `|&`, `!`, `time`), subshells and groups, simple commands of the words `lexWord`
 * reads, assignments before them, redirections, and here-documents whose bodies are plain text.
 * Linear in the length of the line; at most `max` simple commands.
 */
export function parseLine(source: string, max: number): ParsedLine {
  const parser = new LineParser(source, max);
  try {
    parser.list(undefined, 0);
    return { kind: 'commands', commands: parser.commands };
  } catch (err) {
    if (err instanceof TooMany) return { kind: 'too-many' };
    if (err instanceof Unsupported) return { kind: 'refused', reason: err.message };
    throw err;
  }
}

class TooMany extends Error {}

class LineParser {
  readonly commands: SimpleCommand[] = [];
  private readonly cursor: Cursor;
  private readonly hereDocuments = new HereDocuments();

  constructor(
    source: string,
    private readonly max: number,
  ) {
    this.cursor = new Cursor(source);
  }

  // Commands up to the end of the line, or to the `)` or `}` that closes a subshell or group (not consumed).
  list(closer: ')' | '}' | undefined, depth: number): void {
    const cursor = this.cursor;
    let count = 0;
    for (;;) {
      this.blanks(true);
      const c = cursor.peek();
      if (c === undefined) {
        if (closer !== undefined) unsupported(`an unclosed "${closer === ')' ? '(' : '{'}"`);
        return;
      }
      if ((closer === ')' && c === ')') || (closer === '}' && this.nextWord() === '}')) {
        if (count === 0) unsupported(`an empty "${closer === ')' ? '( )' : '{ }'}"`);
        return;
      }
      this.andOr(depth);
      count++;
      this.blanks(false);
      const separator = cursor.peek();
      if (separator === ';') {
        if (cursor.after() === ';' || cursor.after() === '&') unsupported('a case statement');
        cursor.skip();
      } else if (separator === '&') {
        cursor.skip();
      } else if (separator === '\n') {
        this.newline();
      } else if (separator !== undefined && !(closer === ')' && separator === ')')) {
        unsupported(`"${separator}" where a command should end`);
      }
    }
  }

  private andOr(depth: number): void {
    const cursor = this.cursor;
    this.pipeline(depth);
    for (;;) {
      this.blanks(false);
      const c = cursor.peek();
      if ((c !== '&' && c !== '|') || cursor.after() !== c) return;
      cursor.skip();
      cursor.skip();
      this.linebreaks();
      this.pipeline(depth);
    }
  }

  private pipeline(depth: number): void {
    const cursor = this.cursor;
    this.blanks(false);
    if (this.nextWord() === 'time') {
      // Bash's time keyword takes -p, then --, before the pipeline it times.
      this.skipWord();
      this.blanks(false);
      if (this.nextWord() === '-p') this.skipWord();
      this.blanks(false);
      if (this.nextWord() === '--') this.skipWord();
    }
    this.blanks(false);
    if (this.nextWord() === '!') this.skipWord();
    this.command(depth);
    for (;;) {
      this.blanks(false);
      if (cursor.peek() !== '|' || cursor.after() === '|') return;
      cursor.skip();
      if (cursor.peek() === '&') cursor.skip();
      this.linebreaks();
      this.command(depth);
    }
  }

  private command(depth: number): void {
    const cursor = this.cursor;
    this.blanks(false);
    const start = cursor.i;
    const c = cursor.peek();
    if (c === '(' || this.nextWord() === '{') {
      if (c === '(' && cursor.after() === '(') unsupported('an arithmetic command ((( ... )))');
      if (depth >= MAX_GROUPS) unsupported(`nesting subshells and groups more than ${MAX_GROUPS} deep`);
      const closer = c === '(' ? ')' : '}';
      if (c === '(') cursor.skip();
      else this.skipWord();
      this.list(closer, depth + 1);
      if (closer === ')') cursor.skip();
      else this.skipWord();
      const redirects: Redirect[] = [];
      for (this.blanks(false); this.atRedirect(); this.blanks(false)) redirects.push(this.redirect());
      if (redirects.length > 0) this.add({ text: cursor.source.slice(start, cursor.i), words: [], assignments: [], redirects });
      return;
    }
    if (c === undefined || METACHARACTERS.has(c)) {
      if (c === '<' || c === '>' || (c === '&' && cursor.after() === '>')) return this.simple();
      unsupported(`${c === undefined ? 'the end of the line' : c === '\n' ? 'a newline' : `"${c}"`} where a command should be`);
    }
    const construct = CONSTRUCTS[this.nextWord()];
    if (construct !== undefined) unsupported(construct);
    this.simple();
  }

  private simple(): void {
    const cursor = this.cursor;
    const start = cursor.i;
    const words: ShellWord[] = [];
    const assignments: Assignment[] = [];
    const redirects: Redirect[] = [];
    for (;;) {
      this.blanks(false);
      const c = cursor.peek();
      if (c === undefined || c === '\n' || c === ';' || c === '|' || c === ')' || (c === '&' && cursor.after() !== '>')) break;
      if (this.atRedirect()) {
        redirects.push(this.redirect());
        continue;
      }
      if (c === '(') unsupported(words.length > 0 ? 'a "(" after a command name (a function definition)' : 'a "(" inside a command');
      const word = lexWord(cursor);
      const next = cursor.peek();
      if ((next === '<' || next === '>') && /^[0-9]+$/.test(word.raw)) {
        redirects.push(this.redirect());
        continue;
      }
      if ((next === '<' || next === '>') && word.raw.includes('{')) unsupported('a redirection to a descriptor variable ({name}>)');
      if (words.length === 0) {
        const assigned = ASSIGNMENT.exec(word.raw);
        if (assigned !== null) {
          if (next === '(') unsupported('an array assignment');
          assignments.push(assignment(word, assigned));
          continue;
        }
        if (ARRAY_ELEMENT.test(word.raw) && /\]\+?=/.test(word.raw)) unsupported('an array element assignment');
      }
      words.push({ text: word.text, value: word.value });
    }
    if (words.length + assignments.length + redirects.length === 0) unsupported('an empty command');
    // Shown as bash reads it, lines joined.
    this.add({ text: cursor.source.slice(start, cursor.i).replaceAll('\\\n', '').trim(), words, assignments, redirects });
  }

  private add(command: SimpleCommand): void {
    this.commands.push(command);
    if (this.commands.length > this.max) throw new TooMany();
  }

  private atRedirect(): boolean {
    const c = this.cursor.peek();
    return c === '<' || c === '>' || (c === '&' && this.cursor.after() === '>');
  }

  // A redirection at the cursor (its descriptor number, if any, already read).
  private redirect(): Redirect {
    const cursor = this.cursor;
    let operator = cursor.peek() as string;
    cursor.skip();
    const second = cursor.peek();
    if (second === '(') unsupported(`process substitution (${operator}(...))`);
    if (operator === '&') {
      cursor.skip();
      operator = cursor.peek() === '>' ? (cursor.skip(), '&>>') : '&>';
    } else if (operator === '>' && (second === '>' || second === '|' || second === '&')) {
      operator += second;
      cursor.skip();
    } else if (operator === '<' && (second === '<' || second === '>' || second === '&')) {
      operator += second;
      cursor.skip();
      const third = cursor.peek();
      if (operator === '<<' && (third === '<' || third === '-')) {
        operator += third;
        cursor.skip();
      }
    }
    this.blanks(false);
    const c = cursor.peek();
    if (c === undefined || METACHARACTERS.has(c)) unsupported(`a redirection (${operator}) without a target`);
    if (c === '#') unsupported(`a redirection (${operator}) whose target starts a comment`);
    const word = lexWord(cursor);
    const target = { text: word.text, value: word.value };
    if (operator === '<<' || operator === '<<-') return this.hereDocuments.open(operator, word);
    if (operator === '<<<') return { operator, target, access: 'text' };
    if (word.value === undefined) unsupported(`a redirection (${operator}) to a target that is not literal (${word.text})`);
    if (operator === '>&' || operator === '<&') {
      if (/^([0-9]+-?|-)$/.test(word.value)) return { operator, target, access: 'descriptor' };
      if (operator === '<&') unsupported(`a redirection (<&) to something other than a descriptor (${word.text})`);
      return { operator, target, access: 'write' };
    }
    return { operator, target, access: operator === '<' ? 'read' : operator === '<>' ? 'read-write' : 'write' };
  }

  // A newline token at the cursor: here-documents opened on the line end it with their bodies.
  private newline(): void {
    this.cursor.skip();
    this.hereDocuments.readBodies(this.cursor);
  }

  // Blanks and a comment; newlines too (and what follows them) when `newlines`.
  private blanks(newlines: boolean): void {
    const cursor = this.cursor;
    for (let c = cursor.peek(); c !== undefined; c = cursor.peek()) {
      if (c === ' ' || c === '\t') cursor.i++;
      else if (c === '#') {
        const end = cursor.source.indexOf('\n', cursor.i);
        cursor.i = end < 0 ? cursor.source.length : end;
      } else if (c === '\n' && newlines) this.newline();
      else return;
    }
  }

  // Newlines after `&&`, `||` and `|`, as bash allows before the next command.
  private linebreaks(): void {
    this.blanks(true);
  }

  // The next word's characters when it is plain (no quote, escape or expansion), else ''.
  private nextWord(): string {
    const cursor = this.cursor;
    const saved = cursor.i;
    let word = '';
    for (let c = cursor.peek(); c !== undefined && !METACHARACTERS.has(c); c = cursor.peek()) {
      if ('\'"\\$`'.includes(c)) {
        word = '';
        break;
      }
      word += c;
      cursor.i++;
    }
    cursor.i = saved;
    return word;
  }

  private skipWord(): void {
    lexWord(this.cursor);
  }
}

function assignment(word: LexedWord, assigned: RegExpExecArray): Assignment {
  const name = assigned[1] as string;
  const head = assigned[0].length;
  // The name and `=` are plain, so the value is what follows them; a tilde after `=` was already read as expanding.
  const text = word.text.slice(word.text.indexOf('=') + 1);
  const value = word.value === undefined ? undefined : word.value.slice(head);
  return { name, value: { text, value } };
}
