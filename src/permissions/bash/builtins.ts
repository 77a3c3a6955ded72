import { plainArithmetic, plainName } from './arith.js';
import { dangerousVariable, variableOf } from './names.js';
import type { ShellWord } from './words.js';

// Builtins that set variables; the options of each that take a value, and the one that names an array.
const DECLARATIONS = new Set(['declare', 'typeset', 'local', 'export', 'readonly']);
const NAMED: Readonly<Record<string, { readonly valued: string; readonly array?: string; readonly refused?: string }>> = {
  read: { valued: 'adinNptu', array: 'a' },
  // unset evaluates the subscript of an element it unsets.
  unset: { valued: '' },
  // mapfile -C runs its callback, a command line the rules never see.
  mapfile: { valued: 'CcdnOsu', refused: 'C' },
  readarray: { valued: 'CcdnOsu', refused: 'C' },
};
// Builtins refused under rules whatever the rules say, and why: they run text as code, or change how bash reads what follows.
const REFUSED: Readonly<Record<string, string>> = {
  eval: 'it runs its arguments as code',
  source: 'it runs a file as code',
  '.': 'it runs a file as code',
  trap: 'it runs its argument as code later',
  fc: 'it runs commands from the history in an editor',
  bind: 'it binds keys to commands',
  complete: 'it runs commands to complete words',
  compgen: 'it runs commands to complete words',
  shopt: 'it changes how bash reads the rest of the line',
  enable: 'it loads builtins from files',
  hash: 'it changes which program a name runs',
  alias: 'it changes what a command name means',
  unalias: 'it changes what a command name means',
};
// `set` options that change neither how the line is read nor what runs: -e, -u and -o pipefail, errexit, nounset.
const SAFE_SET_LETTERS = /^[-+][eu]*(o?)$/;
const SAFE_SET_OPTIONS = new Set(['pipefail', 'errexit', 'nounset']);

/**
 * Why a builtin is refused under rules whatever they allow: it evaluates text as code (eval, source,
 * trap...) or changes how bash reads the rest of the line (shopt, set with options other than -e, -u
 * and -o pipefail); undefined for any other command.
 */
export function refusedBuiltin(words: readonly ShellWord[]): string | undefined {
  const name = words[0]?.value ?? '';
  const why = REFUSED[name];
  if (why !== undefined) return `${name} is not allowed under permission rules: ${why}`;
  if (name === 'set' && !safeSet(words.slice(1))) {
    return 'set with options other than -e, -u and -o pipefail, errexit or nounset is not allowed under permission rules: they change how bash reads the line';
  }
  return undefined;
}

/** Whether `set` with these arguments only turns on or off -e, -u or pipefail (or sets the positional parameters after `--`). */
export function safeSet(args: readonly ShellWord[]): boolean {
  for (let i = 0; i < args.length; i++) {
    const value = args[i]?.value;
    if (value === undefined) return false;
    if (value === '--') return true;
    const letters = SAFE_SET_LETTERS.exec(value);
    if (letters === null || value.length < 2) return false;
    if (letters[1] === 'o' && !SAFE_SET_OPTIONS.has(args[++i]?.value ?? '')) return false;
  }
  return true;
}

