import { programName } from './bash-rules-match.js';
import type { ShellWord } from './bash-rules-words.js';

/** What a simple command runs, one layer down. */
export type Unwrapped =
  /** A wrapper (`env X=1`, `timeout 5`, `nohup`...) around these words, the command it runs, with the variables it sets for it (env's `NAME=value`). */
  | { readonly kind: 'inner'; readonly words: readonly ShellWord[]; readonly assignments: readonly string[] }
  /** Not a wrapper: the words are the command that runs. */
  | { readonly kind: 'plain' }
  /** Runs no command at all (`exec >log`, `eval`). */
  | { readonly kind: 'nothing' }
  /** A shell reading a command line from its arguments (`bash -c STR`, `eval ARGS`): that line runs. */
  | { readonly kind: 'line'; readonly line: string; readonly via: string }
  | { readonly kind: 'refused'; readonly reason: string };

interface OptionSpec {
  /** Short options without a value, which may be grouped (`-fw`). */
  readonly flags: string;
  /** Short options taking a value, attached (`-oL`) or as the next word (`-o L`). */
  readonly valued: string;
  readonly long: readonly string[];
  /** Long options taking a value, `--name=value` or `--name value`. */
  readonly longValued: readonly string[];
  /** `-10`, as `nice` takes it. */
  readonly numeric?: boolean;
  /** `+o name`, as shells take it: the same letters after `+`. */
  readonly plus?: boolean;
  /** A lone `-` as an option. */
  readonly dash?: boolean;
}

interface Wrapper {
  readonly options: OptionSpec;
  /** What comes between the options and the command. */
  readonly operands?: 'assignments' | 'duration';
  /** Options after which the wrapper runs nothing but itself (`command -v`): matched as a plain command. */
  readonly queries?: string;
  /** What the wrapper alone (no command after it) is: a command of its own, or nothing that runs. */
  readonly alone: 'plain' | 'nothing';
}

const NO_OPTIONS: OptionSpec = { flags: '', valued: '', long: [], longValued: [] };

// The commands whose job is to run the command after them. setsid is one: it only starts the
// command in a new session. Commands that run commands taken from elsewhere in their arguments
// (xargs, find -exec, sudo, watch) are not: they need rules of their own, and allowing them allows
// whatever they run.
const WRAPPERS: Readonly<Record<string, Wrapper>> = {
  env: {
    options: { flags: '0iv', valued: 'uC', long: ['ignore-environment', 'null', 'debug'], longValued: ['unset', 'chdir'], dash: true },
    operands: 'assignments',
    alone: 'plain',
  },
  command: { options: { ...NO_OPTIONS, flags: 'pvV' }, queries: 'vV', alone: 'nothing' },
  exec: { options: { ...NO_OPTIONS, flags: 'cl', valued: 'a' }, alone: 'nothing' },
  builtin: { options: NO_OPTIONS, alone: 'nothing' },
  nohup: { options: NO_OPTIONS, alone: 'plain' },
  time: { options: { ...NO_OPTIONS, flags: 'p' }, alone: 'nothing' },
  nice: { options: { ...NO_OPTIONS, valued: 'n', longValued: ['adjustment'], numeric: true }, alone: 'plain' },
  timeout: {
    options: { flags: 'v', valued: 'sk', long: ['preserve-status', 'foreground', 'verbose'], longValued: ['signal', 'kill-after'] },
    operands: 'duration',
    alone: 'plain',
  },
  stdbuf: { options: { ...NO_OPTIONS, valued: 'ioe', longValued: ['input', 'output', 'error'] }, alone: 'plain' },
  setsid: { options: { ...NO_OPTIONS, flags: 'cfw', long: ['ctty', 'fork', 'wait'] }, alone: 'plain' },
};

// Shells that run a command line given as an argument with -c. Their options, as far as the rules
// read them: an option outside this list (-i, which reads startup files and turns on aliases; -s)
// is refused.
const SHELLS = new Set(['bash', 'sh', 'zsh', 'dash']);
const SHELL_OPTIONS: OptionSpec = {
  flags: 'abcefhklmnptuvxBCEHPT',
  valued: 'oO',
  long: ['login', 'noprofile', 'norc', 'posix', 'noediting'],
  longValued: [],
  plus: true,
};

const DURATION = /^(\d+\.?\d*|\.\d+)[smhd]?$/;
const ASSIGNMENT = /^([A-Za-z_][A-Za-z0-9_]*)=/;

