import { programName } from './match.js';
import type { ShellWord } from './words.js';

/** What a simple command runs, one layer down. */
export type Unwrapped =
  /** A wrapper (`env X=1`, `timeout 5`, `nohup`...) around these words, the command it runs, with the variables it sets for it (env's `NAME=value`). */
  | { readonly kind: 'inner'; readonly words: readonly ShellWord[]; readonly assignments: readonly string[] }
  /** Not a wrapper: the words are the command that runs. */
  | { readonly kind: 'plain' }
  /** Runs no command at all (`exec >log`). */
  | { readonly kind: 'nothing' }
  /** bash reading a command line from its arguments (`bash -c STR`): that line runs. */
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

// xargs runs its command with words it reads from its input appended: the words written are a prefix of what runs.
// -I, -i and -e replace or end on words of the input, --process-slot-var sets a variable: not read.
const XARGS: Wrapper = {
  options: {
    flags: '0prtx',
    valued: 'adELnPs',
    long: ['null', 'no-run-if-empty', 'verbose', 'interactive', 'exit', 'open-tty'],
    longValued: ['arg-file', 'delimiter', 'eof', 'max-lines', 'max-args', 'max-procs', 'max-chars'],
  },
  alone: 'plain',
};
/** The word standing for what xargs appends: not literal, so only a prefix rule (`:*`) can allow it, and any deny rule may match it. */
export const XARGS_INPUT: ShellWord = { text: '<words xargs reads>', value: undefined };

// Programs that run a command given in their arguments, with options the rules do not read: refused, as
// what they run would otherwise pass unseen (a deny rule on the command they run would not apply).
const RUNNERS = new Set([
  'sudo',
  'doas',
  'su',
  'runuser',
  'sg',
  'chroot',
  'unshare',
  'nsenter',
  'setpriv',
  'ionice',
  'chrt',
  'taskset',
  'numactl',
  'prlimit',
  'flock',
  'script',
  'watch',
  'parallel',
  'strace',
  'ltrace',
  'valgrind',
  'gdb',
  'unbuffer',
  'firejail',
  'bwrap',
  'systemd-run',
  'setarch',
  'fakeroot',
  'proot',
]);

// bash -c runs a line the rules read in turn. Its options, as far as the rules read them: -o, -O and +O
// change how the line is read, -i and -l read startup files, -s reads standard input: refused.
const BASH_OPTIONS: OptionSpec = { flags: 'ceuxv', valued: '', long: ['noprofile', 'norc'], longValued: [] };
const SCRIPT_REFUSAL = (shell: string): string =>
  `${shell} running a script or its standard input is not allowed under permission rules: the rules cannot read the commands it runs`;
// Shells whose grammar is not bash's: their command strings are not read, so their options are not either.
const OTHER_SHELLS = new Set(['sh', 'dash', 'ash', 'zsh', 'ksh', 'mksh', 'yash', 'fish', 'csh', 'tcsh', 'busybox']);

// Where the system's programs live: a path there is the program its name says.
const SYSTEM_PROGRAM = /^\/(usr\/(local\/)?)?s?bin\/[^/]+$/;
const DURATION = /^(\d+\.?\d*|\.\d+)[smhd]?$/;
// env takes every word with a `=` before its command as an assignment, whatever the name (`LAN!G=C`, `=x`).
const ASSIGNMENT = /^([^=]*)=/s;

/** One layer of a simple command: the command a wrapper runs, the line a shell runs, or the command itself. */
export function unwrapCommand(words: readonly ShellWord[]): Unwrapped {
  const written = words[0]?.value ?? '';
  const name = programName(written);
  const special = name === 'bash' || name === 'xargs' || OTHER_SHELLS.has(name) || RUNNERS.has(name) || WRAPPERS[name] !== undefined;
  // `./env ls` runs whatever ./env is: only the system's copies are read as what their name says.
  if (special && written.includes('/') && !SYSTEM_PROGRAM.test(written)) {
    return { kind: 'refused', reason: `${written} is not allowed under permission rules: it is named like ${name} but is not the system's` };
  }
  if (name === 'bash') return shellLine(name, words);
  if (OTHER_SHELLS.has(name)) return otherShell(name, words);
  if (RUNNERS.has(name)) return { kind: 'refused', reason: `${name} is not allowed under permission rules: it runs a command the rules do not read` };
  const wrapper = name === 'xargs' ? XARGS : WRAPPERS[name];
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
  if (name === 'xargs')
    return { kind: 'inner', words: [...(first === undefined ? [{ text: 'echo', value: 'echo' }] : words.slice(next)), XARGS_INPUT], assignments };
  if (first === undefined) return { kind: wrapper.alone };
  // Not literal, it may be an option, an operand or several words: what runs is unknown.
  if (first.value === undefined) return { kind: 'refused', reason: notLiteralReason(name, first) };
  return { kind: 'inner', words: words.slice(next), assignments };
}

function shellLine(name: string, words: readonly ShellWord[]): Unwrapped {
  const scanned = scanOptions(name, BASH_OPTIONS, words);
  if ('reason' in scanned) return { kind: 'refused', reason: scanned.reason };
  const line = words[scanned.next];
  const withString = scanned.letters.has('c');
  // A word that is not literal may split into options (-c and a string of its choosing).
  if (line !== undefined && line.value === undefined) {
    return { kind: 'refused', reason: withString ? `the command string of ${name} -c is not literal (${line.text})` : notLiteralReason(name, line) };
  }
  // Without -c the shell runs a script file or its standard input, whose commands the rules cannot read.
  if (!withString) return { kind: 'refused', reason: SCRIPT_REFUSAL(name) };
  if (line?.value === undefined) return { kind: 'refused', reason: `${name} -c has no command string` };
  return { kind: 'line', line: line.value, via: `${name} -c` };
}

function otherShell(name: string, words: readonly ShellWord[]): Unwrapped {
  const option = words.slice(1).find((word) => word.value === undefined || word.value.startsWith('-') || word.value.startsWith('+'));
  if (option === undefined) return { kind: 'refused', reason: SCRIPT_REFUSAL(name) };
  return { kind: 'refused', reason: `the rules read command strings with bash's grammar only, not ${name}'s (${option.text}): use bash -c` };
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
