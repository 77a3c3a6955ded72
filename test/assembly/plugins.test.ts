import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, test, type TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import { ToolExecutor } from '#src/core/executor.js';
import { ToolRegistry } from '#src/core/registry.js';
import { PluginLoadError, loadPlugins } from '#src/assembly/plugins.js';
import { temporaryDirectory } from '../support/workspace.js';

const REPO = fileURLToPath(new URL('../..', import.meta.url));
const FIXTURES = './test/fixtures/plugins';
const fixture = (file: string): string => `${FIXTURES}/${file}`;

const names = (registry: ToolRegistry): string[] => registry.list().map((t) => t.name);

/** Asserts that loading `spec` fails with a PluginLoadError naming it, with a reason matching `reason`. */
async function assertLoadFails(spec: string, reason: string | RegExp, cwd = REPO, registry = new ToolRegistry()): Promise<void> {
  await assert.rejects(loadPlugins([spec], registry, cwd), (err: unknown) => {
    assert.ok(err instanceof PluginLoadError, `expected PluginLoadError, got ${String(err)}`);
    assert.equal(err.name, 'PluginLoadError');
    assert.equal(err.plugin, spec);
    const prefix = `Plug-in "${spec}" failed to load: `;
    assert.ok(err.message.startsWith(prefix), err.message);
    const rest = err.message.slice(prefix.length);
    if (typeof reason === 'string') assert.equal(rest, reason);
    else assert.match(rest, reason);
    return true;
  });
}

/** A temporary directory holding `node_modules/<name>` with these files; removed after the test. */
async function packageDir(t: TestContext, name: string, files: Record<string, string>): Promise<string> {
  const dir = await temporaryDirectory(t, 'toolport-plugins-');
  const root = path.join(dir, 'node_modules', name);
  await mkdir(root, { recursive: true });
  for (const [file, text] of Object.entries(files)) await writeFile(path.join(root, file), text);
  return dir;
}

const PACKAGE_TOOL = `export default {
  name: 'PackagedTool',
  description: 'Comes from a package.',
  inputSchema: { type: 'object', additionalProperties: false },
  execute: () => ({ content: [{ type: 'text', text: 'packaged' }] }),
};
`;

describe('loadPlugins loads', () => {
  test('a module whose default export is one tool', async () => {
    const registry = new ToolRegistry();
    await loadPlugins([fixture('one-tool.ts')], registry, REPO);
    assert.deepEqual(names(registry), ['PluginOne']);
  });

  test('a module whose default export is an array of tools, in order', async () => {
    const registry = new ToolRegistry();
    await loadPlugins([fixture('tool-array.ts')], registry, REPO);
    assert.deepEqual(names(registry), ['PluginA', 'PluginB']);
  });

  test('tools that declare output schemas, whose structured content the pipeline checks against them', async () => {
    const registry = new ToolRegistry();
    await loadPlugins([fixture('structured-tools.ts')], registry, REPO);
    assert.deepEqual(names(registry), ['Files', 'BadFiles']);
    assert.deepEqual(registry.get('Files')?.outputSchema?.required, ['files', 'count']);
    const executor = new ToolExecutor({ registry });
    assert.deepEqual(await executor.call('Files', { names: ['a.ts'] }), { content: [], isError: false, structuredContent: { files: ['a.ts'], count: 1 } });
    assert.deepEqual(await executor.call('BadFiles', {}), {
      content: [
        {
          type: 'text',
          text: 'Tool "BadFiles" returned structuredContent that does not match its output schema:\n- $.extra: is not an allowed property\n- $.count: must be integer',
        },
      ],
      isError: true,
    });
    assert.deepEqual(
      registry.toAPI('mcp').tools.map((tool) => tool.outputSchema),
      [registry.get('Files')?.outputSchema, registry.get('BadFiles')?.outputSchema],
    );
  });

  test('a module whose default export is a function receiving the registry', async () => {
    const registry = new ToolRegistry();
    await loadPlugins([fixture('register-function.ts')], registry, REPO);
    assert.deepEqual(names(registry), ['PluginRegistered']);
  });

  test('a module whose default export is an async function, awaited before the next plug-in', async () => {
    const registry = new ToolRegistry();
    await loadPlugins([fixture('async-function.ts'), fixture('one-tool.ts')], registry, REPO);
    assert.deepEqual(names(registry), ['PluginAsync', 'PluginOne']);
  });

  test('several plug-ins in the order given, after the tools already registered', async () => {
    const registry = new ToolRegistry().register({ name: 'Existing', description: 'd', inputSchema: { type: 'object' }, execute: () => ({ content: [] }) });
    await loadPlugins([fixture('tool-array.ts'), fixture('register-function.ts'), fixture('one-tool.ts')], registry, REPO);
    assert.deepEqual(names(registry), ['Existing', 'PluginA', 'PluginB', 'PluginRegistered', 'PluginOne']);
  });

  test('a file path relative to the given cwd', async () => {
    const registry = new ToolRegistry();
    await loadPlugins(['./plugins/one-tool.ts'], registry, path.join(REPO, 'test', 'fixtures'));
    assert.deepEqual(names(registry), ['PluginOne']);
  });

  test('an absolute file path', async () => {
    const registry = new ToolRegistry();
    await loadPlugins([path.join(REPO, 'test', 'fixtures', 'plugins', 'one-tool.ts')], registry, '/');
    assert.deepEqual(names(registry), ['PluginOne']);
  });

  test('nothing for an empty list', async () => {
    const registry = new ToolRegistry();
    await loadPlugins([], registry, REPO);
    assert.deepEqual(names(registry), []);
  });

  test('a package name, resolved from cwd through node_modules (main)', async (t) => {
    const cwd = await packageDir(t, 'toolport-plugin-fixture', {
      'package.json': JSON.stringify({ name: 'toolport-plugin-fixture', version: '1.0.0', type: 'module', main: 'index.js' }),
      'index.js': PACKAGE_TOOL,
    });
    const registry = new ToolRegistry();
    await loadPlugins(['toolport-plugin-fixture'], registry, cwd);
    assert.deepEqual(names(registry), ['PackagedTool']);
  });

  test('a scoped package name whose exports map has a default condition', async (t) => {
    const cwd = await packageDir(t, '@acme/tools', {
      'package.json': JSON.stringify({ name: '@acme/tools', version: '1.0.0', type: 'module', exports: { '.': { default: './tools.js' } } }),
      'tools.js': PACKAGE_TOOL,
    });
    const registry = new ToolRegistry();
    await loadPlugins(['@acme/tools'], registry, cwd);
    assert.deepEqual(names(registry), ['PackagedTool']);
  });

  test('an ESM-only package whose exports map has only an "import" condition', async (t) => {
    const cwd = await packageDir(t, 'esm-only-tools', {
      'package.json': JSON.stringify({ name: 'esm-only-tools', version: '1.0.0', type: 'module', exports: { '.': { import: './index.js' } } }),
      'index.js': PACKAGE_TOOL,
    });
    const registry = new ToolRegistry();
    await loadPlugins(['esm-only-tools'], registry, cwd);
    assert.deepEqual(names(registry), ['PackagedTool']);
  });
});

