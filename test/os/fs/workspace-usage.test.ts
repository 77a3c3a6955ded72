import assert from 'node:assert/strict';
import { mkdir, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, test, type TestContext } from 'node:test';
import type { ToolDef, ToolResult } from '#src/core/types.js';
import { openKeyWorkspaces } from '#src/assembly/key-workspaces.js';
import { createToolset, type ToolsetConfig } from '#src/assembly/toolset.js';
import { formatBytes } from '#src/os/fs/describe.js';
import { builtinTools } from '#src/tools/index.js';
import { Workspace } from '#src/os/fs/workspace.js';
import { workspaceUsage, type WorkspaceUsage } from '#src/os/fs/workspace-usage.js';
import { toolContext } from '../../support/tool-context.js';
import { temporaryDirectory } from '../../support/workspace.js';

// The disk quota of a workspace, tried through real Write and Edit calls.
const KiB = 1024;
const QUOTA = 256 * KiB;

const base = await temporaryDirectory({ after }, 'toolport-quota-');
const textOf = (result: ToolResult): string => result.content.map((b) => (b.type === 'text' ? b.text : '')).join('\n');

before(async () => {});

interface Fixture {
  root: string;
  Write: ToolDef;
  Edit: ToolDef;
  usage: WorkspaceUsage;
}

/** A workspace of its own with the built-in tools and `quota`, measured. */
async function fixture(t: TestContext, name: string, quota = QUOTA): Promise<Fixture> {
  const root = path.join(base, name);
  await mkdir(root);
  const ws = await Workspace.open(root);
  t.after(() => ws.close());
  const tools = await builtinTools({ workspace: ws, bashSandbox: false, workspaceQuota: quota });
  const usage = workspaceUsage(ws, quota)!;
  await usage.measure();
  return { root, Write: tools.find((tool) => tool.name === 'Write')!, Edit: tools.find((tool) => tool.name === 'Edit')!, usage };
}

const refusal = (file: string, usage: WorkspaceUsage, needs: number): ToolResult => ({
  content: [
    {
      type: 'text',
      text: `Path ${JSON.stringify(file)} was not written: the workspace would pass its disk quota (TOOLPORT_WORKSPACE_QUOTA): it uses ${formatBytes(usage.used)} of ${formatBytes(usage.quota)}, and this write needs ${formatBytes(needs)} more. Nothing was written; make room in the workspace (or ask for a larger quota) and try again.`,
    },
  ],
  isError: true,
});

test('a Write that would take the workspace past its quota is refused, saying used, quota and need, and writes nothing', async (t) => {
  const f = await fixture(t, 'refused');
  const content = 'x'.repeat(QUOTA + KiB);
  // The content, and a block for each new name: the directory big/ and the file.
  const expected = refusal('big/new.txt', f.usage, content.length + 2 * 4 * KiB);
  assert.deepEqual(await f.Write.execute({ file_path: 'big/new.txt', content }, toolContext()), expected);
  assert.deepEqual(await readdir(f.root), [], 'not even its parent directory');
  // Within the quota, it is written.
  assert.equal((await f.Write.execute({ file_path: 'small.txt', content: 'x'.repeat(64 * KiB) }, toolContext())).isError, false);
});

test("the server's own writes count at once, without measuring again; a file made smaller is always written", async (t) => {
  const f = await fixture(t, 'running');
  const before = f.usage.used;
  assert.equal((await f.Write.execute({ file_path: 'a.txt', content: 'a'.repeat(160 * KiB) }, toolContext())).isError, false);
  assert.ok(f.usage.used >= before + 160 * KiB, `the figure counts the write: ${f.usage.used}`);
  const second = 'b'.repeat(160 * KiB);
  assert.deepEqual(await f.Write.execute({ file_path: 'b.txt', content: second }, toolContext()), refusal('b.txt', f.usage, second.length + 4 * KiB));
  // Replacing a.txt by something of the same size needs no room: only growth counts.
  assert.equal((await f.Write.execute({ file_path: 'a.txt', content: 'c'.repeat(160 * KiB) }, toolContext())).isError, false);
  // Over the quota (another process wrote), shrinking a file still works, so a full workspace can be cleaned up.
  await writeFile(path.join(f.root, 'outside-writer.bin'), Buffer.alloc(200 * KiB, 1));
  await f.usage.measure();
  assert.ok(f.usage.used > QUOTA);
  assert.equal((await f.Edit.execute({ file_path: 'a.txt', old_string: 'c'.repeat(100 * KiB), new_string: '' }, toolContext())).isError, false);
  assert.equal((await stat(path.join(f.root, 'a.txt'))).size, 60 * KiB);
});