/** One layer of a simple command: the command a wrapper runs, the line a shell runs, or the command itself. */
export function unwrapCommand(words: readonly ShellWord[]): Unwrapped {
  const name = programName(words[0]?.value ?? '');
  if (SHELLS.has(name)) return shellLine(name, words);
  if (name === 'eval') return evalLine(words);
  if (name === 'trap') return trapLine(words);
  const wrapper = WRAPPERS[name];
  if (wrapper === undefined) return { kind: 'plain' };
  const scanned = scanOptions(name, wrapper.options, words);
  if ('reason' in scanned) return { kind: 'refused', reason: scanned.reason };
  if (wrapper.queries !== undefined && [...scanned.letters].some((letter) => wrapper.queries?.includes(letter))) return { kind: 'plain' };
  let next = scanned.next;
  const assignments: string[] = [];
  if (wrapper.operands === 'assignments') {
    for (let set = ASSIGNMENT.exec(words[next]?.value ?? ''); set !== null; set = ASSIGNMENT.exec(words[++next]?.value ?? ''))
      assignments.push(set[1] as string);
  } else if (wrapper.operands === 'duration' && words[next]?.value !== undefined) {
    const duration = words[next] as ShellWord;
    if (!DURATION.test(duration.value as string)) return { kind: 'refused', reason: `the rules cannot read the duration of ${name} (${duration.text})` };
    next++;
  }
  const first = words[next];
  if (first === undefined) return { kind: wrapper.alone };
  // Not literal, it may be an option, an operand or several words: what runs is unknown.
  if (first.value === undefined) return { kind: 'refused', reason: notLiteralReason(name, first) };
  return { kind: 'inner', words: words.slice(next), assignments };
}

function shellLine(name: string, words: readonly ShellWord[]): Unwrapped {
  const scanned = scanOptions(name, SHELL_OPTIONS, words);
  if ('reason' in scanned) return { kind: 'refused', reason: scanned.reason };
  const line = words[scanned.next];
  const withString = scanned.letters.has('c');
  // A word that is not literal may split into options (-c and a string of its choosing).
  if (line !== undefined && line.value === undefined) {
    return { kind: 'refused', reason: withString ? `the command string of ${name} -c is not literal (${line.text})` : notLiteralReason(name, line) };
  }
  // Without -c the shell runs a script file or its standard input, which the rules cannot see: a command like any other.
  if (!withString) return { kind: 'plain' };
  if (line?.value === undefined) return { kind: 'refused', reason: `${name} -c has no command string` };
  return { kind: 'line', line: line.value, via: `${name} -c` };
}

function evalLine(words: readonly ShellWord[]): Unwrapped {
  const args = words[1]?.value === '--' ? words.slice(2) : words.slice(1);
  const dynamic = args.find((word) => word.value === undefined);
  if (dynamic !== undefined) return { kind: 'refused', reason: `the arguments of eval are not literal (${dynamic.text})` };
  if (args.length === 0) return { kind: 'nothing' };
  return { kind: 'line', line: args.map((word) => word.value).join(' '), via: 'eval' };
}

// `trap 'cmd' EXIT` runs cmd later: a line like eval's. `trap -p`, `trap -l`, `trap - INT` and `trap INT` run nothing.
function trapLine(words: readonly ShellWord[]): Unwrapped {
  const args = words[1]?.value === '--' ? words.slice(2) : words.slice(1);
  const action = args[0];
  if (action === undefined || args.length === 1 || action.value === '-' || action.value === '-p' || action.value === '-l') return { kind: 'plain' };
  if (action.value === undefined) return { kind: 'refused', reason: `the command string of trap is not literal (${action.text})` };
  return { kind: 'line', line: action.value, via: 'trap' };
}

function notLiteralReason(name: string, word: ShellWord): string {
  return `the arguments of ${name} are not literal (${word.text})`;
}

// Reads GNU-style options from words[1]; `next` is the first word after them, or the first that is not literal.
function scanOptions(name: string, spec: OptionSpec, words: readonly ShellWord[]): { next: number; letters: Set<string> } | { reason: string } {
  const letters = new Set<string>();
  const unreadable = (option: string) => ({ reason: `the rules cannot read the options of ${name} (${option})` });
  let i = 1;
  for (; i < words.length; i++) {
    const value = (words[i] as ShellWord).value;
    if (value === undefined) break;
    if (value === '--') return { next: i + 1, letters };
    // `env -` is `env -i`.
    if (value === '-' && spec.dash === true) continue;
    if (value.startsWith('--')) {
      const [option = '', attached] = value.slice(2).split(/=(.*)/s);
      if (spec.long.includes(option) && attached === undefined) continue;
      if (!spec.longValued.includes(option)) return unreadable(value);
      if (attached === undefined && !literalAt(words, ++i)) return unreadable(value);
      continue;
    }
    if (!(value.length > 1 && (value.startsWith('-') || (spec.plus === true && value.startsWith('+'))))) break;
    if (spec.numeric === true && /^-\d+$/.test(value)) continue;
    for (let at = 1; at < value.length; at++) {
      const letter = value[at] as string;
      letters.add(letter);
      if (spec.valued.includes(letter)) {
        if (at === value.length - 1 && !literalAt(words, ++i)) return unreadable(value);
        break;
      }
      if (!spec.flags.includes(letter)) return unreadable(value);
    }
  }
  return { next: i, letters };
}

function literalAt(words: readonly ShellWord[], i: number): boolean {
  return words[i]?.value !== undefined;
}
