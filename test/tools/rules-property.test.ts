import assert from 'node:assert/strict';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, test } from 'node:test';
import fc from 'fast-check';
import picomatch from 'picomatch';
import { PermissionDenied, type PathAccess } from '#src/core/permissions.js';
import { compilePermissions } from '#src/permissions/rules.js';
import type { ToolContext, ToolDef, ToolResult } from '#src/core/types.js';
import { createEditTool } from '#src/tools/edit.js';
import { createGlobTool } from '#src/tools/glob/glob.js';
import { createGrepTool } from '#src/tools/grep/grep.js';
import { createLsTool, type LsOutput } from '#src/tools/ls.js';
import { createReadTool } from '#src/tools/read.js';
import { createWriteTool } from '#src/tools/write.js';
import { rgRunner } from '#src/os/sandbox/rg-confined.js';
import { Workspace } from '#src/os/fs/workspace.js';
import { requireOrSkip } from '../support/require.js';
import { TEST_RULE_CATALOG, toolContext } from '../support/tool-context.js';
import { temporaryDirectory } from '../support/workspace.js';

// For random small trees and random rule sets: a path the rules deny to Read is refused by Read
// and never shows in Glob, LS or Grep; a path they deny to Edit or Write is refused by them and
// keeps its bytes. The converse too: what the rules let through is read, listed, found and
// written. Which paths the rules deny is decided by an oracle of its own (picomatch, with
// gitignore's rules for anchoring, directories and parents written out here), not by the code
// under test.

const NAMES = ['a', 'b', '.e', 'x.txt'] as const;
const PATTERNS = ['a', 'b', '.e', 'x.txt', '*.txt', '/a', '/.e', './b', 'a/', 'b/', '.e/', 'a/**', 'b/**', 'a/b', 'b/x.txt', '**/b', 'a/*'] as const;
const TOOLS = ['Read', 'Edit', 'Write'] as const;
const FAMILIES: Record<PathAccess, readonly string[]> = { read: ['Read'], edit: ['Edit'], write: ['Edit', 'Write'] };

interface Rule {
  tool: (typeof TOOLS)[number];
  pattern: string;
}
interface Layer {
  allow: Rule[];
  deny: Rule[];
}

/** Whether a gitignore pattern matches `relative` itself (not its parents). */
function matchesItself(pattern: string, relative: string, directory: boolean): boolean {
  let p = pattern.startsWith('./') ? pattern.slice(1) : pattern;
  const directoryOnly = p.endsWith('/');
  if (directoryOnly) p = p.slice(0, -1);
  if (directoryOnly && !directory) return false;
  // A slash at the start or in the middle anchors the pattern at the root; else it matches a name at any depth.
  const anchored = p.includes('/');
  if (p.startsWith('/')) p = p.slice(1);
  // `a/**` is what a/ holds, not a itself.
  if (p.endsWith('/**')) return relative.startsWith(p.slice(0, -2));
  const match = picomatch(p, { dot: true });
  return anchored ? match(relative) : match(path.posix.basename(relative));
}

/** Whether a pattern matches a path or a directory above it (gitignore: what an ignored directory holds is ignored). */
function matches(pattern: string, relative: string, directory: boolean): boolean {
  const parts = relative.split('/');
  return parts.some((_, i) => matchesItself(pattern, parts.slice(0, i + 1).join('/'), i < parts.length - 1 || directory));
}

/** The oracle: whether the layers let `access` happen to a path. Deny wins; an allow list for the family must match a file. */
function permitted(layers: readonly Layer[], access: PathAccess, relative: string, directory: boolean): boolean {
  const family = FAMILIES[access];
  return layers.every((layer) => {
    if (layer.deny.some((r) => family.includes(r.tool) && matches(r.pattern, relative, directory))) return false;
    if (directory) return true;
    const allows = layer.allow.filter((r) => family.includes(r.tool));
    return allows.length === 0 || allows.some((r) => matches(r.pattern, relative, false));
  });
}

/** Files (paths from the root) such that none is a directory of another. */
function asTree(paths: readonly string[]): string[] {
  const files: string[] = [];
  const dirs = new Set<string>();
  for (const candidate of paths) {
    const parts = candidate.split('/');
    const above = parts.slice(0, -1).map((_, i) => parts.slice(0, i + 1).join('/'));
    if (dirs.has(candidate) || files.includes(candidate) || above.some((dir) => files.includes(dir))) continue;
    files.push(candidate);
    for (const dir of above) dirs.add(dir);
  }
  return files;
}

const treeArb = fc
  .array(
    fc.array(fc.constantFrom(...NAMES), { minLength: 1, maxLength: 3 }).map((parts) => parts.join('/')),
    { minLength: 1, maxLength: 8 },
  )
  .map(asTree);
const ruleArb = fc.record({ tool: fc.constantFrom(...TOOLS), pattern: fc.constantFrom(...PATTERNS) });
const layersArb = fc.array(fc.record({ allow: fc.array(ruleArb, { maxLength: 2 }), deny: fc.array(ruleArb, { maxLength: 3 }) }), {
  minLength: 1,
  maxLength: 2,
});

const textOf = (result: ToolResult): string => result.content.map((block) => (block.type === 'text' ? block.text : '')).join('\n');
const marker = (i: number): string => `MARK-${i}-`;

/** Runs a tool; 'refused' when it threw the rules' refusal. */
async function attempt(tool: ToolDef, input: Record<string, unknown>, context: ToolContext): Promise<ToolResult | 'refused'> {
  try {
    return await tool.execute(input, context);
  } catch (err) {
    if (err instanceof PermissionDenied) return 'refused';
    throw err;
  }
}

