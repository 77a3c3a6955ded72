import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { test } from 'node:test';
import { Ajv } from 'ajv';
import { precompiledValidatorsSource } from '../../scripts/precompiled-validators.js';
import { PRECOMPILED_VALIDATORS } from '#src/tools/validators.generated.js';
import { ToolRegistry } from '#src/core/registry.js';
import { createAjv } from '#src/core/validator.js';
import { builtinTools } from '#src/tools/index.js';
import { withTemporaryDirectory } from '../support/workspace.js';

const COMMITTED = path.resolve(import.meta.dirname, '../../src/tools/validators.generated.ts');

test("the committed precompiled validators are what the built-in tools' schemas give (npm run validators rewrites them)", async () => {
  const generated = await withTemporaryDirectory('toolport-validators-', precompiledValidatorsSource);
  assert.ok(generated === (await readFile(COMMITTED, 'utf8')), 'src/tools/validators.generated.ts is out of date: run npm run validators');
});

test('every built-in tool has a precompiled validator that judges input as Ajv compiling its schema does', async () => {
  const tools = await withTemporaryDirectory('toolport-validators-', (workspace) => builtinTools({ workspace, bashSandbox: false }));
  const inputs: unknown[] = [
    {},
    { unknown: 1 },
    null,
    [],
    'text',
    { command: 'ls', timeout: 0 },
    { path: 1 },
    { file_path: '/a', offset: -1 },
    { pattern: 'x', output_mode: 'lines' },
  ];
  for (const tool of tools) {
    const precompiled = PRECOMPILED_VALIDATORS.get(JSON.stringify(tool.inputSchema)) as ((data: unknown) => boolean) & { errors?: unknown };
    assert.ok(precompiled !== undefined, `${tool.name} has a precompiled validator`);
    const compiled = createAjv().compile(tool.inputSchema);
    for (const input of inputs) {
      const valid = precompiled(input);
      assert.equal(valid, compiled(input), `${tool.name} judges ${JSON.stringify(input)} the same`);
      // The precompiled one stops at the first violation; it is the first the other lists.
      if (!valid)
        assert.deepEqual((precompiled.errors as unknown[])[0], compiled.errors?.[0], `${tool.name}: the same first violation of ${JSON.stringify(input)}`);
    }
  }
});

test('every built-in output schema has a precompiled validator that judges as Ajv compiling the schema does', async () => {
  const tools = await withTemporaryDirectory('toolport-validators-', (workspace) => builtinTools({ workspace, bashSandbox: false }));
  const withOutput = tools.filter((tool) => tool.outputSchema !== undefined);
  assert.deepEqual(
    withOutput.map((tool) => tool.name),
    ['LS'],
  );
  const values: unknown[] = [
    {},
    { path: '.', entries: [], total: 0, ignored: 0 },
    { path: '.', entries: [{ name: 'a', type: 'fifo' }], total: 1, ignored: 0 },
    { path: '.', entries: [{ name: 'l', type: 'symlink', target: 'a' }], total: -1, ignored: 0 },
    { path: '.', entries: [], total: 0, ignored: 0, more: true },
  ];
  for (const tool of withOutput) {
    const precompiled = PRECOMPILED_VALIDATORS.get(JSON.stringify(tool.outputSchema)) as ((data: unknown) => boolean) & { errors?: unknown };
    assert.ok(precompiled !== undefined, `${tool.name}'s output schema has a precompiled validator`);
    const compiled = createAjv().compile(tool.outputSchema!);
    for (const value of values) {
      const valid = precompiled(value);
      assert.equal(valid, compiled(value), `${tool.name} judges ${JSON.stringify(value)} the same`);
      if (!valid)
        assert.deepEqual((precompiled.errors as unknown[])[0], compiled.errors?.[0], `${tool.name}: the same first violation of ${JSON.stringify(value)}`);
    }
  }
});

test("a registry checks the built-in tools' input with their precompiled validators, compiling none of their schemas", async (t) => {
  const tools = await withTemporaryDirectory('toolport-validators-', (workspace) => builtinTools({ workspace, bashSandbox: false }));
  const compile = t.mock.method(Ajv.prototype, 'compile');
  const registry = new ToolRegistry();
  for (const tool of tools) registry.register(tool);
  for (const tool of tools) assert.equal(registry.validator(tool.name)!({ surely: 'not' }), false, `${tool.name} refuses an unknown property`);
  assert.equal(compile.mock.callCount(), 0);
});
