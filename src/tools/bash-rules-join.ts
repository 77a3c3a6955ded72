import type { Node } from 'web-tree-sitter';

// Where bash keeps a backslash-newline as it is: quoted text, $'...', comments, quoted here-document bodies.
const KEPT = new Set(['raw_string', 'ansi_c_string', 'comment']);

/**
 * The line as bash reads it once backslash-newline pairs are joined, or undefined when it holds none
 * to join. Bash removes them before it splits words (`ca\<newline>t` is `cat`) where tree-sitter reads
 * a word break, so the joined line is the one to check.
 */
export function joinContinuations(root: Node, source: string): string | undefined {
  if (!source.includes('\\\n')) return undefined;
  const kept = keptRanges(root);
  let joined = '';
  let from = 0;
  let range = 0;
  for (let i = 0; i < source.length; i++) {
    while (range < kept.length && (kept[range] as [number, number])[1] <= i) range++;
    const span = kept[range];
    if (span !== undefined && span[0] <= i) {
      i = span[1] - 1;
      continue;
    }
    if (source[i] !== '\\') continue;
    if (source[i + 1] === '\n') {
      joined += source.slice(from, i);
      from = i + 2;
    }
    i++;
  }
  return from === 0 ? undefined : joined + source.slice(from);
}

// The spans, in order and not nested, that bash reads without joining lines.
function keptRanges(root: Node): [number, number][] {
  const ranges: [number, number][] = [];
  const stack: Node[] = [root];
  for (let node = stack.pop(); node !== undefined; node = stack.pop()) {
    if (KEPT.has(node.type) || (node.type === 'heredoc_body' && quotedHeredoc(node.parent))) {
      ranges.push([node.startIndex, node.endIndex]);
      continue;
    }
    const children = node.children;
    for (let i = children.length - 1; i >= 0; i--) stack.push(children[i] as Node);
  }
  return ranges.sort((a, b) => a[0] - b[0]);
}

/** Whether a here-document's delimiter is quoted (`<<'EOF'`, `<<"EOF"`, `<<\EOF`), which leaves its body as written. */
export function quotedHeredoc(node: Node | null): boolean {
  const start = node?.namedChildren.find((child) => child.type === 'heredoc_start');
  return start !== undefined && /['"\\]/.test(start.text);
}