const base = await temporaryDirectory({ after }, 'toolport-rules-property-');
let run = 0;

async function check(files: readonly string[], layers: readonly Layer[]): Promise<void> {
  const root = path.join(base, String((run += 1)));
  for (const [i, file] of files.entries()) {
    await mkdir(path.dirname(path.join(root, file)), { recursive: true });
    await writeFile(path.join(root, file), `${marker(i)}\n`);
  }
  const lists = layers.map((layer, i) => ({
    where: `layer ${i}`,
    rules: { allow: layer.allow.map((r) => `${r.tool}(${r.pattern})`), deny: layer.deny.map((r) => `${r.tool}(${r.pattern})`) },
  }));
  const permissions = compilePermissions(lists, TEST_RULE_CATALOG);
  const context = toolContext(undefined, 'test', { permissions });
  const ws = await Workspace.open(root);
  const where = `files ${JSON.stringify(files)}, rules ${JSON.stringify(lists)}`;
  try {
    const readable = (relative: string, directory = false): boolean => permitted(layers, 'read', relative, directory);
    const visibleFiles = files.filter((file) => readable(file));

    const read = createReadTool(ws);
    for (const [i, file] of files.entries()) {
      const result = await attempt(read, { file_path: file }, context);
      if (readable(file)) assert.ok(result !== 'refused' && textOf(result).includes(marker(i)), `Read ${file} must read it; ${where}`);
      else assert.equal(result, 'refused', `Read ${file} must be refused; ${where}`);
    }

    const glob = textOf(await createGlobTool(ws).execute({ pattern: '**/*' }, context));
    assert.deepEqual(glob === 'No files found' ? [] : glob.split('\n').sort(), [...visibleFiles].sort(), `Glob; ${where}`);

    const ls = createLsTool(ws);
    const dirs = [
      '.',
      ...new Set(
        files.flatMap((file) =>
          file
            .split('/')
            .slice(0, -1)
            .map((_, i, parts) => parts.slice(0, i + 1).join('/')),
        ),
      ),
    ];
    for (const dir of dirs) {
      const result = await attempt(ls, { path: dir }, context);
      if (dir !== '.' && !readable(dir, true)) {
        assert.equal(result, 'refused', `LS ${dir} must be refused; ${where}`);
        continue;
      }
      assert.ok(result !== 'refused', `LS ${dir} must list it; ${where}`);
      const children = new Map<string, boolean>();
      for (const file of files) {
        const below = dir === '.' ? file : file.startsWith(`${dir}/`) ? file.slice(dir.length + 1) : undefined;
        if (below === undefined) continue;
        const name = below.split('/')[0]!;
        children.set(name, below.includes('/'));
      }
      const shown = [...children].filter(([name, directory]) => readable(dir === '.' ? name : `${dir}/${name}`, directory)).map(([name]) => name);
      const listed = (result.structuredContent as LsOutput).entries.map((entry) => entry.name);
      assert.deepEqual(listed.sort(), shown.sort(), `LS ${dir}; ${where}`);
    }

    // rg skips hidden files and directories (names starting with a dot) unless asked.
    const searched = files.map((file, i) => ({ file, i })).filter(({ file }) => readable(file) && !file.split('/').some((part) => part.startsWith('.')));
    const grep = textOf(await createGrepTool(ws, { confine: 'off' }).execute({ pattern: 'MARK-\\d+-', output_mode: 'content' }, context));
    const found = grep === 'No matches found' ? [] : grep.split('\n');
    assert.deepEqual(found, searched.map(({ file, i }) => `${file}:1:${marker(i)}`).sort(), `Grep; ${where}`);

    const edit = createEditTool(ws);
    for (const [i, file] of files.entries()) {
      const before = await readFile(path.join(root, file), 'utf8');
      const result = await attempt(edit, { file_path: file, old_string: marker(i), new_string: `${marker(i)}edited` }, context);
      const allowed = readable(file) && permitted(layers, 'edit', file, false);
      const after = await readFile(path.join(root, file), 'utf8');
      if (allowed) assert.ok(result !== 'refused' && result.isError !== true && after === `${marker(i)}edited\n`, `Edit ${file} must edit it; ${where}`);
      else assert.ok(result === 'refused' && after === before, `Edit ${file} must be refused and leave it alone; ${where}`);
    }

    const write = createWriteTool(ws);
    for (const file of files) {
      const before = await readFile(path.join(root, file), 'utf8');
      const result = await attempt(write, { file_path: file, content: 'written\n' }, context);
      const after = await readFile(path.join(root, file), 'utf8');
      if (permitted(layers, 'write', file, false))
        assert.ok(result !== 'refused' && result.isError !== true && after === 'written\n', `Write ${file}; ${where}`);
      else assert.ok(result === 'refused' && after === before, `Write ${file} must be refused and leave it alone; ${where}`);
    }
  } finally {
    await ws.close();
    await rm(root, { recursive: true, force: true });
  }
}

test('a path the rules deny is never read, listed, found or changed, and every other path is', async (t) => {
  const probe = await Workspace.open(base);
  const { found } = await rgRunner(probe, 'rg', 'off');
  await probe.close();
  if (!requireOrSkip(t, 'ripgrep', found ? undefined : 'rg was not found on PATH')) return;
  await fc.assert(fc.asyncProperty(treeArb, layersArb, check), { numRuns: 40 });
});
