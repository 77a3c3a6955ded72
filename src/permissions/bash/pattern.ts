import { expansionAt, SHELL_KEYWORDS } from './words.js';

/** A Bash rule's specifier, parsed: its words, and whether more words may follow (`:*`). */
export interface CommandPattern {
  readonly text: string;
  readonly words: readonly string[];
  readonly prefix: boolean;
}

const OPERATORS = new Set([';', '&', '|', '<', '>', '(', ')', '\n']);
const ASSIGNMENT = /^[A-Za-z_][A-Za-z0-9_]*\+?=/;

/**
 * Parses the text inside `Bash(...)`: `git status` (that command exactly) or `npm run test:*` (those
 * first words, then anything or nothing). Words split as the shell splits a literal line, quotes
 * included (`Bash(git commit -m 'wip')`). Throws an Error naming the problem for a malformed rule:
 * empty, `*` anywhere but a final `:*`, an unterminated quote, an operator, an expansion.
 */
export function parseCommandPattern(text: string): CommandPattern {
  const trimmed = text.trim();
  const prefix = trimmed.endsWith(':*');
  const body = prefix ? trimmed.slice(0, -2) : trimmed;
  if (trimmed === '') throw new Error('the Bash rule is empty');
  if (body.trim() === '') throw new Error(`the Bash rule "${trimmed}" names no command before ":*"`);
  const { words, bareFirst } = splitWords(body, trimmed);
  const first = words[0];
  if (first === undefined || first === '') throw new Error(`the Bash rule "${trimmed}" names no command`);
  if (bareFirst && ASSIGNMENT.test(first)) {
    throw new Error(`the Bash rule "${trimmed}" starts with an assignment (${first}), which is not part of the command it matches: name the command`);
  }
  if (bareFirst && SHELL_KEYWORDS.has(first)) {
    throw new Error(`the Bash rule "${trimmed}" starts with the shell keyword "${first}", which runs nothing itself: name the commands it runs`);
  }
  return { text: trimmed, words, prefix };
}

// Splits like the shell splits a literal line, refusing anything that is not literal.
function splitWords(body: string, rule: string): { words: string[]; bareFirst: boolean } {
  const words: string[] = [];
  let word: string | undefined;
  let raw = ''; // the word's unquoted characters so far, to place a tilde
  let bareFirst = true;
  let previous: string | undefined;
  const fail = (what: string): never => {
    throw new Error(`the Bash rule "${rule}" ${what}`);
  };
  for (let i = 0; i < body.length; i++) {
    const c = body[i] as string;
    if (c === ' ' || c === '\t') {
      if (word !== undefined) words.push(word);
      word = undefined;
      raw = '';
      previous = undefined;
      continue;
    }
    if (c === '*') fail('has a "*" that is not its end: only a final ":*" (npm run test:*) matches more words');
    if (OPERATORS.has(c)) fail(`has an unquoted ${c === '\n' ? 'newline' : `"${c}"`}: a rule is one simple command`);
    if (c === '#' && word === undefined) fail('has an unquoted "#", which starts a comment');
    if (c === "'") {
      const end = body.indexOf("'", i + 1);
      if (end < 0) fail("has an unterminated ' quote");
      word = (word ?? '') + body.slice(i + 1, end);
      if (words.length === 0) bareFirst = false;
      i = end;
      previous = undefined;
      continue;
    }
    if (c === '"') {
      const { value, end } = doubleQuoted(body, i + 1, fail);
      word = (word ?? '') + value;
      if (words.length === 0) bareFirst = false;
      i = end;
      previous = undefined;
      continue;
    }
    if (c === '\\') {
      if (i + 1 >= body.length) fail('ends with a lone backslash');
      const next = body[++i] as string;
      if (next !== '\n') word = (word ?? '') + next;
      previous = undefined;
      continue;
    }
    const expansion = expansionAt(raw + c, raw.length, previous, word === undefined);
    if (expansion !== undefined) fail(`has an unquoted "${c}" (${expansion}): a rule's words are literal, so quote it`);
    word = (word ?? '') + c;
    raw += c;
    previous = c;
  }
  if (word !== undefined) words.push(word);
  return { words, bareFirst };
}

// The value of a double-quoted part starting after its opening quote, and the index of its closing quote.
function doubleQuoted(body: string, start: number, fail: (what: string) => never): { value: string; end: number } {
  let value = '';
  for (let i = start; i < body.length; i++) {
    const c = body[i] as string;
    if (c === '"') return { value, end: i };
    if (c === '\\' && i + 1 < body.length && '$`"\\\n'.includes(body[i + 1] as string)) {
      if (body[i + 1] !== '\n') value += body[i + 1];
      i++;
      continue;
    }
    if (c === '$' || c === '`') fail(`has "${c}" inside double quotes (an expansion): a rule's words are literal, so use single quotes`);
    value += c;
  }
  return fail('has an unterminated " quote');
}
