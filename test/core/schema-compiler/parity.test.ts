import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ToolRegistry } from '#src/core/registry.js';
import { textResult } from '#src/core/result.js';
import { SchemaCompiler } from '#src/core/schema-compiler/compiler.js';
import { MAX_VALUES_FULLY_CHECKED } from '#src/core/validator.js';
import type { ObjectSchema, ToolDef } from '#src/core/types.js';

// replaceSourceAsync (schemas compiled in a worker thread, loaded as standalone code) against
// replaceSource (compiled on the event loop), on the same listings: the same tools in the same
// order, the same refusals, the same change notifications, and validators that answer every
// input the same (check, explain, dropNulls), the cases of validator.test.ts among them.

const tool = (name: string, inputSchema: ObjectSchema, extra: Partial<ToolDef> = {}): ToolDef => ({
  name,
  description: '',
  inputSchema,
  execute: () => textResult(''),
  ...extra,
});
const S2020 = 'https://json-schema.org/draft/2020-12/schema';
const SHARED_ID = 'https://example.com/shared.json';

let deep: unknown = 0;
for (let i = 0; i < 100_000; i++) deep = [deep];
let deepTree: unknown = {};
for (let i = 0; i < 100_000; i++) deepTree = { child: deepTree };

/** Each tool with the inputs (and structured contents) it is asked about, at every step it is served. */
const INPUTS: Record<string, unknown[]> = {
  a__types: [{ n: '5', b: 'true', s: 5 }, { n: 5, b: true, s: 'x' }, { n: 1.5, extra: 2 }, {}, null, [], 'text'],
  a__formats: [
    {
      email: 'a@example.com',
      at: '2024-01-02T03:04:05Z',
      uri: 'https://example.com/x?y',
      ip: '10.0.0.1',
      id: '123e4567-e89b-12d3-a456-426614174000',
      host: 'example.com',
    },
    { email: 'not an email', at: 'yesterday', uri: 'no scheme', ip: '300.1.1.1', id: 'nope', host: '-bad-', odd: 'anything' },
    { short: '😀😀', long: '😀😀😀😀' },
    { short: '😀', long: '😀😀😀😀😀😀' },
  ],
  a__patterns: [{ word: 'abc', 'x-one': 1, name: 'Ünïcode' }, { word: 'ABC', 'x-two': 'two', name: '123' }, { other: 1 }, { word: 'a'.repeat(10_000) + '!' }],
  a__enum: [{ e: { x: 1 }, c: { k: [1] } }, { e: [1, 2], c: { k: [1] } }, { e: { x: 2 }, c: { k: [2] } }, { e: null }, { e: 'b' }],
  a__unique: [
    { a: [{ x: 1, y: [1, { z: 2, w: null }] }, [1, 2], { y: [1, { w: null, z: 2 }], x: 1 }] },
    { a: [0, -0] },
    { a: [1, '1', true, 'true', null, 'null', [1], '[1]', {}, '{', [], [[]], { a: 1 }, { a: '1' }] },
    { a: [deep, 1] },
    { s: ['x', 'y', 'x'], a: [] },
  ],
  a__combinators: [
    { id: true, list: Array.from({ length: MAX_VALUES_FULLY_CHECKED }, () => 0) },
    { id: 'x', one: 5, all: 'abc', not: 1, kind: 'a', a: 1 },
    { id: 1.5, one: 'x', all: 'a', not: 'x', kind: 'b' },
    { kind: 'b', b: 'yes' },
  ],
  a__refs: [{ tree: { child: { child: { name: 'leaf' } } }, pair: { f0: 'x' } }, { tree: { child: { name: 5 } }, pair: {} }, { tree: deepTree }],
  a__numbers: [{ min: 1, max: 9.99, step: 0.3, int: 4 }, { min: 0, max: 10, step: 0.305, int: 4.5 }, { min: Number.NaN }],
  a__arrays: [
    { list: [1, 2, 3], tuple: ['a', 1], has: [1, 'x'] },
    { list: [], tuple: [1, 'a', true], has: [1, 2] },
    { list: Array.from({ length: 12 }, (_, i) => i) },
  ],
  a__bounded: [
    { tags: ['a', 'b'] },
    { tags: [1, 2, 3], extra: true },
    { tags: Array.from({ length: MAX_VALUES_FULLY_CHECKED - 2 }, () => 0) },
    { tags: Array.from({ length: 50_000 }, () => 0) },
    Object.fromEntries(Array.from({ length: 50_000 }, (_, i) => [`k${i}`, 0])),
    { ['k'.repeat(5_000)]: 1 },
  ],
  a__nullable: [{ a: null, b: null, nested: { c: null, d: null }, list: [{ c: null }] }, { a: 'x', b: null }, { a: 1 }],
  a__2020: [
    { pair: ['a', 1], known: 1, has: [1, 2, 'x'] },
    { pair: ['a', 'b', 3], known: 1, unknown: 2, has: ['x'] },
    { credit: 1 },
    { credit: 1, billing: 'x' },
  ],
  a__dynamic: [{ list: [{ name: 'a', list: [{ name: 'b' }] }] }, { list: [{ name: 1 }] }],
  a__output: [{ a: 'ok' }, { a: 5 }],
  a__id1: [{ t: 'x' }, { t: 1 }],
  a__id2: [{ shared: { t: 'x' } }, { shared: { t: 1 } }],
  b__x: [{ a: 'x' }, { a: 1 }],
};
const OUTPUTS: Record<string, unknown[]> = {
  a__output: [{ rows: [{ id: 1 }, { id: 2 }], total: 2 }, { rows: [{ id: 1 }, { id: 1 }] }, { rows: 'no' }, {}],
};

