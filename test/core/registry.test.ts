import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Type } from 'typebox';
import { defineTool } from '#src/core/define-tool.js';
import { ToolRegistrationError } from '#src/core/errors.js';
import { ToolExecutor } from '#src/core/executor.js';
import { ToolRegistry } from '#src/core/registry.js';
import { textResult } from '#src/core/result.js';
import type { ObjectSchema, ToolDef } from '#src/core/types.js';

const NAME_RULE = 'the name must match ^[a-zA-Z0-9_-]{1,64}$';
const ROOT_RULE = 'the input schema\'s root must be { "type": "object" }';
const propertyRule = (prop: string): string => `property name ${JSON.stringify(prop)} must match ^[a-zA-Z0-9_.-]{1,64}$`;

/** A well-formed plain tool; override any field to break one rule at a time. */
function tool(overrides: Partial<ToolDef> = {}): ToolDef {
  return {
    name: 'Sample',
    description: 'A sample tool.',
    inputSchema: { type: 'object', properties: { text: { type: 'string' } }, additionalProperties: false },
    execute: () => textResult('ok'),
    ...overrides,
  };
}

/** Asserts that registering `def` throws a ToolRegistrationError with exactly this message. */
function assertRefused(def: unknown, toolName: string, rule: string, registry = new ToolRegistry()): void {
  const before = registry.list().length;
  assert.throws(
    () => registry.register(def as ToolDef),
    (err: unknown) => {
      assert.ok(err instanceof ToolRegistrationError, `expected ToolRegistrationError, got ${String(err)}`);
      assert.equal(err.name, 'ToolRegistrationError');
      assert.equal(err.tool, toolName);
      assert.equal(err.message, `Cannot register tool "${toolName}": ${rule}`);
      return true;
    },
  );
  assert.equal(registry.list().length, before, 'a refused tool is not registered');
}