const ASSIGNMENT_TEXT = /^[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=/;

/**
 * Why a builtin would evaluate a variable's value as code or change what later commands run, or
 * undefined. `let` is arithmetic; `declare -i` and `-n` make later values evaluated; names given to
 * `read`, `printf -v`, `mapfile`, `getopts`, `test -v` and the declaration builtins evaluate a
 * subscript; some names (PATH, LD_PRELOAD...) change which code later commands load.
 */
export function builtinRefusal(words: readonly ShellWord[]): string | undefined {
  const name = words[0]?.value ?? '';
  const args = words.slice(1);
  if (name === 'let') {
    const bad = args.find((word) => word.value === undefined || !plainArithmetic(word.value, true));
    return bad === undefined ? undefined : `let on anything but numbers (${bad.text}) is refused: bash evaluates the variables in it as code`;
  }
  if (DECLARATIONS.has(name)) return declaration(name, args);
  if (name === 'printf') {
    const at = args.findIndex((word) => word.value?.startsWith('-v') === true);
    const target = args[at];
    if (at < 0 || target === undefined) return undefined;
    return target.value === '-v'
      ? variableRefusal(name, args[at + 1], true)
      : variableRefusal(name, { text: target.text, value: target.value?.slice(2) }, true);
  }
  if (name === 'getopts') return variableRefusal(name, args[1], true);
  // wait -p NAME sets a variable.
  if (name === 'wait') {
    const at = args.findIndex((word) => word.value === undefined || /^-[fn]*p/.test(word.value));
    return at < 0 ? undefined : variableRefusal(name, args[at]?.value?.endsWith('p') === true ? args[at + 1] : args[at], true);
  }
  if (name === 'test' || name === '[') {
    const at = args.findIndex((word) => word.value === '-v' || word.value === '-R');
    return at < 0 ? undefined : variableRefusal(name, args[at + 1], false);
  }
  const named = NAMED[name];
  return named === undefined ? undefined : namedOperands(name, named, args);
}

function declaration(name: string, args: readonly ShellWord[]): string | undefined {
  for (const word of args) {
    const value = word.value;
    if (value === '--') continue;
    if (value !== undefined && /^[-+][a-zA-Z]+$/.test(value)) {
      if (name !== 'export' && /[in]/.test(value)) return `${name} ${value} is refused: bash would evaluate the values given to the variable later as code`;
      continue;
    }
    // NAME=$value is fine (the value is data); a word that is not literal may expand to an option or a name.
    const assigned = value ?? ASSIGNMENT_TEXT.exec(word.text)?.[0];
    if (assigned === undefined) return `the arguments of ${name} are not literal (${word.text})`;
    const refusal = variableRefusal(name, { text: word.text, value: assigned.replace(/\+?=.*$/s, '') }, assigned.includes('='));
    if (refusal !== undefined) return refusal;
  }
  return undefined;
}

function namedOperands(name: string, spec: (typeof NAMED)[string], args: readonly ShellWord[]): string | undefined {
  for (let i = 0; i < args.length; i++) {
    const word = args[i] as ShellWord;
    const value = word.value;
    if (value === '--')
      return args
        .slice(i + 1)
        .map((operand) => variableRefusal(name, operand, true))
        .find((refusal) => refusal !== undefined);
    if (value === undefined || !value.startsWith('-') || value.length < 2) {
      const refusal = variableRefusal(name, word, true);
      if (refusal !== undefined) return refusal;
      continue;
    }
    for (let at = 1; at < value.length; at++) {
      const letter = value[at] as string;
      if (spec.refused?.includes(letter) === true) return `${name} -${letter} is refused: it runs a command line the rules do not see`;
      if (!spec.valued.includes(letter)) continue;
      const attached = value.slice(at + 1);
      const operand = attached === '' ? args[++i] : { text: attached, value: attached };
      if (letter === spec.array) {
        const refusal = variableRefusal(name, operand, true);
        if (refusal !== undefined) return refusal;
      }
      break;
    }
  }
  return undefined;
}

// A variable a builtin sets or reads by name: literal, without a subscript bash would evaluate, and, when set, not one that changes what runs.
function variableRefusal(builtin: string, word: ShellWord | undefined, sets: boolean): string | undefined {
  if (word === undefined) return undefined;
  if (word.value === undefined) return `the variable name given to ${builtin} is not literal (${word.text})`;
  if (!plainName(word.value)) return `the variable name ${word.text} given to ${builtin} is refused: bash evaluates a subscript as arithmetic`;
  const variable = variableOf(word.value) ?? '';
  if (sets && dangerousVariable(variable)) return `setting ${variable} (${builtin} ${word.text}) is refused: it changes what later commands run`;
  return undefined;
}
