import { builtinRefusal, refusedBuiltin, safeSet } from './builtins.js';
import { allowMatches, denyMatches, programName } from './match.js';
import { dangerousVariable, harmlessVariable, HARMLESS_SHOWN, localVariable } from './names.js';
import { parseLine, type Redirect, type SimpleCommand } from './parser.js';
import type { CommandPattern } from './pattern.js';
import { unwrapCommand } from './wrappers.js';
import { SHELL_KEYWORDS, type ShellWord } from './words.js';

/** Longest line checked under rules, in UTF-8 bytes: reading is linear, and the costliest 64 KiB line takes about 10 ms. */
export const MAX_LINE_BYTES = 65_536;
/** Most simple commands one line may run, counting those inside `bash -c`. */
export const MAX_COMMANDS = 1_000;
/** Deepest nesting of `bash -c` inside one another. */
export const MAX_NESTING = 8;
/** Longest command text a verdict quotes. */
const MAX_SHOWN = 200;

/** What `checkCommandLine` decided. A refusal says why, in words a model can act on. */
export type CommandVerdict =
  | { allowed: true }
  | {
      allowed: false;
      /** The deny rule that matched, when one did. */
      rule?: CommandPattern;
      /** The simple command refused, as written in the line (at most 200 characters), when one is to blame. */
      command?: string;
      reason: string;
    };

/** The Bash rules of one caller: `allow` undefined means no allow list (only denies apply). */
export interface CommandRules {
  readonly allow?: readonly CommandPattern[];
  readonly deny: readonly CommandPattern[];
}

/** A path a redirection of the line opens, for the file rules to judge: relative to where the shell started unless absolute. */
export interface OpenedPath {
  readonly access: 'read' | 'write';
  readonly path: string;
  /** A `cd` earlier in the line may have moved the shell, so a relative path may not be where it says. */
  readonly afterCd: boolean;
  /** The simple command that opens it, as a verdict shows it. */
  readonly command: string;
}

/** What the rules make of a line without the file rules: the verdict, and the paths its redirections open up to where it stopped. */
export interface LineJudgement {
  readonly verdict: CommandVerdict;
  readonly opened: readonly OpenedPath[];
}

const ALLOWED: CommandVerdict = { allowed: true };
// Control characters other than tab and newline: bash reads some as word characters where a reader sees a break.
// eslint-disable-next-line no-control-regex -- control characters are what it finds
const UNREADABLE_CHARACTERS = /[\0-\x08\x0b-\x1f\x7f]/;
// Builtins that run nothing and change no file, allowed without a rule (deny rules still apply): an agent
// moves about and tests conditions with them between the commands its rules allow.
const IMPLICIT = new Set(['cd', 'pwd', 'true', 'false', 'test', '[']);
const MOVES = new Set(['cd', 'pushd', 'popd']);

/**
 * Decides a whole line under one layer of Bash rules, synchronously, in time linear in its length.
 * The line must be made only of what the rules model (see `parseLine`); every simple command it
 * runs, looked through wrappers and `bash -c`, must match an allow rule (when there is an allow
 * list) and no deny rule; builtins that evaluate code or change how bash reads are refused. The
 * paths its redirections open are listed for the file rules, which the caller holds.
 */
export function judgeLine(line: string, rules: CommandRules): LineJudgement {
  const opened: OpenedPath[] = [];
  if (Buffer.byteLength(line, 'utf8') > MAX_LINE_BYTES) return { verdict: refused(`the command line is longer than ${MAX_LINE_BYTES} bytes`), opened };
  const odd = UNREADABLE_CHARACTERS.exec(line);
  if (odd !== null) {
    return { verdict: refused(`the command line contains a ${JSON.stringify(odd[0]).slice(1, -1)} character, which the rules do not read`), opened };
  }
  return { verdict: new LineCheck(rules, opened).line(line, 0), opened };
}

class LineCheck {
  private checked = 0;
  private moved = false;

  constructor(
    private readonly rules: CommandRules,
    private readonly opened: OpenedPath[],
  ) {}

  line(source: string, depth: number): CommandVerdict {
    const parsed = parseLine(source, MAX_COMMANDS - this.checked);
    if (parsed.kind === 'too-many') return refused(`the command line runs more than ${MAX_COMMANDS} commands`);
    if (parsed.kind === 'refused') return refused(depth === 0 ? parsed.reason : `${parsed.reason} (in a bash -c command string)`);
    this.checked += parsed.commands.length;
    for (const command of parsed.commands) {
      const verdict = this.command(command, depth);
      if (!verdict.allowed) return verdict;
    }
    return ALLOWED;
  }