describe('ToolRegistry.register refuses', () => {
  test('a second tool with a name already registered', () => {
    const registry = new ToolRegistry().register(tool());
    assertRefused(tool({ description: 'Another.' }), 'Sample', 'a tool with this name is already registered', registry);
    assert.equal(registry.get('Sample')?.description, 'A sample tool.', 'the first tool stays');
  });

  for (const [label, name] of [
    ['an empty name', ''],
    ['a name of 65 characters', 'a'.repeat(65)],
    ['a name with a space', 'read file'],
    ['a name with a dot', 'files.read'],
    ['a name with a non-ASCII letter', 'lire_fiché'],
    ['a name with a trailing newline', 'Read\n'],
  ] as const) {
    test(`${label}`, () => assertRefused(tool({ name }), name, NAME_RULE));
  }

  // String(42) passes the name pattern, so the number 42 is registered and published as `name: 42`.
  test('a tool whose name is a number', () => {
    assertRefused(tool({ name: 42 as unknown as string }), '42', NAME_RULE);
  });

  test('a tool whose name is missing', () => {
    assertRefused(tool({ name: undefined as unknown as string }), 'undefined', NAME_RULE);
  });

  test('a description that is not a string', () => {
    assertRefused(tool({ description: undefined as unknown as string }), 'Sample', 'the description must be a string');
  });

  test('an execute that is not a function', () => {
    assertRefused(tool({ execute: 'run' as unknown as ToolDef['execute'] }), 'Sample', 'execute must be a function');
  });

  test('a missing input schema', () => {
    assertRefused(tool({ inputSchema: undefined as unknown as ObjectSchema }), 'Sample', ROOT_RULE);
  });

  test("a schema whose root type is 'array'", () => {
    assertRefused(tool({ inputSchema: { type: 'array', items: {} } as unknown as ObjectSchema }), 'Sample', ROOT_RULE);
  });

  test('a schema root without a type', () => {
    assertRefused(tool({ inputSchema: { properties: {} } as unknown as ObjectSchema }), 'Sample', ROOT_RULE);
  });

  test('a schema root whose type is a list that includes object', () => {
    assertRefused(tool({ inputSchema: { type: ['object', 'null'] } as unknown as ObjectSchema }), 'Sample', ROOT_RULE);
  });

  for (const schema of ['object', true, null, 42]) {
    test(`a schema that is not an object (${JSON.stringify(schema)})`, () => {
      assertRefused(tool({ inputSchema: schema as unknown as ObjectSchema }), 'Sample', ROOT_RULE);
    });
  }

  for (const combinator of ['oneOf', 'anyOf', 'allOf']) {
    test(`${combinator} at the schema root`, () => {
      const inputSchema = { type: 'object', [combinator]: [{ required: ['a'] }, { required: ['b'] }] } as ObjectSchema;
      assertRefused(tool({ inputSchema }), 'Sample', `the input schema's root must not use ${combinator}`);
    });
  }

  test('a schema Ajv cannot compile', () => {
    const inputSchema = { type: 'object', properties: { a: { type: 'nope' } } } as ObjectSchema;
    assert.throws(
      () => new ToolRegistry().register(tool({ inputSchema })),
      (err: unknown) => {
        assert.ok(err instanceof ToolRegistrationError);
        assert.equal(err.tool, 'Sample');
        assert.match(err.message, /^Cannot register tool "Sample": the input schema does not compile: schema is invalid: data\/properties\/a\/type /);
        return true;
      },
    );
  });

  test('a schema with a $ref Ajv cannot resolve', () => {
    const inputSchema = { type: 'object', properties: { a: { $ref: '#/$defs/missing' } } } as ObjectSchema;
    assert.throws(
      () => new ToolRegistry().register(tool({ inputSchema })),
      (err: unknown) => {
        assert.ok(err instanceof ToolRegistrationError);
        assert.match(err.message, /^Cannot register tool "Sample": the input schema does not compile: can't resolve reference #\/\$defs\/missing/);
        return true;
      },
    );
  });

  for (const prop of ['file path', 'a/b', 'ключ', '', 'p'.repeat(65)]) {
    test(`a root property named ${JSON.stringify(prop.length > 10 ? `${prop.slice(0, 3)}...(${prop.length})` : prop)}`, () => {
      const inputSchema: ObjectSchema = { type: 'object', properties: { ok: { type: 'string' }, [prop]: { type: 'string' } } };
      assertRefused(tool({ inputSchema }), 'Sample', propertyRule(prop));
    });
  }

  test('a bad property name nested in an object property', () => {
    const inputSchema: ObjectSchema = {
      type: 'object',
      properties: { outer: { type: 'object', properties: { 'inner key': { type: 'string' } } } },
    };
    assertRefused(tool({ inputSchema }), 'Sample', propertyRule('inner key'));
  });

  test('a bad property name nested in array items', () => {
    const inputSchema: ObjectSchema = {
      type: 'object',
      properties: { list: { type: 'array', items: { type: 'object', properties: { 'a:b': { type: 'number' } } } } },
    };
    assertRefused(tool({ inputSchema }), 'Sample', propertyRule('a:b'));
  });

  test('a bad property name inside $defs', () => {
    const inputSchema: ObjectSchema = {
      type: 'object',
      properties: { thing: { $ref: '#/$defs/Thing' } },
      $defs: { Thing: { type: 'object', properties: { 'two words': { type: 'string' } } } },
    };
    assertRefused(tool({ inputSchema }), 'Sample', propertyRule('two words'));
  });

  for (const timeoutMs of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, '1000']) {
    test(`timeoutMs ${typeof timeoutMs === 'string' ? JSON.stringify(timeoutMs) : String(timeoutMs)}`, () => {
      assertRefused(tool({ timeoutMs: timeoutMs as number }), 'Sample', 'timeoutMs must be a positive integer of at most 2147483647');
    });
  }

  // setTimeout clamps any delay above 2^31-1 ms to 1 ms, so such a tool would time out at once.
  test('timeoutMs above the largest delay setTimeout honours (2^31 - 1 ms)', () => {
    assertRefused(tool({ timeoutMs: 2 ** 31 }), 'Sample', 'timeoutMs must be a positive integer of at most 2147483647');
  });
});