const SOURCE_A: ToolDef[] = [
  tool('a__types', {
    type: 'object',
    properties: { n: { type: 'integer' }, b: { type: 'boolean' }, s: { type: 'string' } },
    additionalProperties: false,
  }),
  tool('a__formats', {
    type: 'object',
    'x-vendor': true,
    properties: {
      email: { type: 'string', format: 'email' },
      at: { type: 'string', format: 'date-time' },
      uri: { type: 'string', format: 'uri' },
      ip: { type: 'string', format: 'ipv4' },
      id: { type: 'string', format: 'uuid' },
      host: { type: 'string', format: 'hostname' },
      odd: { type: 'string', format: 'no-such-format' },
      short: { type: 'string', maxLength: 2, examples: ['x'] },
      long: { type: 'string', minLength: 5 },
    },
  }),
  tool('a__patterns', {
    type: 'object',
    properties: { word: { type: 'string', pattern: '^[a-z]+$' }, name: { type: 'string', pattern: '^\\p{L}+$' } },
    patternProperties: { '^x-': { type: 'number' } },
    additionalProperties: false,
  }),
  tool('a__enum', { type: 'object', properties: { e: { enum: [1, 'a', { x: 1 }, [1, 2], null] }, c: { const: { k: [1] } } }, required: ['e'] }),
  tool('a__unique', {
    type: 'object',
    properties: { a: { type: 'array', uniqueItems: true }, s: { type: 'array', items: { type: 'string' }, uniqueItems: true } },
  }),
  tool('a__combinators', {
    type: 'object',
    properties: {
      id: { anyOf: [{ type: 'string' }, { type: 'integer' }] },
      list: { type: 'array' },
      one: { oneOf: [{ type: 'number' }, { type: 'integer' }] },
      all: { allOf: [{ type: 'string' }, { minLength: 2 }] },
      not: { not: { type: 'string' } },
      kind: { enum: ['a', 'b'] },
    },
    if: { properties: { kind: { const: 'a' } } },
    then: { required: ['a'] },
    else: { required: ['b'], properties: { b: { type: 'integer' } } },
  }),
  tool('a__refs', {
    type: 'object',
    $defs: {
      node: { type: 'object', properties: { name: { type: 'string' }, child: { $ref: '#/$defs/node' } } },
      pair: { type: 'object', required: ['f0'], properties: { f0: { type: 'string', maxLength: 3 } } },
    },
    properties: { tree: { $ref: '#/$defs/node' }, pair: { $ref: '#/$defs/pair' } },
  }),
  tool('a__numbers', {
    type: 'object',
    properties: {
      min: { type: 'number', minimum: 1 },
      max: { type: 'number', exclusiveMaximum: 10 },
      step: { type: 'number', multipleOf: 0.01 },
      int: { type: 'integer' },
    },
  }),
  tool('a__arrays', {
    type: 'object',
    properties: {
      list: { type: 'array', items: { type: 'integer' }, minItems: 1, maxItems: 10 },
      tuple: { type: 'array', items: [{ type: 'string' }, { type: 'number' }], additionalItems: false },
      has: { type: 'array', contains: { type: 'string' } },
    },
  }),
  tool('a__bounded', { type: 'object', properties: { tags: { type: 'array', items: { type: 'string' } } }, additionalProperties: false }),
  tool('a__nullable', {
    type: 'object',
    properties: {
      a: { type: 'string' },
      b: { type: ['string', 'null'] },
      nested: { type: 'object', properties: { c: { type: 'integer' }, d: { anyOf: [{ type: 'integer' }, { type: 'null' }] } } },
      list: { type: 'array', items: { type: 'object', properties: { c: { type: 'integer' } } } },
    },
  }),
  tool('a__2020', {
    $schema: S2020,
    type: 'object',
    properties: {
      pair: { type: 'array', prefixItems: [{ type: 'string' }, { type: 'number' }], items: false },
      known: { type: 'integer' },
      has: { type: 'array', contains: { type: 'number' }, minContains: 2 },
    },
    dependentRequired: { credit: ['billing'] },
    unevaluatedProperties: false,
    patternProperties: { '^(credit|billing)$': true },
  }),
  tool('a__dynamic', {
    $schema: S2020,
    $dynamicAnchor: 'node',
    type: 'object',
    properties: { name: { type: 'string' }, list: { type: 'array', items: { $dynamicRef: '#node' } } },
  }),
  tool(
    'a__output',
    { type: 'object', properties: { a: { type: 'string' } } },
    {
      outputSchema: {
        type: 'object',
        required: ['rows', 'total'],
        properties: {
          rows: { type: 'array', uniqueItems: true, items: { type: 'object', properties: { id: { type: 'integer' } } } },
          total: { type: 'integer' },
        },
      },
    },
  ),
  tool('a__id1', { $id: SHARED_ID, type: 'object', properties: { t: { type: 'string' } } }),
  tool('a__id2', { type: 'object', properties: { shared: { $ref: SHARED_ID } } }),
  // What is refused, one rule at a time.
  tool('a__id_again', { $id: SHARED_ID, type: 'object' }),
  tool('bad name', { type: 'object' }),
  { ...tool('a__desc', { type: 'object' }), description: 5 as unknown as string },
  { ...tool('a__exec', { type: 'object' }), execute: undefined as unknown as ToolDef['execute'] },
  tool('a__timeout', { type: 'object' }, { timeoutMs: 0 }),
  tool('a__root', { type: 'array' } as unknown as ObjectSchema),
  tool('a__oneof', { type: 'object', oneOf: [{}] }),
  tool('a__prop', { type: 'object', properties: { 'a b': { type: 'string' } } }),
  tool('a__type', { type: 'object', properties: { a: { type: 'nope' } } }),
  tool('a__lookahead', { type: 'object', properties: { a: { type: 'string', pattern: '^(?=x)' } } }),
  tool('a__regexp', { type: 'object', properties: { a: { type: 'string', pattern: '(' } } }),
  tool('a__nowhere', { type: 'object', properties: { a: { $ref: '#/$defs/missing' } } }),
  tool('a__outroot', { type: 'object' }, { outputSchema: { type: 'array' } as unknown as ObjectSchema }),
  tool('a__outbad', { type: 'object', properties: { a: { type: 'nope' } } }, { outputSchema: { type: 'array' } as unknown as ObjectSchema }),
  tool('a__outtype', { type: 'object' }, { outputSchema: { type: 'object', properties: { x: { type: 'nope' } } } }),
  tool('a__types', { type: 'object' }),
];