  private command(command: SimpleCommand, depth: number): CommandVerdict {
    for (const redirect of command.redirects) this.open(redirect, command);
    const name = command.words[0];
    if (name === undefined) {
      const assigned = command.assignments.find((assignment) => !localVariable(assignment.name));
      return assigned === undefined
        ? ALLOWED
        : refused(`setting ${assigned.name} is refused: only lowercase variables may be set alone under permission rules`, command);
    }
    const assigned = this.assignmentRefusal(
      command.assignments.map((assignment) => assignment.name),
      name.text,
    );
    const verdict = this.layers(command, command.words, depth);
    if (!verdict.allowed || assigned === undefined) return verdict;
    return refused(assigned, command);
  }

  // One simple command, layer by layer: deny rules apply to each layer, allow rules to the command that runs.
  private layers(command: SimpleCommand, first: readonly ShellWord[], depth: number): CommandVerdict {
    let words = first;
    for (;;) {
      const name = words[0];
      if (name === undefined) return ALLOWED;
      if (name.value === undefined) return refused(`the command name is not literal (${shown(name.text)})`, command);
      if (SHELL_KEYWORDS.has(name.value)) return refused(`the shell keyword "${name.value}" as a command name is not allowed under permission rules`, command);
      const denied = this.rules.deny.find((pattern) => denyMatches(pattern, words));
      if (denied !== undefined) return { ...refused(`denied by Bash(${denied.text})`, command), rule: denied };
      const evaluates = refusedBuiltin(words);
      if (evaluates !== undefined) return refused(evaluates, command);
      const layer = unwrapCommand(words);
      if (layer.kind === 'inner') {
        const assigned = this.assignmentRefusal(layer.assignments, layer.words[0]?.text);
        if (assigned !== undefined) return refused(assigned, command);
        words = layer.words;
        continue;
      }
      if (layer.kind === 'nothing') return ALLOWED;
      if (layer.kind === 'refused') return refused(layer.reason, command);
      if (layer.kind === 'line') {
        if (depth >= MAX_NESTING) return refused(`the command line nests bash -c more than ${MAX_NESTING} levels deep`, command);
        return this.line(layer.line, depth + 1);
      }
      const program = programName(name.value);
      const found = runsFound(program, words);
      if (found !== undefined) return refused(found, command);
      const builtin = builtinRefusal(words);
      if (builtin !== undefined) return refused(builtin, command);
      if (MOVES.has(program)) this.moved = true;
      if (this.rules.allow === undefined || this.rules.allow.some((pattern) => allowMatches(pattern, words))) return ALLOWED;
      if (IMPLICIT.has(name.value) || (name.value === 'set' && safeSet(words.slice(1)))) return ALLOWED;
      return refused(`\`${shown(textOf(words))}\` is not allowed by any rule for Bash`, command);
    }
  }

  private open(redirect: Redirect, command: SimpleCommand): void {
    if (redirect.access === 'descriptor' || redirect.access === 'text') return;
    const path = redirect.target.value as string;
    const opened = { path, afterCd: this.moved, command: shown(command.text) };
    if (redirect.access !== 'write') this.opened.push({ access: 'read', ...opened });
    if (redirect.access !== 'read') this.opened.push({ access: 'write', ...opened });
  }

  // Variables set for one command change what it does unseen (GIT_CONFIG_*, NODE_OPTIONS, LD_PRELOAD): under an
  // allow list only harmless ones may be set, under deny rules alone the dangerous ones are refused.
  private assignmentRefusal(names: readonly string[], before: string | undefined): string | undefined {
    const strict = this.rules.allow !== undefined;
    const name = names.find((variable) => (strict ? !harmlessVariable(variable) : dangerousVariable(variable)));
    if (name === undefined) return undefined;
    const command = before === undefined ? 'a command' : shown(before);
    return strict
      ? `setting ${name} for ${command} is refused: before a command only ${HARMLESS_SHOWN} may be set`
      : `setting ${name} for ${command} is refused: it changes what the command runs`;
  }
}

// find runs commands of its own with -exec, -execdir, -ok and -okdir; a word that is not literal may split into one.
function runsFound(program: string, words: readonly ShellWord[]): string | undefined {
  if (program !== 'find') return undefined;
  const word = words.find((w) => w.value === undefined || /^-(exec|execdir|ok|okdir)$/.test(w.value));
  if (word === undefined) return undefined;
  return word.value === undefined
    ? `find with an argument that is not literal (${shown(word.text)}) is not allowed under permission rules: it may become -exec`
    : `find ${word.value} is not allowed under permission rules: it runs commands the rules do not see`;
}

export function refused(reason: string, command?: SimpleCommand): Extract<CommandVerdict, { allowed: false }> {
  return command === undefined ? { allowed: false, reason } : { allowed: false, command: shown(command.text), reason };
}

function textOf(words: readonly ShellWord[]): string {
  return words.map((word) => word.text).join(' ');
}

function shown(text: string): string {
  return text.length > MAX_SHOWN ? `${text.slice(0, MAX_SHOWN)}…` : text;
}