describe('ToolRegistry.register accepts', () => {
  test('names and property names at the edges of the rules', () => {
    const name = `a-b_C9${'x'.repeat(58)}`;
    assert.equal(name.length, 64);
    const inputSchema: ObjectSchema = { type: 'object', properties: { 'file.path-2_x': { type: 'string' }, ['p'.repeat(64)]: { type: 'string' } } };
    const registry = new ToolRegistry().register(tool({ name, inputSchema, timeoutMs: 1 }));
    assert.equal(registry.get(name)?.name, name);
  });

  test('enum, const, default and examples values that look like bad property names', () => {
    const inputSchema: ObjectSchema = {
      type: 'object',
      properties: {
        mode: {
          type: 'object',
          enum: [{ properties: { 'a b': 1 } }],
          const: { properties: { 'a b': 1 } },
          default: { properties: { 'a b': 1 } },
          examples: [{ properties: { 'a b': 1 } }],
        },
      },
    };
    assert.doesNotThrow(() => new ToolRegistry().register(tool({ inputSchema })));
  });

  test('a schema with vendor keywords and annotations (Ajv is not strict)', () => {
    const inputSchema: ObjectSchema = { type: 'object', 'x-vendor': true, $comment: 'hi', properties: { a: { type: 'string', examples: ['x'] } } };
    assert.doesNotThrow(() => new ToolRegistry().register(tool({ inputSchema })));
  });

  test('returns the registry so registrations chain', () => {
    const registry = new ToolRegistry();
    assert.equal(registry.register(tool({ name: 'A' })), registry);
  });

  test('the same tool in two registries, each with its own compiled validator', () => {
    const def = tool();
    const one = new ToolRegistry().register(def);
    const two = new ToolRegistry().register(def);
    assert.equal(one.get('Sample'), two.get('Sample'));
    assert.equal(typeof one.validator('Sample'), 'function');
    assert.equal(typeof two.validator('Sample'), 'function');
  });

  test('two registries whose tools carry distinct schema objects with the same $id', () => {
    const make = (): ToolDef => tool({ inputSchema: { $id: 'https://toolport.test/sample-input', type: 'object', properties: {} } });
    new ToolRegistry().register(make());
    assert.doesNotThrow(() => new ToolRegistry().register(make()));
  });
});

describe('ToolRegistry lookups', () => {
  test('list() returns the tools in registration order', () => {
    const registry = new ToolRegistry();
    for (const name of ['Zeta', 'alpha', 'Mid', 'beta']) registry.register(tool({ name }));
    assert.deepEqual(
      registry.list().map((t) => t.name),
      ['Zeta', 'alpha', 'Mid', 'beta'],
    );
  });

  test('get() returns the registered tool object itself, or undefined', () => {
    const def = tool();
    const registry = new ToolRegistry().register(def);
    assert.equal(registry.get('Sample'), def);
    assert.equal(registry.get('sample'), undefined, 'names are case-sensitive');
    assert.equal(registry.get('Nope'), undefined);
  });

  test('validator() returns the compiled validator of a registered tool, or undefined', () => {
    const registry = new ToolRegistry().register(tool());
    const validate = registry.validator('Sample');
    assert.ok(validate);
    assert.equal(validate({ text: 'hi' }), true);
    assert.equal(validate({ text: 5 }), false);
    assert.equal(registry.validator('Nope'), undefined);
  });
});

