import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, test, type TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { Config } from '../src/config.js';
import { ToolRegistry } from '../src/core/registry.js';
import { PluginLoadError } from '../src/plugins.js';
import { Echo } from '../src/tools/index.js';
import { UnknownToolError, createToolset } from '../src/toolset.js';

const REPO = fileURLToPath(new URL('..', import.meta.url));
const TOOL_ARRAY = './test/fixtures/plugins/tool-array.ts';

type ToolsetConfig = Pick<Config, 'workspace' | 'bashSandbox' | 'plugins' | 'tools'>;

/** A config with a fresh temporary workspace, removed after the test. */
async function config(t: TestContext, overrides: Partial<ToolsetConfig> = {}): Promise<ToolsetConfig> {
  const workspace = await mkdtemp(path.join(tmpdir(), 'toolport-toolset-'));
  t.after(() => rm(workspace, { recursive: true, force: true }));
  return { workspace, bashSandbox: false, plugins: [], tools: undefined, ...overrides };
}

const names = (registry: ToolRegistry): string[] => registry.list().map((t) => t.name);

describe('createToolset', () => {
  test('serves every built-in tool by default, Echo among them', async (t) => {
    const registry = await createToolset(await config(t), REPO);
    assert.ok(registry instanceof ToolRegistry);
    assert.ok(names(registry).includes('Echo'), names(registry).join(', '));
    assert.equal(registry.get('Echo'), Echo);
    assert.equal(new Set(names(registry)).size, names(registry).length, 'no name twice');
  });

  test("serves plug-ins' tools after the built-in ones", async (t) => {
    const builtins = names(await createToolset(await config(t), REPO));
    const registry = await createToolset(await config(t, { plugins: [TOOL_ARRAY] }), REPO);
    assert.deepEqual(names(registry), [...builtins, 'PluginA', 'PluginB']);
  });

  test('TOOLPORT_TOOLS narrows the tools to the ones it names', async (t) => {
    const registry = await createToolset(await config(t, { tools: ['Echo'] }), REPO);
    assert.deepEqual(names(registry), ['Echo']);
    assert.deepEqual(registry.toAPI('anthropic').map((tool) => tool.name), ['Echo']);
  });

  test('TOOLPORT_TOOLS orders the tools as it lists them, plug-in tools included', async (t) => {
    const registry = await createToolset(await config(t, { plugins: [TOOL_ARRAY], tools: ['PluginB', 'Echo', 'PluginA'] }), REPO);
    assert.deepEqual(names(registry), ['PluginB', 'Echo', 'PluginA']);
  });

  test('a narrowed toolset validates input with the served tools\' schemas', async (t) => {
    const registry = await createToolset(await config(t, { tools: ['Echo'] }), REPO);
    const validate = registry.validator('Echo');
    assert.ok(validate);
    assert.equal(validate({ text: 'hi' }), true);
    assert.equal(validate({}), false);
  });

  test('a name in TOOLPORT_TOOLS that no one registered fails naming TOOLPORT_TOOLS and listing the available tools', async (t) => {
    const available = names(await createToolset(await config(t, { plugins: [TOOL_ARRAY] }), REPO));
    await assert.rejects(createToolset(await config(t, { plugins: [TOOL_ARRAY], tools: ['Echo', 'Nope'] }), REPO), (err: unknown) => {
      assert.ok(err instanceof UnknownToolError, `expected UnknownToolError, got ${String(err)}`);
      assert.equal(err.name, 'UnknownToolError');
      assert.equal(err.message, `Invalid TOOLPORT_TOOLS: no tool named "Nope". Available tools: ${available.join(', ')}.`);
      assert.ok(available.includes('Echo') && available.includes('PluginA'));
      return true;
    });
  });

  test('names in TOOLPORT_TOOLS are case-sensitive', async (t) => {
    await assert.rejects(createToolset(await config(t, { tools: ['echo'] }), REPO), {
      name: 'UnknownToolError',
      message: /^Invalid TOOLPORT_TOOLS: no tool named "echo"\. Available tools: .*\bEcho\b/,
    });
  });

  test('a name listed twice in TOOLPORT_TOOLS fails naming TOOLPORT_TOOLS', async (t) => {
    await assert.rejects(createToolset(await config(t, { tools: ['Echo', 'Echo'] }), REPO), {
      message: /^Invalid TOOLPORT_TOOLS: .*"Echo"/,
    });
  });

  test('a plug-in that fails to load fails the toolset with its PluginLoadError', async (t) => {
    await assert.rejects(createToolset(await config(t, { plugins: ['./test/fixtures/plugins/not-a-tool.ts'] }), REPO), PluginLoadError);
  });

  test("a plug-in tool that reuses a built-in's name is refused", async (t) => {
    const dir = await mkdtemp(path.join(tmpdir(), 'toolport-toolset-plugin-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    await writeFile(
      path.join(dir, 'echo-again.mjs'),
      "export default { name: 'Echo', description: 'Again.', inputSchema: { type: 'object' }, execute: () => ({ content: [] }) };\n",
    );
    await assert.rejects(createToolset(await config(t, { plugins: ['./echo-again.mjs'] }), dir), {
      name: 'PluginLoadError',
      message: 'Plug-in "./echo-again.mjs" failed to load: Cannot register tool "Echo": a tool with this name is already registered',
    });
  });
});