test('an Edit that would take the workspace past its quota is refused, and the file stays as it was', async (t) => {
  const f = await fixture(t, 'edit');
  await writeFile(path.join(f.root, 'grow.txt'), 'seed\n');
  await f.usage.measure();
  const grown = 'g'.repeat(QUOTA);
  const needs = Buffer.byteLength(`${grown}\n`) - Number((await stat(path.join(f.root, 'grow.txt'))).blocks) * 512;
  assert.deepEqual(await f.Edit.execute({ file_path: 'grow.txt', old_string: 'seed', new_string: grown }, toolContext()), refusal('grow.txt', f.usage, needs));
  assert.equal(await readFile(path.join(f.root, 'grow.txt'), 'utf8'), 'seed\n');
});

test('what others write (Bash, another replica) counts from the next measurement, not on each call', async (t) => {
  const f = await fixture(t, 'others');
  await writeFile(path.join(f.root, 'from-bash.bin'), Buffer.alloc(200 * KiB, 1));
  // Not measured per call: the figure is the one from before.
  assert.equal((await f.Write.execute({ file_path: 'one.txt', content: 'x'.repeat(40 * KiB) }, toolContext())).isError, false);
  await f.usage.measure();
  const content = 'y'.repeat(40 * KiB);
  assert.deepEqual(await f.Write.execute({ file_path: 'two.txt', content }, toolContext()), refusal('two.txt', f.usage, content.length + 4 * KiB));
});

test('concurrent Writes cannot together pass the quota: each reserves its room first', async (t) => {
  const f = await fixture(t, 'concurrent');
  const size = 40 * KiB;
  const results = await Promise.all(
    Array.from({ length: 12 }, (_, i) => f.Write.execute({ file_path: `c${i}.txt`, content: 'z'.repeat(size) }, toolContext())),
  );
  const written = results.filter((r) => !r.isError).length;
  assert.ok(written >= 1 && written < 12, `${written} of 12 written`);
  for (const r of results.filter((result) => result.isError)) assert.match(textOf(r), /would pass its disk quota/);
  await f.usage.measure();
  assert.ok(f.usage.used <= QUOTA, `measured ${f.usage.used} of ${QUOTA}`);
});

test("each key's workspace has its own budget, from TOOLPORT_WORKSPACE_QUOTA through the toolset", async (t) => {
  const server = await Workspace.open(await mkdir(path.join(base, 'keys-server'), { recursive: true }).then(() => path.join(base, 'keys-server')));
  t.after(() => server.close());
  for (const name of ['keys-a', 'keys-b']) await mkdir(path.join(base, name));
  const config: ToolsetConfig = { workspace: server.root, bashSandbox: false, plugins: [], tools: ['Write'], workspaceQuota: QUOTA };
  const served = await createToolset(config, base, undefined, server);
  const opened = await openKeyWorkspaces({
    config,
    server,
    served,
    keys: [
      { label: 'a', key: 'a-secret-0123456789abcdef', workspace: path.join(base, 'keys-a') },
      { label: 'b', key: 'b-secret-0123456789abcdef', workspace: path.join(base, 'keys-b') },
    ],
    cwd: base,
  });
  t.after(() => opened.close());
  const write = async (registry: typeof served, name: string): Promise<ToolResult> =>
    registry.get('Write')!.execute({ file_path: name, content: 'w'.repeat(160 * KiB) }, toolContext());
  const a = opened.toolsets.get(path.join(base, 'keys-a'))!;
  const b = opened.toolsets.get(path.join(base, 'keys-b'))!;
  assert.equal((await write(a, 'one.txt')).isError, false);
  assert.match(textOf(await write(a, 'two.txt')), /would pass its disk quota/);
  // Key b's workspace, and the server's, still have theirs.
  assert.equal((await write(b, 'one.txt')).isError, false);
  assert.equal((await write(opened.registry, 'one.txt')).isError, false);
});

test('a quota of 0 means none', async (t) => {
  const root = path.join(base, 'none');
  await mkdir(root);
  const ws = await Workspace.open(root);
  t.after(() => ws.close());
  assert.equal(workspaceUsage(ws, 0), undefined);
  const tools = await builtinTools({ workspace: ws, bashSandbox: false, workspaceQuota: 0 });
  const Write = tools.find((tool) => tool.name === 'Write')!;
  assert.equal((await Write.execute({ file_path: 'big.txt', content: 'x'.repeat(2 * QUOTA) }, toolContext())).isError, false);
});
