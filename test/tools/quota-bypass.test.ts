import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { link, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { test, type TestContext } from 'node:test';
import { pino } from 'pino';
import type { ToolDef, ToolResult } from '#src/core/types.js';
import { Workspace } from '#src/os/fs/workspace.js';
import { MAX_MEASURED_DEPTH, workspaceUsage } from '#src/os/fs/workspace-usage.js';
import { builtinTools } from '#src/tools/index.js';
import { temporaryDirectory } from '../support/workspace.js';

// The workspace quota against what an attacker writes to get round it without Bash: new names
// that cost no content (empty files, the directories made for them), hard links, and depth.

const KiB = 1024;
const QUOTA = 256 * KiB;

const textOf = (result: ToolResult): string => result.content.map((b) => (b.type === 'text' ? b.text : '')).join('\n');
const run = async (tool: ToolDef, input: Record<string, unknown>): Promise<ToolResult> =>
  tool.execute(input, { signal: new AbortController().signal, log: pino({ level: 'silent' }), requestId: 'quota' });

async function fullWorkspace(t: TestContext): Promise<{ root: string; Write: ToolDef; measure: () => Promise<void> }> {
  const root = await temporaryDirectory(t, 'toolport-quota-bypass-');
  // Nearly the whole quota taken before the tools measure it.
  await writeFile(path.join(root, 'filler.bin'), Buffer.alloc(QUOTA - 8 * KiB));
  const ws = await Workspace.open(root);
  t.after(() => ws.close());
  const tools = await builtinTools({ workspace: ws, bashSandbox: false, workspaceQuota: QUOTA });
  const usage = workspaceUsage(ws, QUOTA)!;
  await usage.measure();
  return { root, Write: tools.find((tool) => tool.name === 'Write')!, measure: () => usage.measure() };
}

test('a full workspace takes no new empty files and no new directories: each new name costs a block', async (t) => {
  const { root, Write } = await fullWorkspace(t);
  const results = [];
  for (let i = 0; i < 4; i++) results.push(await run(Write, { file_path: `deep${i}/a/b/c/d/e/f/g/empty.txt`, content: '' }));
  const refused = results.filter((r) => r.isError === true);
  assert.ok(refused.length >= 3, `at most one such Write fits in the 8 KiB left: ${results.map(textOf).join(' | ')}`);
  for (const r of refused) assert.match(textOf(r), /was not written: the workspace would pass its disk quota/);
  assert.ok(!existsSync(path.join(root, 'deep3')), 'a refused Write makes no directory');
});

test('replacing a file another hard link keeps frees nothing, so it cannot pass the quota', async (t) => {
  const { root, Write, measure } = await fullWorkspace(t);
  await rm(path.join(root, 'filler.bin'));
  await writeFile(path.join(root, 'kept.bin'), Buffer.alloc(QUOTA - 8 * KiB));
  await link(path.join(root, 'kept.bin'), path.join(root, 'alias.bin'));
  await measure();
  const result = await run(Write, { file_path: 'alias.bin', content: 'x'.repeat(64 * KiB) });
  assert.equal(result.isError, true, textOf(result));
  assert.match(textOf(result), /would pass its disk quota/);
});

test(`with a quota, Write makes no directories deeper than the ${MAX_MEASURED_DEPTH} levels the quota measures`, async (t) => {
  const { root, Write, measure } = await fullWorkspace(t);
  await rm(path.join(root, 'filler.bin'));
  await measure();
  const deep = `${Array.from({ length: MAX_MEASURED_DEPTH + 2 }, () => 'd').join('/')}/f.txt`;
  const result = await run(Write, { file_path: deep, content: 'x' });
  assert.equal(result.isError, true, textOf(result));
  assert.match(textOf(result), new RegExp(`its directories would lie deeper than the ${MAX_MEASURED_DEPTH} levels`));
  assert.ok(!existsSync(path.join(root, 'd')));
  const shallow = await run(Write, { file_path: 'd/e/f.txt', content: 'x' });
  assert.equal(shallow.isError, false, textOf(shallow));
});
