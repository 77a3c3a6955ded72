import assert from 'node:assert/strict';
import { after, describe, test, type TestContext } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Ajv } from 'ajv';
import { ToolRegistry } from '#src/core/registry.js';
import { textResult } from '#src/core/result.js';
import { SchemaCompiler } from '#src/core/schema-compiler/compiler.js';
import type { ObjectSchema, ToolDef } from '#src/core/types.js';

// What a source (an upstream MCP server) lists is not the operator's code: how its schemas
// compile, how long the compiled schemas are held, and what an $id may collide with.

/** One compilation seen by `spyOnCompile`: the instance that compiled, and the size of the code it made. */
interface Compilation {
  ajv: WeakRef<Ajv>;
  options: Ajv['opts'];
  codeChars: number;
}

/** Records every `compile` of every Ajv instance (draft-07 and 2020 share the method) until the test ends. */
function spyOnCompile(t: TestContext): Compilation[] {
  const core = Object.getPrototypeOf(Ajv.prototype) as { compile: Ajv['compile'] };
  assert.ok(Object.hasOwn(core, 'compile'), "Ajv's compile has moved: the spy needs updating");
  const original = core.compile;
  const seen: Compilation[] = [];
  core.compile = function (this: Ajv, ...args: Parameters<Ajv['compile']>) {
    const compiled = original.apply(this, args);
    seen.push({ ajv: new WeakRef(this), options: this.opts, codeChars: compiled.toString().length });
    return compiled;
  } as Ajv['compile'];
  t.after(() => {
    core.compile = original;
  });
  return seen;
}

/** A full garbage collection, so a WeakRef to what nothing holds any more reads undefined. */
async function collectGarbage(): Promise<void> {
  // WeakRefs read in this turn keep their targets until it ends.
  await new Promise((resolve) => setImmediate(resolve));
  setFlagsFromString('--expose-gc');
  (runInNewContext('gc') as () => void)();
}

const tool = (name: string, inputSchema: ObjectSchema, extra: Partial<ToolDef> = {}): ToolDef => ({
  name,
  description: '',
  inputSchema,
  execute: () => textResult(''),
  ...extra,
});

/** A fresh object each call, as a re-list gives: `tag` changes the definition. */
const schema = (tag = ''): ObjectSchema => ({ type: 'object', description: tag, properties: { a: { type: 'string', maxLength: 9 } } });
const list = (count: number, tagOf: (i: number) => string = () => ''): ToolDef[] =>
  Array.from({ length: count }, (_, i) => tool(`up__t${i}`, schema(tagOf(i))));

describe("a source's schemas: compiling", () => {
  test('a $ref compiles to a call, not a copy of its target: 100 references to a 40-property $defs entry make little code', (t) => {
    const compilations = spyOnCompile(t);
    const d0: ObjectSchema = {
      type: 'object',
      properties: Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`f${i}`, { type: 'string', minLength: 1, maxLength: 9 }])),
      required: ['f0'],
      additionalProperties: false,
    };
    const amplified: ObjectSchema = {
      type: 'object',
      $defs: { d0 },
      properties: Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`p${i}`, { $ref: '#/$defs/d0' }])),
    };
    const registry = new ToolRegistry();
    assert.deepEqual(registry.replaceSource('up', [tool('up__t', amplified)]), []);
    assert.equal(compilations.length, 1);
    assert.equal(compilations[0]!.options.inlineRefs, false);
    // Inlined, each reference copies d0's checks: about 2 MB of code for this 5 KB schema (1.8 s and 124 MiB to compile).
    assert.ok(compilations[0]!.codeChars < 100_000, `${compilations[0]!.codeChars} characters of code`);
    const validate = registry.validator('up__t')!;
    assert.equal(validate({ p0: { f0: 'x' }, p99: { f0: 'y', f39: 'z' } }), true);
    assert.deepEqual(validate.explain({ p0: { f0: 'x' }, p99: { f1: 'too long a string' } }).violations, [
      { path: '$.p99.f0', message: 'is required' },
      { path: '$.p99.f1', message: 'must NOT have more than 9 characters' },
    ]);
  });

  test('the built-in tools and plug-ins compile as before, on their first call: refs inlined, patterns on V8', (t) => {
    const compilations = spyOnCompile(t);
    const registry = new ToolRegistry().register(tool('Own', { type: 'object', properties: { a: { type: 'string' } } }));
    assert.ok(registry.get('Own'));
    assert.equal(compilations.length, 0);
    assert.equal(registry.validator('Own')!({ a: 'x' }), true);
    assert.equal(compilations.length, 1);
    assert.equal(compilations[0]!.options.inlineRefs, true);
    assert.equal(compilations[0]!.options.code.regExp?.code, 'new RegExp');
  });
});

