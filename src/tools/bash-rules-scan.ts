import type { Node } from 'web-tree-sitter';
import { evaluationRefusal } from './bash-rules-eval.js';
import { quotedHeredoc } from './bash-rules-join.js';
import { assignmentWord, shellWord, type ShellWord } from './bash-rules-words.js';

/** A simple command found in a line: its text as written, its words (prefix assignments and redirects left out), and the variables it sets for itself. */
export interface SimpleCommand {
  readonly text: string;
  readonly words: readonly ShellWord[];
  /** The names of the assignments before it (`LANG=C git status` sets `LANG`), subscripts included as written. */
  readonly assignments: readonly string[];
}

/**
 * Every simple command of a parsed line, or why the line cannot be trusted. `refusal` says why the
 * line is refused whatever its commands are (it makes bash evaluate a value as code, or sets a
 * variable that changes what runs); the commands are still given, so a deny rule can be named first.
 */
export type CommandScan =
  | { readonly kind: 'commands'; readonly commands: readonly SimpleCommand[]; readonly refusal?: string }
  | { readonly kind: 'unreadable'; readonly detail: string }
  | { readonly kind: 'too-many' };

// Nodes whose own tokens are `$(`, a backtick or `<(`, with what opens them, longest first.
const SUBSTITUTIONS = new Set(['command_substitution', 'process_substitution', 'arithmetic_expansion']);
const OPENERS = ['$((', '$(', '$[', '`', '<(', '>('];
// Quoted text the shell never expands.
const LITERALS = new Set(['raw_string', 'ansi_c_string']);
const REDIRECTS = new Set(['file_redirect', 'heredoc_redirect', 'herestring_redirect']);
const COMMENT_BOUNDARY = /[ \t\n;&|()<>]/;
// Inside backticks bash removes a backslash before `, $ and \, and reads the result again: `echo \`cat .env\``.
const BACKTICK_ESCAPE = /\\[`$\\]/;

/**
 * Walks the whole tree, in source order, for every simple command the line would run: in lists,
 * pipelines, subshells, groups, compound statements, function bodies, and substitutions anywhere
 * (arguments, assignments, redirect targets, strings, unquoted here-documents). Also refuses a
 * tree that reads a `$(` or a backtick as text, or a comment where bash sees none: places where
 * the grammar and bash could disagree about what runs. At most `max` commands.
 */
export function collectCommands(root: Node, source: string, max: number): CommandScan {
  const commands: SimpleCommand[] = [];
  let refusal: string | undefined;
  const stack: Node[] = [root];
  for (let node = stack.pop(); node !== undefined; node = stack.pop()) {
    if (node.type === 'comment') {
      if (node.startIndex > 0 && !COMMENT_BOUNDARY.test(source[node.startIndex - 1] as string)) return unreadable('a "#" inside a word');
      continue;
    }
    if (LITERALS.has(node.type)) continue;
    const children = node.namedChildren;
    const hidden = hiddenSubstitution(source, node, children);
    if (hidden !== undefined) return unreadable(`"${hidden}" read as text`);
    if (node.type === 'command_substitution' && node.text.startsWith('`') && BACKTICK_ESCAPE.test(node.text)) {
      refusal ??= `an escaped "\`", "$" or "\\" inside backticks is refused (${node.text.length > 80 ? `${node.text.slice(0, 80)}…` : node.text}): write $(...) instead`;
    }
    refusal ??= evaluationRefusal(node, source);
    const words = commandWords(node);
    if (words === null) return unreadable('a part of a command the rules do not know');
    if (words !== undefined) {
      commands.push({ text: node.text, words, assignments: prefixAssignments(node) });
      if (commands.length > max) return { kind: 'too-many' };
    }
    // A quoted here-document delimiter (<<'EOF') makes the body plain text.
    const walked = node.type === 'heredoc_redirect' && quotedHeredoc(node) ? children.filter((child) => child.type !== 'heredoc_body') : children;
    for (let i = walked.length - 1; i >= 0; i--) stack.push(walked[i] as Node);
  }
  return refusal === undefined ? { kind: 'commands', commands } : { kind: 'commands', commands, refusal };
}

function prefixAssignments(node: Node): string[] {
  if (node.type !== 'command') return [];
  return node.namedChildren.filter((child) => child.type === 'variable_assignment').map((child) => child.childForFieldName('name')?.text ?? child.text);
}

function unreadable(detail: string): CommandScan {
  return { kind: 'unreadable', detail };
}

// The words of a simple command node; undefined for any other node, null for a command with a part the rules do not expect.
function commandWords(node: Node): ShellWord[] | undefined | null {
  switch (node.type) {
    case 'command': {
      const name = node.childForFieldName('name');
      if (name === null) return undefined;
      const args = node.childrenForFieldName('argument');
      const known = new Set([name.startIndex, ...args.map((arg) => arg.startIndex)]);
      const unexpected = node.namedChildren.some((child) => !known.has(child.startIndex) && child.type !== 'variable_assignment' && !REDIRECTS.has(child.type));
      return unexpected ? null : [shellWord(name), ...args.map(shellWord)];
    }
    case 'declaration_command':
    case 'unset_command': {
      // export, declare, local, readonly, typeset, unset: the keyword is the grammar's, not a word node.
      const keyword = node.child(0)?.text ?? '';
      const args = node.namedChildren.filter((child) => child.type !== 'comment' && !REDIRECTS.has(child.type));
      return [{ text: keyword, value: keyword }, ...args.map(declarationWord)];
    }
    default:
      return undefined;
  }
}

function declarationWord(node: Node): ShellWord {
  if (node.type === 'variable_assignment') return assignmentWord(node);
  if (node.type === 'variable_name') return { text: node.text, value: node.text };
  return shellWord(node);
}

// A `$(` or backtick in the text of a node outside its children (and its own opening and closing
// tokens): a substitution the grammar did not read as one.
function hiddenSubstitution(source: string, node: Node, children: readonly Node[]): string | undefined {
  let from = node.startIndex;
  let to = node.endIndex;
  if (SUBSTITUTIONS.has(node.type)) {
    const opener = OPENERS.find((token) => source.startsWith(token, from)) ?? '';
    from += opener.length;
    to -= opener === '$((' ? 2 : 1;
  }
  for (const child of children) {
    const found = scanText(source, from, Math.min(child.startIndex, to));
    if (found !== undefined) return found;
    from = Math.max(from, child.endIndex);
  }
  return scanText(source, from, to);
}

function scanText(source: string, from: number, to: number): string | undefined {
  for (let i = from; i < to; i++) {
    const c = source[i];
    if (c === '\\') i++;
    else if (c === '`') return '`';
    else if (c === '$' && source[i + 1] === '(') return '$(';
  }
  return undefined;
}