describe('loadPlugins fails with a PluginLoadError naming the plug-in and the reason for', () => {
  test('a module that throws at import', async () => {
    await assertLoadFails(fixture('throws-at-import.ts'), 'fixture exploded at import');
  });

  test('a module that throws a non-Error at import', async () => {
    await assertLoadFails(fixture('throws-string-at-import.ts'), 'fixture threw a string at import');
  });

  test('a module whose tool is invalid', async () => {
    await assertLoadFails(fixture('invalid-tool.ts'), 'Cannot register tool "bad name": the name must match ^[a-zA-Z0-9_-]{1,64}$');
  });

  test('a module whose default export is not a tool', async () => {
    await assertLoadFails(fixture('not-a-tool.ts'), 'the default export must be a tool, an array of tools, or a function that receives the registry');
  });

  test('a module without a default export', async () => {
    await assertLoadFails(fixture('no-default.ts'), 'the default export must be a tool, an array of tools, or a function that receives the registry');
  });

  test('a plug-in whose tool is already registered', async () => {
    const registry = new ToolRegistry();
    await loadPlugins([fixture('one-tool.ts')], registry, REPO);
    await assertLoadFails(fixture('one-tool.ts'), 'Cannot register tool "PluginOne": a tool with this name is already registered', REPO, registry);
  });

  test('a missing file', async () => {
    await assertLoadFails(fixture('missing.ts'), /^Cannot find module '.*\/test\/fixtures\/plugins\/missing\.ts'/);
  });

  test('a package that is not installed', async (t) => {
    const cwd = await packageDir(t, 'some-other-package', { 'package.json': '{"name":"some-other-package"}' });
    await assertLoadFails('toolport-no-such-plugin', /^Cannot find package 'toolport-no-such-plugin'/, cwd);
  });

  test('the first failing plug-in, keeping the tools of those loaded before it', async () => {
    const registry = new ToolRegistry();
    await assertLoadFails(fixture('throws-at-import.ts'), 'fixture exploded at import', REPO, registry);
    await assert.rejects(loadPlugins([fixture('one-tool.ts'), fixture('not-a-tool.ts'), fixture('tool-array.ts')], registry, REPO), {
      name: 'PluginLoadError',
      plugin: fixture('not-a-tool.ts'),
    });
    assert.deepEqual(names(registry), ['PluginOne']);
  });
});
