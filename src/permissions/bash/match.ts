import type { CommandPattern } from './pattern.js';
import type { ShellWord } from './words.js';

/** The last part of a command name (`/usr/bin/env` is `env`): what says which program runs. */
export function programName(name: string): string {
  return name.slice(name.lastIndexOf('/') + 1);
}

/**
 * Whether an allow rule matches the words exactly as written: each word the rule fixes must be
 * literal and equal (`npm run $T` never matches `npm run test:*`); a prefix rule lets any words follow.
 */
export function allowMatches(pattern: CommandPattern, words: readonly ShellWord[]): boolean {
  if (pattern.prefix ? words.length < pattern.words.length : words.length !== pattern.words.length) return false;
  return pattern.words.every((word, i) => words[i]?.value === word);
}

/**
 * Whether a deny rule could match the words when they run. Deny wins, so doubt counts against the
 * command: a word that is not literal may expand to the rule's word (or to several words, or to
 * none), and the command name is compared by its last part (`/usr/bin/curl` is `curl`).
 */
export function denyMatches(pattern: CommandPattern, words: readonly ShellWord[]): boolean {
  for (const [i, fixed] of pattern.words.entries()) {
    const word = words[i];
    if (word === undefined) return false;
    if (word.value === undefined) return true;
    if (i === 0 ? programName(word.value) !== programName(fixed) : word.value !== fixed) return false;
  }
  return pattern.prefix || words.slice(pattern.words.length).every((word) => word.value === undefined);
}