describe('ToolRegistry.toAPI', () => {
  const annotated = tool({
    name: 'Annotated',
    description: 'Has annotations.',
    inputSchema: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
    annotations: { title: 'Annotated', readOnlyHint: true },
  });
  const bare = tool({ name: 'Bare', description: 'Has none.', inputSchema: { type: 'object' } });

  test("defaults to the 'anthropic' format", () => {
    const registry = new ToolRegistry().register(annotated);
    assert.deepEqual(registry.toAPI(), registry.toAPI('anthropic'));
    assert.equal(registry.toAPI(), registry.toAPI('anthropic'), 'the default and the explicit format share one cached list');
  });

  test('anthropic: [{ name, description, input_schema }]', () => {
    const registry = new ToolRegistry().register(annotated).register(bare);
    assert.deepEqual(registry.toAPI('anthropic'), [
      {
        name: 'Annotated',
        description: 'Has annotations.',
        input_schema: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
      },
      { name: 'Bare', description: 'Has none.', input_schema: { type: 'object', properties: {} } },
    ]);
  });

  test("openai: [{ type: 'function', function: { name, description, parameters } }]", () => {
    const registry = new ToolRegistry().register(annotated).register(bare);
    assert.deepEqual(registry.toAPI('openai'), [
      {
        type: 'function',
        function: {
          name: 'Annotated',
          description: 'Has annotations.',
          parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
        },
      },
      { type: 'function', function: { name: 'Bare', description: 'Has none.', parameters: { type: 'object', properties: {} } } },
    ]);
  });

  test('mcp: { tools: [{ name, title, description, inputSchema, annotations }] } with title and annotations only when the tool has them', () => {
    const registry = new ToolRegistry().register(annotated).register(bare);
    const mcp = registry.toAPI('mcp');
    assert.deepEqual(mcp, {
      tools: [
        {
          name: 'Annotated',
          title: 'Annotated',
          description: 'Has annotations.',
          inputSchema: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
          annotations: { title: 'Annotated', readOnlyHint: true },
        },
        { name: 'Bare', description: 'Has none.', inputSchema: { type: 'object', properties: {} } },
      ],
    });
    assert.equal('annotations' in mcp.tools[1]!, false);
  });

  test('an empty registry publishes empty lists', () => {
    const registry = new ToolRegistry();
    assert.deepEqual(registry.toAPI('anthropic'), []);
    assert.deepEqual(registry.toAPI('openai'), []);
    assert.deepEqual(registry.toAPI('mcp'), { tools: [] });
  });

  test("a schema without properties is published with properties: {} and the tool's own schema is not mutated", () => {
    const inputSchema: ObjectSchema = { type: 'object', additionalProperties: false };
    const registry = new ToolRegistry().register(tool({ inputSchema }));
    assert.deepEqual(registry.toAPI('anthropic')[0]?.input_schema, { type: 'object', additionalProperties: false, properties: {} });
    assert.deepEqual(registry.toAPI('openai')[0]?.function.parameters, { type: 'object', additionalProperties: false, properties: {} });
    assert.deepEqual(registry.toAPI('mcp').tools[0]?.inputSchema, { type: 'object', additionalProperties: false, properties: {} });
    assert.deepEqual(inputSchema, { type: 'object', additionalProperties: false });
    assert.equal('properties' in inputSchema, false);
    assert.notEqual(registry.toAPI('anthropic')[0]?.input_schema, inputSchema, 'the published schema is a copy');
  });

  test('is computed once per format: the same object is returned each time', () => {
    const registry = new ToolRegistry().register(annotated);
    assert.equal(registry.toAPI('anthropic'), registry.toAPI('anthropic'));
    assert.equal(registry.toAPI('openai'), registry.toAPI('openai'));
    assert.equal(registry.toAPI('mcp'), registry.toAPI('mcp'));
  });

  test('is refreshed after a new register', () => {
    const registry = new ToolRegistry().register(annotated);
    const before = { anthropic: registry.toAPI('anthropic'), openai: registry.toAPI('openai'), mcp: registry.toAPI('mcp') };
    registry.register(bare);
    assert.notEqual(registry.toAPI('anthropic'), before.anthropic);
    assert.notEqual(registry.toAPI('openai'), before.openai);
    assert.notEqual(registry.toAPI('mcp'), before.mcp);
    assert.deepEqual(
      registry.toAPI('anthropic').map((t) => t.name),
      ['Annotated', 'Bare'],
    );
    assert.deepEqual(
      registry.toAPI('openai').map((t) => t.function.name),
      ['Annotated', 'Bare'],
    );
    assert.deepEqual(
      registry.toAPI('mcp').tools.map((t) => t.name),
      ['Annotated', 'Bare'],
    );
    assert.deepEqual(
      before.anthropic.map((t) => t.name),
      ['Annotated'],
      'a list handed out earlier is not changed',
    );
  });

  test('is not refreshed by a refused register', () => {
    const registry = new ToolRegistry().register(annotated);
    const before = registry.toAPI('anthropic');
    assert.throws(() => registry.register(tool({ name: 'bad name' })), ToolRegistrationError);
    assert.equal(registry.toAPI('anthropic'), before);
  });
});

