import { builtinRefusal } from './bash-rules-builtins.js';
import { allowMatches, denyMatches } from './bash-rules-match.js';
import { dangerousVariable, harmlessVariable, HARMLESS_SHOWN } from './bash-rules-names.js';
import { parseCommands } from './bash-rules-parse.js';
import type { CommandPattern } from './bash-rules-pattern.js';
import type { SimpleCommand } from './bash-rules-scan.js';
import { unwrapCommand } from './bash-rules-wrappers.js';
import { SHELL_KEYWORDS, type ShellWord } from './bash-rules-words.js';

export { parseCommandPattern, type CommandPattern } from './bash-rules-pattern.js';

/** Longest line checked, in UTF-8 bytes: tree-sitter parses 64 KiB of ordinary commands in 3 to 110 ms. */
export const MAX_LINE_BYTES = 65_536;
/** Most time the parser may spend on one line, nested lines included: some malformed lines would take it minutes. */
export const MAX_PARSE_MS = 1_000;
/** Most simple commands one line may run, counting those inside `bash -c` and `eval`. */
export const MAX_COMMANDS = 1_000;
/** Deepest nesting of `bash -c`, `sh -c` and `eval` inside one another. */
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

const ALLOWED: CommandVerdict = { allowed: true };
// Characters bash reads as part of a word and tree-sitter as a blank, and a NUL, which no command line can hold.
const UNREADABLE_CHARACTERS = /[\0\r\v\f]/;

/**
 * Decides a whole line: every simple command it would run must match an allow rule (when there is
 * an allow list) and no deny rule. Wrappers (`env`, `timeout`, `nohup`...) are looked through,
 * `bash -c` and `eval` strings are parsed in turn, and a line the parser cannot read is refused.
 * These rules shape what an agent runs; the sandbox is the security boundary.
 */
export async function checkCommandLine(line: string, rules: CommandRules): Promise<CommandVerdict> {
  if (rules.allow === undefined && rules.deny.length === 0) return ALLOWED;
  if (Buffer.byteLength(line, 'utf8') > MAX_LINE_BYTES) return refused(`the command line is longer than ${MAX_LINE_BYTES} bytes`);
  const odd = UNREADABLE_CHARACTERS.exec(line);
  if (odd !== null) return refused(`the command line contains a ${JSON.stringify(odd[0]).slice(1, -1)} character, which the rules do not read`);
  return new LineCheck(rules).line(line, 'the command line', 0);
}

class LineCheck {
  private checked = 0;
  // A refusal that does not name a rule, held back so a deny rule matching a later command is named instead.
  private unsafe: CommandVerdict | undefined;
  private readonly deadline = performance.now() + MAX_PARSE_MS;

  constructor(private readonly rules: CommandRules) {}

  async line(source: string, where: string, depth: number): Promise<CommandVerdict> {
    const budgetMs = this.deadline - performance.now();
    if (budgetMs <= 0) return refused(`the command line took more than ${MAX_PARSE_MS} ms to parse`);
    const outcome = await parseCommands(source, MAX_COMMANDS - this.checked, budgetMs);
    if (outcome.kind === 'too-slow') return refused(`the command line took more than ${MAX_PARSE_MS} ms to parse`);
    if (outcome.kind === 'too-many') return refused(`the command line runs more than ${MAX_COMMANDS} commands`);
    if (outcome.kind === 'unreadable') return refused(`${where} could not be parsed (${outcome.detail})`);
    if (outcome.kind !== 'commands') return refused(`${where} could not be parsed`);
    this.checked += outcome.commands.length;
    for (const command of outcome.commands) {
      const verdict = await this.command(command, depth);
      if (!verdict.allowed) return verdict;
    }
    if (outcome.refusal !== undefined) this.unsafe ??= refused(outcome.refusal);
    return depth === 0 && this.unsafe !== undefined ? this.unsafe : ALLOWED;
  }

  // One simple command, layer by layer: deny rules apply to each layer, allow rules to the command that runs.
  private async command(command: SimpleCommand, depth: number): Promise<CommandVerdict> {
    let words = command.words;
    let assignments = command.assignments;
    for (;;) {
      const name = words[0];
      if (name === undefined) return ALLOWED;
      if (name.value === undefined) return refused(`the command name is not literal (${shown(name.text)})`, command);
      if (SHELL_KEYWORDS.has(name.value)) return refused(`the command line could not be parsed ("${name.value}" where a command name should be)`, command);
      const denied = this.rules.deny.find((pattern) => denyMatches(pattern, words));
      if (denied !== undefined) return { ...refused(`denied by Bash(${denied.text})`, command), rule: denied };
      const assigned = this.assignmentRefusal(assignments, name.text);
      if (assigned !== undefined) this.unsafe ??= refused(assigned, command);
      const layer = unwrapCommand(words);
      if (layer.kind === 'inner') {
        words = layer.words;
        assignments = layer.assignments;
        continue;
      }
      if (layer.kind === 'nothing') return ALLOWED;
      if (layer.kind === 'refused') return refused(layer.reason, command);
      if (layer.kind === 'line') {
        if (depth >= MAX_NESTING) return refused(`the command line nests bash -c, sh -c or eval more than ${MAX_NESTING} levels deep`, command);
        return this.line(layer.line, layer.via === 'eval' ? 'the arguments of eval' : `the command string of ${layer.via}`, depth + 1);
      }
      const evaluated = builtinRefusal(words);
      if (evaluated !== undefined) this.unsafe ??= refused(evaluated, command);
      if (this.rules.allow === undefined || this.rules.allow.some((pattern) => allowMatches(pattern, words))) return ALLOWED;
      return refused(`\`${shown(textOf(words))}\` is not allowed by any rule for Bash`, command);
    }
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

function refused(reason: string, command?: SimpleCommand): Extract<CommandVerdict, { allowed: false }> {
  return command === undefined ? { allowed: false, reason } : { allowed: false, command: shown(command.text), reason };
}

function textOf(words: readonly ShellWord[]): string {
  return words.map((word) => word.text).join(' ');
}

function shown(text: string): string {
  return text.length > MAX_SHOWN ? `${text.slice(0, MAX_SHOWN)}…` : text;
}