describe("a source's schemas: re-lists", () => {
  test('re-listing the same 50 tools 200 times compiles them once: each keeps its validators', (t) => {
    const compilations = spyOnCompile(t);
    const registry = new ToolRegistry();
    assert.deepEqual(registry.replaceSource('up', list(50)), []);
    assert.equal(compilations.length, 50);
    const first = registry.validator('up__t7');
    for (let round = 0; round < 200; round++) assert.deepEqual(registry.replaceSource('up', list(50)), []);
    assert.equal(compilations.length, 50);
    assert.equal(registry.validator('up__t7'), first);
    assert.equal(registry.list().length, 50);
  });

  test('a re-list compiles only the tools whose schemas changed, with an Ajv of its own', (t) => {
    const compilations = spyOnCompile(t);
    const registry = new ToolRegistry();
    registry.replaceSource('up', list(50));
    const kept = registry.validator('up__t1');
    assert.deepEqual(
      registry.replaceSource(
        'up',
        list(50, (i) => (i === 0 ? 'changed' : '')),
      ),
      [],
    );
    assert.equal(compilations.length, 51);
    assert.notEqual(compilations[50]!.ajv.deref(), compilations[0]!.ajv.deref());
    assert.equal(registry.validator('up__t1'), kept);
    assert.equal(registry.get('up__t0')!.inputSchema.description, 'changed');
    // A new description alone leaves the schemas, and so the validators, as they were.
    registry.replaceSource(
      'up',
      list(50, (i) => (i === 0 ? 'changed' : '')).map((d) => ({ ...d, description: 'new words' })),
    );
    assert.equal(compilations.length, 51);
    assert.equal(registry.get('up__t3')!.description, 'new words');
  });

  test('200 re-lists that change their tools leave at most two lists of compiled schemas held', async (t) => {
    const compilations = spyOnCompile(t);
    const registry = new ToolRegistry();
    const listed: Array<WeakRef<object>> = [];
    const relist = (tagOf: (i: number) => string): void => {
      const tools = list(20, tagOf);
      for (const d of tools) listed.push(new WeakRef(d.inputSchema));
      assert.deepEqual(registry.replaceSource('up', tools), []);
    };
    // Every tool changes; then one tool a time, a different one each time (each list keeps the others' compilations).
    for (let round = 0; round < 100; round++) relist(() => `all ${round}`);
    for (let round = 0; round < 100; round++) relist((i) => (i === round % 20 ? `one ${round}` : 'kept'));
    assert.equal(registry.list().length, 20);
    assert.equal(registry.validator('up__t5')!({ a: 'ok' }), true);
    assert.equal(registry.validator('up__t5')!({ a: 'far too long' }), false);
    await collectGarbage();
    // 4,000 schemas were listed; what the registry holds is its 20 tools and the schemas their compilations were made from.
    const held = listed.filter((ref) => ref.deref() !== undefined).length;
    assert.ok(held <= 2 * 20 + 20, `${held} of ${listed.length} listed schemas still held`);
    const instances = new Set(compilations.map((c) => c.ajv.deref()).filter((ajv) => ajv !== undefined));
    assert.ok(instances.size <= 2, `${instances.size} Ajv instances still held`);
  });
});

// One thread for the file's registries (each has lanes of its own in it): starting one takes about a second.
const compiler = new SchemaCompiler();
after(() => compiler.close());

/** A registry whose sources' listings go in one way or the other: on the event loop (`replaceSource`), or compiled in a thread (`replaceSourceAsync`). */
interface Way {
  name: string;
  registry(): { registry: ToolRegistry; replace(source: string, tools: readonly ToolDef[]): Promise<unknown> };
}
const WAYS: Way[] = [
  {
    name: 'replaceSource',
    registry: () => {
      const registry = new ToolRegistry();
      return { registry, replace: async (source, tools) => registry.replaceSource(source, tools) };
    },
  },
  {
    name: 'replaceSourceAsync',
    registry: () => {
      const registry = new ToolRegistry({ schemaCompiler: compiler });
      return { registry, replace: (source, tools) => registry.replaceSourceAsync(source, tools) };
    },
  },
];

for (const way of WAYS) {
  describe(`a source's schemas: $id (${way.name})`, () => {
    const withId = (id: string, tag = ''): ObjectSchema => ({ $id: id, type: 'object', description: tag, properties: { t: { type: 'string' } } });

    test('a tool with an $id is served again when it is listed again, changed or not', async () => {
      const { registry, replace } = way.registry();
      const id = 'https://example.com/x.json';
      for (const tag of ['', '', 'changed', 'changed', '']) {
        assert.deepEqual(await replace('up', [tool('up__x', withId(id, tag)), tool('up__y', schema(tag))]), []);
        assert.equal(registry.validator('up__x')!({ t: 'ok' }), true);
        assert.equal(registry.validator('up__x')!({ t: 1 }), false);
      }
    });

    test('two sources may use the same $id; one source listing it twice has the second tool refused', async () => {
      const { registry, replace } = way.registry();
      const id = 'https://example.com/issue.json';
      assert.deepEqual(await replace('a', [tool('a__x', withId(id))]), []);
      assert.deepEqual(await replace('b', [tool('b__create_issue', withId(id, 'b'))]), []);
      assert.deepEqual(await replace('a', [tool('a__x', withId(id, 'again'))]), []);
      assert.deepEqual(
        registry.list().map((d) => d.name),
        ['a__x', 'b__create_issue'],
      );
      assert.deepEqual(await replace('c', [tool('c__one', withId(id)), tool('c__two', withId(id, 'two'))]), [
        {
          name: 'c__two',
          reason: `Cannot register tool "c__two": the input schema does not compile: schema with key or id "${id}" already exists`,
        },
      ]);
    });
  });
}