describe('ToolRegistry: scoped and serialised lists', () => {
  const one = tool({ name: 'One', description: 'First.' });
  const two = tool({ name: 'Two', description: 'Second.' });
  const three = tool({ name: 'Three', description: 'Third.' });

  test('a scope lists only its tools, in registration order, whatever the order of the scope', () => {
    const registry = new ToolRegistry().register(one).register(two).register(three);
    const scope = new Set(['Three', 'One', 'Absent']);
    assert.deepEqual(
      registry.toAPI('anthropic', scope).map((t) => t.name),
      ['One', 'Three'],
    );
    assert.deepEqual(
      registry.toAPI('mcp', scope).tools.map((t) => t.name),
      ['One', 'Three'],
    );
    assert.equal(registry.toAPI('openai', scope), registry.toAPI('openai', scope), 'computed once per scope and format');
  });

  test('listJSON is the list as JSON text, made once per scope and format', () => {
    const registry = new ToolRegistry().register(one).register(two);
    const scope = new Set(['Two']);
    assert.equal(registry.listJSON(), JSON.stringify(registry.toAPI('anthropic')));
    assert.equal(registry.listJSON('mcp', scope), JSON.stringify(registry.toAPI('mcp', scope)));
    assert.deepEqual(JSON.parse(registry.listJSON('openai', scope)), registry.toAPI('openai', scope));
  });

  test('tools(scope) is the same frozen array for the same scope, until a new register', () => {
    const registry = new ToolRegistry().register(one).register(two);
    const scope = new Set(['Two']);
    assert.deepEqual(
      registry.tools(scope).map((t) => t.name),
      ['Two'],
    );
    assert.equal(registry.tools(scope), registry.tools(scope));
    assert.equal(registry.tools(), registry.tools());
    assert.ok(Object.isFrozen(registry.tools()));
    const before = registry.tools();
    registry.register(three);
    assert.notEqual(registry.tools(), before);
    assert.deepEqual(
      registry.tools().map((t) => t.name),
      ['One', 'Two', 'Three'],
    );
  });

  test('scoped lists are refreshed after a new register', () => {
    const registry = new ToolRegistry().register(one);
    const scope = new Set(['One', 'Two']);
    assert.deepEqual(
      JSON.parse(registry.listJSON('anthropic', scope)).map((t: { name: string }) => t.name),
      ['One'],
    );
    registry.register(two);
    assert.deepEqual(
      JSON.parse(registry.listJSON('anthropic', scope)).map((t: { name: string }) => t.name),
      ['One', 'Two'],
    );
  });
});

describe('Tool definitions', () => {
  test('a plain object with a hand-written JSON Schema registers and runs', async () => {
    const add: ToolDef = {
      name: 'Add',
      description: 'Adds two integers.',
      inputSchema: {
        type: 'object',
        properties: { a: { type: 'integer' }, b: { type: 'integer' } },
        required: ['a', 'b'],
        additionalProperties: false,
      },
      execute: (input) => textResult(String((input.a as number) + (input.b as number))),
    };
    const registry = new ToolRegistry().register(add);
    const executor = new ToolExecutor({ registry });
    assert.deepEqual(await executor.call('Add', { a: 2, b: 3 }), { content: [{ type: 'text', text: '5' }], isError: false });
    await assert.rejects(executor.call('Add', { a: 2 }), { code: 'INVALID_INPUT' });
  });

  test('defineTool with a TypeBox schema registers, publishes the schema and runs with typed input', async () => {
    const Repeat = defineTool({
      name: 'Repeat',
      description: 'Repeats a word.',
      inputSchema: Type.Object({ word: Type.String(), times: Type.Integer({ minimum: 1 }) }, { additionalProperties: false }),
      annotations: { readOnlyHint: true },
      timeoutMs: 1000,
      execute: ({ word, times }) => textResult(word.repeat(times)),
    });
    const registry = new ToolRegistry().register(Repeat);
    assert.equal(registry.get('Repeat')?.timeoutMs, 1000);
    assert.deepEqual(registry.toAPI('anthropic'), [
      {
        name: 'Repeat',
        description: 'Repeats a word.',
        input_schema: {
          type: 'object',
          required: ['word', 'times'],
          properties: { word: { type: 'string' }, times: { type: 'integer', minimum: 1 } },
          additionalProperties: false,
        },
      },
    ]);
    const executor = new ToolExecutor({ registry });
    assert.deepEqual(await executor.call('Repeat', { word: 'ab', times: 3 }), { content: [{ type: 'text', text: 'ababab' }], isError: false });
    await assert.rejects(executor.call('Repeat', { word: 'ab', times: 0 }), { code: 'INVALID_INPUT' });
  });
});

