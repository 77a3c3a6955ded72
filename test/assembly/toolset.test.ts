import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Writable } from 'node:stream';
import { describe, test, type TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { ToolRegistry } from '#src/core/registry.js';
import { PluginLoadError } from '#src/assembly/plugins.js';
import { Echo } from '#src/tools/index.js';
import { sandboxUnavailableReason } from '#src/os/sandbox/bubblewrap.js';
import { UnknownToolError, createToolset, secretFiles, type ToolsetConfig } from '#src/assembly/toolset.js';
import { requireOrSkip } from '../support/require.js';
import { toolContext } from '../support/tool-context.js';
import { temporaryDirectory } from '../support/workspace.js';

const REPO = fileURLToPath(new URL('../..', import.meta.url));
const TOOL_ARRAY = './test/fixtures/plugins/tool-array.ts';

/** A config with a fresh temporary workspace, removed after the test. */
async function config(t: TestContext, overrides: Partial<ToolsetConfig> = {}): Promise<ToolsetConfig> {
  const workspace = await temporaryDirectory(t, 'toolport-toolset-');
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
    assert.deepEqual(
      registry.toAPI('anthropic').map((tool) => tool.name),
      ['Echo'],
    );
  });

  test('TOOLPORT_TOOLS orders the tools as it lists them, plug-in tools included', async (t) => {
    const registry = await createToolset(await config(t, { plugins: [TOOL_ARRAY], tools: ['PluginB', 'Echo', 'PluginA'] }), REPO);
    assert.deepEqual(names(registry), ['PluginB', 'Echo', 'PluginA']);
  });

  test("a narrowed toolset validates input with the served tools' schemas", async (t) => {
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
    const dir = await temporaryDirectory(t, 'toolport-toolset-plugin-');
    await writeFile(
      path.join(dir, 'echo-again.mjs'),
      "export default { name: 'Echo', description: 'Again.', inputSchema: { type: 'object' }, execute: () => ({ content: [] }) };\n",
    );
    await assert.rejects(createToolset(await config(t, { plugins: ['./echo-again.mjs'] }), dir), {
      name: 'PluginLoadError',
      message: 'Plug-in "./echo-again.mjs" failed to load: Cannot register tool "Echo": a tool with this name is already registered',
    });
  });

  test('secretFiles lists the API keys file and the plug-ins given as paths, resolved against cwd', () => {
    const files = secretFiles(
      { workspace: '/ws', bashSandbox: 'auto', plugins: ['./p.js', 'some-package', '/opt/q.mjs'], tools: undefined, apiKeysFile: 'keys.json' },
      '/srv/app',
    );
    assert.deepEqual(files, ['/srv/app/keys.json', '/srv/app/p.js', '/opt/q.mjs']);
    assert.deepEqual(secretFiles({ workspace: '/ws', bashSandbox: 'auto', plugins: [], tools: undefined }, '/srv/app'), []);
  });

  test('createToolset has Bash say through the given logger which mode it runs in and why', async (t) => {
    const lines: Record<string, unknown>[] = [];
    const stream = new Writable({
      write(chunk, _enc, done) {
        for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
        done();
      },
    });
    await createToolset(await config(t, { bashSandbox: false }), REPO, pino({ level: 'info' }, stream));
    const modes = (): Record<string, unknown>[] => lines.filter((l) => 'bashSandbox' in l);
    assert.equal(modes().length, 1);
    assert.equal(modes()[0]!.bashSandbox, 'off');
    assert.equal(modes()[0]!.reason, 'TOOLPORT_BASH_SANDBOX=false');
    // A server's toolset (one with a logger) sweeps the workspace in the background and says so.
    const deadline = Date.now() + 5_000;
    while (!lines.some((l) => l.msg === 'removed what a crash left in the workspace') && Date.now() < deadline) await delay(10);
    assert.deepEqual(
      lines.filter((l) => l.msg === 'removed what a crash left in the workspace').map((l) => [l.removed, l.partial]),
      [[0, false]],
    );
    // Without a logger nothing is written anywhere, and nothing is swept.
    const before = lines.length;
    await createToolset(await config(t, { bashSandbox: false }), REPO);
    assert.equal(lines.length, before);
  });

  test("the toolset's sandboxed Bash cannot read the API keys file", async (t) => {
    const keysDir = await temporaryDirectory(t, 'toolport-toolset-keys-', '/var/tmp');
    await writeFile(path.join(keysDir, 'keys.json'), '[{"label":"ci","key":"sk-toolset-test-0123456789"}]');
    const cfg = await config(t, { bashSandbox: true, apiKeysFile: path.join(keysDir, 'keys.json') });
    const unavailable = await sandboxUnavailableReason(cfg.workspace);
    if (!requireOrSkip(t, 'bubblewrap', unavailable)) return;
    const registry = await createToolset(cfg, REPO);
    const bash = registry.get('Bash')!;
    const context = toolContext();
    const result = await bash.execute({ command: `cat ${path.join(keysDir, 'keys.json')}` }, context);
    const block = result.content[0];
    assert.equal(result.isError, true);
    assert.match(block?.type === 'text' ? block.text : '', /No such file or directory/);
    assert.doesNotMatch(JSON.stringify(result), /sk-toolset-test/);
  });
});
