import type { Node } from 'web-tree-sitter';
import { plainArithmetic, plainName } from './bash-rules-arith.js';
import { dangerousVariable } from './bash-rules-names.js';
import { literalValue } from './bash-rules-words.js';

// The operators of [[ ]] that evaluate both sides as arithmetic ([ ] and test only compare integers).
const ARITHMETIC_TESTS = new Set(['-eq', '-ne', '-lt', '-le', '-gt', '-ge']);
// ${x@op} operators that only transform text; @P expands the value as a prompt, commands included.
const TRANSFORMS = new Set(['Q', 'E', 'A', 'K', 'a', 'k', 'U', 'u', 'L']);
// Nodes that run no commands but may set a variable a later command reads.
const ASSIGNING_PARENTS = new Set(['command', 'declaration_command']);
const SHOWN = 80;

/**
 * Why bash would evaluate part of this node a second time, or set a variable that changes what later
 * commands run; undefined when it would not. Arithmetic, subscripts, `${!x}` and `${x@P}` read a
 * variable's value as code, so a value set earlier in the line (`x='a[$(cat .env)]'`) would run.
 */
export function evaluationRefusal(node: Node, source: string): string | undefined {
  switch (node.type) {
    case 'arithmetic_expansion':
      return arithmetic(node, between(node, source, 0));
    case 'compound_statement':
      return node.child(0)?.type === '((' ? arithmetic(node, between(node, source, 0)) : undefined;
    case 'c_style_for_statement':
      return arithmetic(node, between(node, source, 1));
    case 'subscript':
      return subscript(node);
    case 'expansion':
      return expansion(node);
    case 'binary_expression':
    case 'unary_expression':
      return test(node);
    case 'file_redirect':
    case 'heredoc_redirect':
    case 'herestring_redirect':
      return descriptorVariable(node, source);
    case 'array':
      return arrayElements(node);
    case 'variable_assignment':
      return assignment(node);
    case 'for_statement':
      return loopVariable(node);
    default:
      return undefined;
  }
}

// The source between a node's opening and closing tokens (`$((`/`))`, `$[`/`]`, `((`/`))`), the opener being its child at `from`.
function between(node: Node, source: string, from: number): string {
  const open = node.child(from);
  const close = node.children.find((child, i) => i > from && (child.type === '))' || child.type === ']'));
  if (open === null || close === undefined) return node.text;
  return source.slice(open.endIndex, close.startIndex);
}

function arithmetic(node: Node, inner: string): string | undefined {
  if (plainArithmetic(inner, true)) return undefined;
  return `arithmetic on anything but numbers (${shown(node.text)}) is refused: bash evaluates the variables in it as code`;
}

function subscript(node: Node): string | undefined {
  const index = node.namedChildren.slice(1);
  const text = index.map((child) => child.text).join('');
  if (text === '@' || text === '*' || plainArithmetic(text, false)) return undefined;
  return `a subscript that is not a number (${shown(node.text)}) is refused: bash evaluates it as arithmetic`;
}

function expansion(node: Node): string | undefined {
  const parts = node.children;
  if (parts[1]?.type === '!') {
    const target = parts[2];
    const listsNames =
      (target?.type === 'variable_name' && (parts[3]?.type === '*' || parts[3]?.type === '@') && parts[4]?.type === '}') ||
      (target?.type === 'subscript' && parts[3]?.type === '}');
    if (!listsNames) return `indirect expansion (${shown(node.text)}) is refused: bash evaluates the name it holds`;
  }
  for (const [i, part] of parts.entries()) {
    if (part.type === '@' && !TRANSFORMS.has(parts[i + 1]?.text ?? '')) {
      return `the expansion ${shown(node.text)} is refused: bash would run the commands its value holds`;
    }
    if (part.type === ':') {
      const offset = parts.slice(i + 1).filter((child) => child.isNamed);
      if (offset.every((child) => plainArithmetic(child.text, false))) return undefined;
      return `an offset that is not a number (${shown(node.text)}) is refused: bash evaluates it as arithmetic`;
    }
  }
  return undefined;
}

function test(node: Node): string | undefined {
  const operator = node.children.find((child) => child.type === 'test_operator')?.text;
  if (operator === '-v' || operator === '-R') {
    const operand = node.namedChildren.find((child) => child.type !== 'test_operator');
    const value = operand === undefined ? undefined : literalValue(operand, false);
    if (value !== undefined && plainName(value)) return undefined;
    return `${operator} on anything but a plain variable name (${shown(node.text)}) is refused: bash evaluates a subscript as arithmetic`;
  }
  if (operator === undefined || !ARITHMETIC_TESTS.has(operator) || !inDoubleBrackets(node)) return undefined;
  const operands = node.namedChildren.filter((child) => child.type !== 'test_operator');
  if (operands.every((child) => plainArithmetic(literalValue(child, false) ?? '$', false))) return undefined;
  return `${operator} on anything but numbers in [[ ]] (${shown(node.text)}) is refused: bash evaluates both sides as arithmetic`;
}

function inDoubleBrackets(node: Node): boolean {
  for (let at: Node | null = node.parent; at !== null; at = at.parent) {
    if (at.type === 'test_command') return at.child(0)?.type === '[[';
  }
  return false;
}

// `{a[$(id)]}>file` stores the descriptor in an array element whose subscript bash evaluates.
function descriptorVariable(node: Node, source: string): string | undefined {
  const operator = node.children.find((child) => !child.isNamed);
  if (operator === undefined) return undefined;
  const before = /\{([A-Za-z_][A-Za-z0-9_]*\[[^{}]*)\}$/.exec(source.slice(Math.max(0, operator.startIndex - 256), operator.startIndex));
  if (before === null || plainName(before[1] as string)) return undefined;
  return `a descriptor variable with a subscript that is not a number ({${shown(before[1] as string)}}) is refused: bash evaluates it as arithmetic`;
}

// `a=([x]=1)`: the subscripts of an indexed array are arithmetic.
function arrayElements(node: Node): string | undefined {
  for (const element of node.namedChildren) {
    const keyed = /^\[(.*?)\]\+?=/s.exec(element.text);
    if (keyed !== null && !plainArithmetic(keyed[1] as string, false)) {
      return `an array element with a subscript that is not a number (${shown(element.text)}) is refused: bash evaluates it as arithmetic`;
    }
  }
  return undefined;
}

// Assignments standing alone (`PATH=/tmp/x; git status`) or made by declare, export, local...; those before a command are the rules' to judge.
function assignment(node: Node): string | undefined {
  // Before a command, the assignment is that command's; with no command (`PATH=x >log`) it stays in the shell.
  if (node.parent?.type === 'command' && node.parent.childForFieldName('name') !== null) return undefined;
  const name = node.childForFieldName('name');
  const variable = name?.type === 'subscript' ? name.namedChild(0)?.text : name?.text;
  if (variable === undefined || !dangerousVariable(variable)) return undefined;
  const where = node.parent !== null && ASSIGNING_PARENTS.has(node.parent.type) ? `${node.parent.child(0)?.text ?? ''} ` : '';
  return `setting ${variable} (${shown(where + node.text)}) is refused: it changes what later commands run`;
}

function loopVariable(node: Node): string | undefined {
  const variable = node.childForFieldName('variable')?.text;
  if (variable === undefined || !dangerousVariable(variable)) return undefined;
  return `a loop over ${variable} is refused: it changes what later commands run`;
}

function shown(text: string): string {
  return text.length > SHOWN ? `${text.slice(0, SHOWN)}…` : text;
}