describe("a source's schemas: uniqueItems", () => {
  // Each item counts the reads of its one property: comparing every pair reads each item once per other item.
  const countedItems = (count: number): { items: unknown[]; reads: () => number } => {
    let reads = 0;
    const items = Array.from({ length: count }, (_, i) => ({
      get v() {
        reads++;
        return i;
      },
    }));
    return { items, reads: () => reads };
  };

  for (const way of WAYS) {
    test(`is checked in one pass over the items, in input and in output schemas (${way.name})`, async () => {
      const unique: ObjectSchema = { type: 'object', properties: { a: { type: 'array', uniqueItems: true } } };
      const { registry, replace } = way.registry();
      assert.deepEqual(await replace('up', [tool('up__t', unique, { outputSchema: unique })]), []);
      for (const validate of [registry.validator('up__t')!, registry.outputValidator('up__t')!]) {
        const { items, reads } = countedItems(2_000);
        assert.equal(validate({ a: items }), true);
        // Ajv's own check read 4,000,000 times here (40,000 one-element arrays held the event loop for 11 s).
        assert.ok(reads() <= 2 * items.length, `${reads()} reads of ${items.length} items`);
      }
      const duplicated = [{ x: 1, y: [1, { z: 2 }] }, 'x', { y: [1, { z: 2 }], x: 1 }];
      assert.equal(registry.validator('up__t')!({ a: duplicated }), false);
      assert.deepEqual(registry.validator('up__t')!.explain({ a: duplicated }).violations, [
        { path: '$.a', message: 'must NOT have duplicate items (items ## 0 and 2 are identical)' },
      ]);
      assert.deepEqual(registry.outputValidator('up__t')!.explain({ a: duplicated }).violations, [
        { path: '$.a', message: 'must NOT have duplicate items (items ## 0 and 2 are identical)' },
      ]);
    });
  }

  test("a built-in's or plug-in's schema keeps Ajv's own check", () => {
    const unique: ObjectSchema = { type: 'object', properties: { a: { type: 'array', uniqueItems: true } } };
    const validate = new ToolRegistry().register(tool('Own', unique)).validator('Own')!;
    assert.equal(validate({ a: [[1], [2]] }), true);
    assert.deepEqual(validate.explain({ a: [[1], [2], [1]] }).violations, [
      { path: '$.a', message: 'must NOT have duplicate items (items ## 0 and 2 are identical)' },
    ]);
  });
});

describe("a source's schemas compiled in a thread: re-lists", () => {
  const offLoop = (): ToolRegistry => new ToolRegistry({ schemaCompiler: compiler });

  test('a re-list keeps the validators of the tools whose schemas did not change, and only those', async () => {
    const registry = offLoop();
    assert.deepEqual(await registry.replaceSourceAsync('up', list(20)), []);
    const kept = registry.validator('up__t1');
    const changed = registry.validator('up__t0');
    for (let round = 0; round < 3; round++) {
      assert.deepEqual(
        await registry.replaceSourceAsync(
          'up',
          list(20, (i) => (i === 0 ? 'changed' : '')),
        ),
        [],
      );
    }
    assert.equal(registry.validator('up__t1'), kept);
    assert.notEqual(registry.validator('up__t0'), changed);
    assert.equal(registry.get('up__t0')!.inputSchema.description, 'changed');
    assert.equal(registry.validator('up__t0')!({ a: 'far too long' }), false);
  });

  test('40 re-lists that change their tools leave at most two lists of compiled schemas held', async () => {
    const registry = offLoop();
    const listed: Array<WeakRef<object>> = [];
    const validators: Array<WeakRef<object>> = [];
    const relist = async (tagOf: (i: number) => string): Promise<void> => {
      const tools = list(10, tagOf);
      for (const d of tools) listed.push(new WeakRef(d.inputSchema));
      assert.deepEqual(await registry.replaceSourceAsync('up', tools), []);
      for (const d of tools) validators.push(new WeakRef(registry.validator(d.name)!));
    };
    for (let round = 0; round < 20; round++) await relist(() => `all ${round}`);
    for (let round = 0; round < 20; round++) await relist((i) => (i === round % 10 ? `one ${round}` : 'kept'));
    assert.equal(registry.validator('up__t5')!({ a: 'far too long' }), false);
    await collectGarbage();
    const held = listed.filter((ref) => ref.deref() !== undefined).length;
    assert.ok(held <= 2 * 10 + 10, `${held} of ${listed.length} listed schemas still held`);
    const heldValidators = new Set(validators.map((ref) => ref.deref()).filter((v) => v !== undefined));
    assert.ok(heldValidators.size <= 2 * 10, `${heldValidators.size} validators still held`);
  });
});