/** A re-list of source a, in new objects each time: some tools kept as they were, one changed, one new, the rest gone. */
const relistA = (): ToolDef[] => [
  ...SOURCE_A.slice(0, 8).map((d) => ({ ...d, inputSchema: structuredClone(d.inputSchema) })),
  tool('a__formats', { type: 'object', description: 'changed', properties: { email: { type: 'string', format: 'email' } } }),
  tool('a__new', { type: 'object', required: ['x'] }),
];

/** The listings, in order: a source's first, another's, a re-list, the same again, none. */
const STEPS: Array<{ source: string; tools: ToolDef[] }> = [
  { source: 'a', tools: SOURCE_A },
  { source: 'b', tools: [tool('a__types', { type: 'object' }), tool('b__x', { type: 'object', properties: { a: { type: 'string' } } })] },
  { source: 'a', tools: relistA() },
  { source: 'a', tools: relistA() },
  { source: 'b', tools: [] },
  { source: 'a', tools: [] },
];

/** What a registry serves and how its validators answer, in a form deepEqual compares. */
function behaviour(registry: ToolRegistry): unknown[] {
  return registry.list().map(({ name }) => {
    const validate = registry.validator(name)!;
    const output = registry.outputValidator(name);
    return {
      name,
      source: registry.sourceOf(name),
      inputs: (INPUTS[name] ?? []).map((input) => ({ valid: validate(input), report: validate.explain(input), dropped: validate.dropNulls(input as never) })),
      outputs: output === undefined ? undefined : (OUTPUTS[name] ?? []).map((value) => ({ valid: output(value), report: output.explain(value) })),
    };
  });
}