describe('ToolRegistry.replaceSource', () => {
  const tool = (name: string, description = name): ToolDef => ({ name, description, inputSchema: { type: 'object' }, execute: () => textResult(name) });

  test("puts a source's tools in place of its earlier ones, keeping its place; changes the lists; tells the listeners", () => {
    const registry = new ToolRegistry().register(tool('A'));
    const changes: string[] = [];
    registry.onChange(() =>
      changes.push(
        registry
          .list()
          .map((t) => t.name)
          .join(','),
      ),
    );
    assert.deepEqual(registry.replaceSource('up', [tool('up__x'), tool('up__y')]), []);
    registry.register(tool('B'));
    const before = registry.listBytes();
    assert.deepEqual(registry.replaceSource('up', [tool('up__z')]), []);
    assert.deepEqual(changes, ['A,up__x,up__y', 'A,up__x,up__y,B', 'A,up__z,B']);
    assert.notEqual(registry.listBytes(), before);
    assert.equal(registry.sourceOf('up__z'), 'up');
    assert.equal(registry.sourceOf('A'), '');
    assert.equal(registry.sourceOf('up__x'), undefined);
  });

  test('the same definitions again change nothing: the same bytes, no listener called', () => {
    const registry = new ToolRegistry();
    registry.replaceSource('up', [tool('up__x')]);
    const bytes = registry.listBytes();
    let called = 0;
    registry.onChange(() => called++);
    registry.replaceSource('up', [tool('up__x')]);
    assert.equal(registry.listBytes(), bytes);
    assert.equal(called, 0);
    registry.replaceSource('up', [tool('up__x', 'changed')]);
    assert.equal(called, 1);
  });

  test('never shadows a tool of another source or a built-in: the clash is refused with its reason, the rest served', () => {
    const registry = new ToolRegistry().register(tool('Read'));
    registry.replaceSource('one', [tool('shared')]);
    const refused = registry.replaceSource('two', [tool('Read'), tool('shared'), tool('bad name'), tool('two__ok')]);
    assert.deepEqual(refused, [
      { name: 'Read', reason: 'Cannot register tool "Read": a tool with this name is already registered' },
      { name: 'shared', reason: 'Cannot register tool "shared": a tool with this name is already registered' },
      { name: 'bad name', reason: `Cannot register tool "bad name": ${NAME_RULE}` },
    ]);
    assert.deepEqual(
      registry.list().map((t) => [t.name, registry.sourceOf(t.name)]),
      [
        ['Read', ''],
        ['shared', 'one'],
        ['two__ok', 'two'],
      ],
    );
  });
});

describe("a source's schemas", () => {
  test('run their patterns on a linear-time engine: a pattern that backtracks for seconds in V8 answers at once', () => {
    const registry = new ToolRegistry();
    const schema: ObjectSchema = {
      type: 'object',
      properties: { n: { type: 'string', pattern: '^-?\\d*\\.?\\d+$' }, e: { type: 'string', pattern: '^(a+)+$' } },
    };
    assert.deepEqual(registry.replaceSource('up', [{ name: 'up__t', description: '', inputSchema: schema, execute: () => textResult('') }]), []);
    const validate = registry.validator('up__t')!;
    // V8 takes seconds on each (measured: 9 s for the first on Node 22); RE2 takes milliseconds. No timing is asserted: a
    // backtracking engine would hold the test for minutes, which the suite's own timeout reports.
    assert.equal(validate({ n: `${'1'.repeat(100_000)}x` }), false);
    assert.equal(validate({ e: `${'a'.repeat(40)}!` }), false);
    assert.equal(validate({ n: '-12.5', e: 'aaa' }), true);
  });

  test('may not use what RE2 cannot run in linear time: such a tool is refused, the others served', () => {
    const registry = new ToolRegistry();
    const backReference: ObjectSchema = { type: 'object', properties: { s: { type: 'string', pattern: '^(a)\\1$' } } };
    const refused = registry.replaceSource('up', [
      { name: 'up__bad', description: '', inputSchema: backReference, execute: () => textResult('') },
      { name: 'up__good', description: '', inputSchema: { type: 'object' }, execute: () => textResult('') },
    ]);
    assert.equal(refused.length, 1);
    assert.equal(refused[0]!.name, 'up__bad');
    assert.match(refused[0]!.reason, /^Cannot register tool "up__bad": the input schema does not compile: /);
    assert.ok(registry.get('up__good'));
  });
});