/** How many violations the reports of `behaviour` describe. */
function violationsIn(served: unknown[]): number {
  type Answer = { report: { violations: unknown[] } };
  const answers = (served as Array<{ inputs: Answer[]; outputs: Answer[] | undefined }>).flatMap((t) => [...t.inputs, ...(t.outputs ?? [])]);
  return answers.reduce((sum, answer) => sum + answer.report.violations.length, 0);
}

test('replaceSourceAsync serves, refuses and validates as replaceSource does, listing after listing', async (t) => {
  const compiler = new SchemaCompiler();
  t.after(() => compiler.close());
  const onLoop = new ToolRegistry();
  const offLoop = new ToolRegistry({ schemaCompiler: compiler });
  const changes = { onLoop: 0, offLoop: 0 };
  onLoop.onChange(() => changes.onLoop++);
  offLoop.onChange(() => changes.offLoop++);
  let reports = 0;
  const reasons = new Set<string>();
  for (const [i, { source, tools }] of STEPS.entries()) {
    const expected = onLoop.replaceSource(source, tools);
    assert.deepEqual(await offLoop.replaceSourceAsync(source, tools), expected, `the refusals of listing ${i}`);
    assert.deepEqual(changes.offLoop, changes.onLoop, `the changes after listing ${i}`);
    const served = behaviour(offLoop);
    assert.deepEqual(served, behaviour(onLoop), `the tools and their validators after listing ${i}`);
    reports += violationsIn(served);
    for (const { reason } of expected)
      reasons.add(reason.replace(/^Cannot register tool "[^"]*": /, '').replace(/ does not compile: .*/s, ' does not compile'));
  }
  // The corpus reaches what it means to: a few hundred violations described, every kind of refusal.
  assert.ok(reports > 200, `${reports} violations described`);
  assert.deepEqual([...reasons].sort(), [
    'a tool with this name is already registered',
    'execute must be a function',
    'property name "a b" must match ^[a-zA-Z0-9_.-]{1,64}$',
    'the description must be a string',
    'the input schema does not compile',
    'the input schema\'s root must be { "type": "object" }',
    "the input schema's root must not use oneOf",
    'the name must match ^[a-zA-Z0-9_-]{1,64}$',
    'the output schema does not compile',
    'the output schema\'s root must be { "type": "object" }',
    'timeoutMs must be a positive integer of at most 2147483647',
  ]);
  assert.equal(changes.onLoop, 5, 'the same listing again changes nothing');
});
