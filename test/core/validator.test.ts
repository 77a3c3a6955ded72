import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { ErrorObject } from 'ajv';
import {
  compileInputSchema,
  compileOutputSchema,
  createAjv,
  describeViolations,
  hasMoreValuesThan,
  MAX_LISTED_VIOLATIONS,
  MAX_VALUES_FULLY_CHECKED,
  MAX_VIOLATION_TEXT_CHARS,
  usePrecompiledValidators,
  violationLines,
  type InputViolation,
} from '#src/core/validator.js';
import type { ObjectSchema } from '#src/core/types.js';

/** Validates `input` against `schema` and returns the described violations ([] when valid). */
function violations(schema: ObjectSchema, input: unknown): InputViolation[] {
  const validate = compileInputSchema(schema);
  if (validate(input)) return [];
  const report = validate.explain(input);
  assert.equal(report.complete, true);
  assert.equal(report.omitted, 0);
  return report.violations;
}

/** A minimal Ajv error, for paths no schema of ours produces. */
function ajvError(instancePath: string, keyword = 'type', message?: string): ErrorObject {
  return { instancePath, keyword, message, params: {}, schemaPath: '#' };
}

describe('compileInputSchema', () => {
  test('does not coerce types', () => {
    const schema: ObjectSchema = { type: 'object', properties: { n: { type: 'integer' }, b: { type: 'boolean' }, s: { type: 'string' } } };
    const input = { n: '5', b: 'true', s: 5 };
    assert.deepEqual(violations(schema, input), [
      { path: '$.n', message: 'must be integer' },
      { path: '$.b', message: 'must be boolean' },
      { path: '$.s', message: 'must be string' },
    ]);
    assert.deepEqual(input, { n: '5', b: 'true', s: 5 });
  });

  test('does not remove unknown properties', () => {
    const input = { a: 1, extra: 2 };
    assert.deepEqual(violations({ type: 'object', properties: { a: { type: 'number' } }, additionalProperties: false }, input), [
      { path: '$.extra', message: 'is not an allowed property' },
    ]);
    assert.deepEqual(input, { a: 1, extra: 2 });
  });

  test('does not fill in defaults', () => {
    const input = {};
    assert.deepEqual(violations({ type: 'object', properties: { a: { type: 'number', default: 3 } } }, input), []);
    assert.deepEqual(input, {});
  });

  test('checks formats (ajv-formats is installed)', () => {
    const schema: ObjectSchema = { type: 'object', properties: { email: { type: 'string', format: 'email' }, at: { type: 'string', format: 'date-time' } } };
    assert.deepEqual(violations(schema, { email: 'a@example.com', at: '2024-01-02T03:04:05Z' }), []);
    assert.deepEqual(violations(schema, { email: 'not an email', at: 'yesterday' }), [
      { path: '$.email', message: 'must match format "email"' },
      { path: '$.at', message: 'must match format "date-time"' },
    ]);
  });

  test('accepts unknown keywords and annotations (not strict)', () => {
    assert.doesNotThrow(() =>
      compileInputSchema({ type: 'object', 'x-internal': true, properties: { a: { type: 'string', examples: ['x'], deprecated: true } } }),
    );
  });

  test('throws for a schema that is not valid JSON Schema', () => {
    assert.throws(
      () => compileInputSchema({ type: 'object', properties: { a: { type: 'nope' } } }),
      /^Error: schema is invalid: data\/properties\/a\/type must be equal to one of the allowed values/,
    );
  });
});

describe('describeViolations', () => {
  test("addresses the root as '$'", () => {
    assert.deepEqual(violations({ type: 'object' }, 'text'), [{ path: '$', message: 'must be object' }]);
  });

  test('addresses nested properties with dots', () => {
    const schema: ObjectSchema = { type: 'object', properties: { a: { type: 'object', properties: { b: { type: 'string' } } } } };
    assert.deepEqual(violations(schema, { a: { b: 1 } }), [{ path: '$.a.b', message: 'must be string' }]);
  });

  test('addresses array items by index', () => {
    const schema: ObjectSchema = { type: 'object', properties: { list: { type: 'array', items: { type: 'object', properties: { n: { type: 'number' } } } } } };
    assert.deepEqual(violations(schema, { list: [{ n: 1 }, { n: 2 }, { n: 'x' }] }), [{ path: '$.list[2].n', message: 'must be number' }]);
  });

  test('puts keys that are not identifiers in brackets, as JSON strings', () => {
    const schema: ObjectSchema = {
      type: 'object',
      properties: {
        'file.path': { type: 'string' },
        'max-lines': { type: 'integer' },
        '2nd': { type: 'string' },
        'a/b': { type: 'string' },
        'a~b': { type: 'string' },
        'say "hi"': { type: 'string' },
        $ok: { type: 'string' },
        _ok: { type: 'string' },
      },
    };
    const input = { 'file.path': 1, 'max-lines': 'x', '2nd': 2, 'a/b': 3, 'a~b': 4, 'say "hi"': 5, $ok: 6, _ok: 7 };
    assert.deepEqual(violations(schema, input), [
      { path: '$["file.path"]', message: 'must be string' },
      { path: '$["max-lines"]', message: 'must be integer' },
      { path: '$["2nd"]', message: 'must be string' },
      { path: '$["a/b"]', message: 'must be string' },
      { path: '$["a~b"]', message: 'must be string' },
      { path: '$["say \\"hi\\""]', message: 'must be string' },
      { path: '$.$ok', message: 'must be string' },
      { path: '$._ok', message: 'must be string' },
    ]);
  });

  test('decodes JSON Pointer escapes (~0 and ~1) in Ajv instance paths', () => {
    assert.deepEqual(describeViolations([ajvError('/x~1y/z~0w/0', 'type', 'must be string')]), [{ path: '$["x/y"]["z~w"][0]', message: 'must be string' }]);
  });

  test("reports an unknown property at its own path as 'is not an allowed property'", () => {
    const schema: ObjectSchema = {
      type: 'object',
      properties: { opts: { type: 'object', properties: {}, additionalProperties: false } },
      additionalProperties: false,
    };
    assert.deepEqual(violations(schema, { opts: { deep: 1, 'odd key': 2 }, top: 3 }), [
      { path: '$.top', message: 'is not an allowed property' },
      { path: '$.opts.deep', message: 'is not an allowed property' },
      { path: '$.opts["odd key"]', message: 'is not an allowed property' },
    ]);
  });

  test("reports a missing property at its own path as 'is required'", () => {
    const schema: ObjectSchema = {
      type: 'object',
      properties: { a: { type: 'string' }, nested: { type: 'object', properties: { 'b-c': { type: 'string' } }, required: ['b-c'] } },
      required: ['a', 'nested'],
    };
    assert.deepEqual(violations(schema, {}), [
      { path: '$.a', message: 'is required' },
      { path: '$.nested', message: 'is required' },
    ]);
    assert.deepEqual(violations(schema, { a: 'x', nested: {} }), [{ path: '$.nested["b-c"]', message: 'is required' }]);
  });

  test("lists an enum's allowed values as JSON", () => {
    const schema: ObjectSchema = { type: 'object', properties: { mode: { enum: ['fast', 'slow', 3, null] } } };
    assert.deepEqual(violations(schema, { mode: 'medium' }), [{ path: '$.mode', message: 'must be one of "fast", "slow", 3, null' }]);
  });

  test("keeps Ajv's message for other keywords", () => {
    const schema: ObjectSchema = { type: 'object', properties: { n: { type: 'integer', minimum: 1 }, s: { type: 'string', maxLength: 2 } } };
    assert.deepEqual(violations(schema, { n: 0, s: 'abc' }), [
      { path: '$.n', message: 'must be >= 1' },
      { path: '$.s', message: 'must NOT have more than 2 characters' },
    ]);
  });

  test("says 'is invalid' when Ajv gives no message", () => {
    assert.deepEqual(describeViolations([ajvError('/a', 'custom')]), [{ path: '$.a', message: 'is invalid' }]);
  });

  test('returns no violations for no errors', () => {
    assert.deepEqual(describeViolations([]), []);
  });

  // additionalProperties and required always name an object key, never an array index.
  test('addresses an object key made of digits as a key, not an array index', () => {
    const schema: ObjectSchema = { type: 'object', properties: { '1': { type: 'string' } }, required: ['1'], additionalProperties: false };
    assert.deepEqual(violations(schema, { '0': 'x' }), [
      { path: '$["1"]', message: 'is required' },
      { path: '$["0"]', message: 'is not an allowed property' },
    ]);
  });
});

describe('describeViolations: size', () => {
  test(`cuts a path or message longer than ${MAX_VIOLATION_TEXT_CHARS} characters, ending it in "..."`, () => {
    const key = 'k'.repeat(100_000);
    const [violation] = violations({ type: 'object', properties: {}, additionalProperties: false }, { [key]: 1 });
    assert.deepEqual(violation, { path: `$.${'k'.repeat(MAX_VIOLATION_TEXT_CHARS - 5)}...`, message: 'is not an allowed property' });
    const [long] = describeViolations([ajvError('/a', 'custom', 'x'.repeat(1000))]);
    assert.equal(long!.message, `${'x'.repeat(MAX_VIOLATION_TEXT_CHARS - 3)}...`);
  });

  test('never cuts between the two halves of a surrogate pair', () => {
    const message = `${'x'.repeat(MAX_VIOLATION_TEXT_CHARS - 4)}${'😀'.repeat(10)}`;
    const [cut] = describeViolations([ajvError('/a', 'custom', message)]);
    assert.equal(cut!.message, `${'x'.repeat(MAX_VIOLATION_TEXT_CHARS - 4)}...`);
  });
});

describe('InputValidator: bounded reports', () => {
  const tags: ObjectSchema = {
    type: 'object',
    properties: { tags: { type: 'array', items: { type: 'string' } } },
    additionalProperties: false,
  };
  const pathsOf = (vs: InputViolation[]): string[] => vs.map((v) => v.path);

  test('checking stops at the first violation; explain lists every one of a small input', () => {
    const validate = compileInputSchema(tags);
    assert.equal(validate({ tags: ['a', 'b'] }), true);
    assert.equal(validate({ tags: [1, 2, 3], extra: true }), false);
    assert.deepEqual(validate.explain({ tags: [1, 2, 3], extra: true }), {
      violations: [
        { path: '$.extra', message: 'is not an allowed property' },
        { path: '$.tags[0]', message: 'must be string' },
        { path: '$.tags[1]', message: 'must be string' },
        { path: '$.tags[2]', message: 'must be string' },
      ],
      omitted: 0,
      complete: true,
    });
  });

  test('explain of a valid input reports nothing', () => {
    assert.deepEqual(compileInputSchema(tags).explain({ tags: [] }), { violations: [], omitted: 0, complete: true });
  });

  test(`lists the first ${MAX_LISTED_VIOLATIONS} violations and counts the rest`, () => {
    // The root object and its array are two values: the items fill the budget exactly.
    const input = { tags: Array.from({ length: MAX_VALUES_FULLY_CHECKED - 2 }, () => 0) };
    const report = compileInputSchema(tags).explain(input);
    assert.equal(report.complete, true);
    assert.equal(report.omitted, MAX_VALUES_FULLY_CHECKED - 2 - MAX_LISTED_VIOLATIONS);
    assert.deepEqual(
      pathsOf(report.violations),
      Array.from({ length: MAX_LISTED_VIOLATIONS }, (_, i) => `$.tags[${i}]`),
    );
  });

  test(`reports only the first violation of an input of more than ${MAX_VALUES_FULLY_CHECKED} values`, () => {
    const input = { tags: Array.from({ length: 50_000 }, () => 0) };
    assert.deepEqual(compileInputSchema(tags).explain(input), {
      violations: [{ path: '$.tags[0]', message: 'must be string' }],
      omitted: 0,
      complete: false,
    });
  });

  test('reports only the first of 50,000 unknown properties', () => {
    const input = Object.fromEntries(Array.from({ length: 50_000 }, (_, i) => [`k${i}`, 0]));
    assert.deepEqual(compileInputSchema(tags).explain(input), {
      violations: [{ path: '$.k0', message: 'is not an allowed property' }],
      omitted: 0,
      complete: false,
    });
  });

  test("the first-violation pass still lists what Ajv reports together, such as an anyOf's branches", () => {
    const schema: ObjectSchema = { type: 'object', properties: { id: { anyOf: [{ type: 'string' }, { type: 'integer' }] }, list: { type: 'array' } } };
    const report = compileInputSchema(schema).explain({ id: true, list: Array.from({ length: MAX_VALUES_FULLY_CHECKED }, () => 0) });
    assert.deepEqual(report, {
      violations: [
        { path: '$.id', message: 'must be string' },
        { path: '$.id', message: 'must be integer' },
        { path: '$.id', message: 'must match a schema in anyOf' },
      ],
      omitted: 0,
      complete: false,
    });
  });
});

describe('violationLines', () => {
  test('lists each violation on a line of its own', () => {
    const report = {
      violations: [
        { path: '$.a', message: 'is required' },
        { path: '$.b', message: 'must be string' },
      ],
      omitted: 0,
      complete: true,
    };
    assert.equal(violationLines(report), '- $.a: is required\n- $.b: must be string');
  });

  test('says how many violations were left out', () => {
    assert.equal(
      violationLines({ violations: [{ path: '$.a', message: 'is required' }], omitted: 1, complete: true }),
      '- $.a: is required\n- ... and 1 more violation',
    );
    assert.equal(
      violationLines({ violations: [{ path: '$.a', message: 'is required' }], omitted: 7, complete: true }),
      '- $.a: is required\n- ... and 7 more violations',
    );
  });

  test('says when checking stopped at the first violation', () => {
    assert.equal(
      violationLines({ violations: [{ path: '$.a', message: 'is required' }], omitted: 0, complete: false }),
      `- $.a: is required\n(The input holds more than ${MAX_VALUES_FULLY_CHECKED} values, so checking stopped at the first violation; fix it and send the input again to see any others.)`,
    );
  });
});

describe('hasMoreValuesThan', () => {
  test('counts the input itself and every property value and array item, at any depth', () => {
    const input = { a: 1, b: [1, 2, { c: null }], d: {} }; // 1 + a, b, 1, 2, {c}, c, d = 8
    assert.equal(hasMoreValuesThan(input, 8), false);
    assert.equal(hasMoreValuesThan(input, 7), true);
    assert.equal(hasMoreValuesThan('text', 1), false);
    assert.equal(hasMoreValuesThan('text', 0), true);
  });

  test('stops reading once it has counted past the limit', () => {
    let reads = 0;
    const items = new Proxy(
      Array.from({ length: 1_000_000 }, () => 0),
      {
        get(target, key, receiver) {
          if (typeof key === 'string' && /^\d+$/.test(key)) reads += 1;
          return Reflect.get(target, key, receiver) as unknown;
        },
      },
    );
    assert.equal(hasMoreValuesThan({ items }, 100), true);
    assert.equal(reads, 0, 'an array longer than the budget is judged by its length');
    const wide: Record<string, unknown> = {};
    for (let i = 0; i < 1000; i++) {
      Object.defineProperty(wide, `k${i}`, {
        enumerable: true,
        get: () => {
          reads += 1;
          return 0;
        },
      });
    }
    assert.equal(hasMoreValuesThan(wide, 100), true);
    assert.equal(reads, 99);
  });

  test('walks a deeply nested input without overflowing the stack', () => {
    let deep: unknown = 0;
    for (let i = 0; i < 1_000_000; i++) deep = [deep];
    assert.equal(hasMoreValuesThan(deep, 2_000_000), false);
    assert.equal(hasMoreValuesThan(deep, 1000), true);
  });
});

test('a schema that declares JSON Schema 2020-12 is compiled as 2020-12; one that does not, as draft-07', () => {
  const tuple2020 = compileInputSchema({
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    type: 'object',
    properties: { pair: { type: 'array', prefixItems: [{ type: 'string' }, { type: 'integer' }], items: false } },
  });
  assert.equal(tuple2020({ pair: ['a', 1] }), true);
  assert.equal(tuple2020({ pair: ['a', 'b'] }), false, 'prefixItems is a 2020-12 keyword: checked');
  assert.equal(tuple2020({ pair: ['a', 1, 2] }), false, 'items: false after prefixItems forbids more');
  const tuple07 = compileInputSchema({ type: 'object', properties: { pair: { type: 'array', items: [{ type: 'string' }, { type: 'integer' }] } } });
  assert.equal(tuple07({ pair: ['a', 1] }), true);
  assert.equal(tuple07({ pair: ['a', 'b'] }), false, 'the draft-07 tuple form still works');
});

describe('createAjv({ untrusted: true })', () => {
  const uniqueIn = (items: Record<string, unknown> = {}): ObjectSchema => ({ type: 'object', properties: { a: { type: 'array', items, uniqueItems: true } } });
  const untrusted = (schema: ObjectSchema) => compileInputSchema(schema, createAjv({ untrusted: true }));

  test('uniqueItems: deep-equal items are duplicates whatever the order of their keys', () => {
    const validate = untrusted(uniqueIn());
    const items = [{ x: 1, y: [1, { z: 2, w: null }] }, [1, 2], { y: [1, { w: null, z: 2 }], x: 1 }];
    assert.equal(validate({ a: items }), false);
    assert.deepEqual(validate.explain({ a: items }), {
      violations: [{ path: '$.a', message: 'must NOT have duplicate items (items ## 0 and 2 are identical)' }],
      omitted: 0,
      complete: true,
    });
    assert.equal(validate({ a: [0, -0] }), false, '0 and -0 are the same JSON number');
    assert.equal(
      validate({
        a: [
          [1, 2],
          [2, 1],
        ],
      }),
      true,
      'arrays keep their order',
    );
  });

  test('uniqueItems: values that print alike, or whose text could be confused, are not duplicates', () => {
    const validate = untrusted(uniqueIn());
    const items = [
      1,
      '1',
      true,
      'true',
      null,
      'null',
      [1],
      '[1]',
      '[0,',
      {},
      '{',
      [],
      '[',
      [[]],
      [[], []],
      { a: 1 },
      { a: '1' },
      { 'a:1': 1 },
      ['1,2'],
      ['1', '2'],
    ];
    assert.equal(validate({ a: items }), true);
  });

  test('uniqueItems: false allows duplicates; scalar items are checked the same way', () => {
    const allowed = untrusted({ type: 'object', properties: { a: { type: 'array', uniqueItems: false } } });
    assert.equal(allowed({ a: [{ x: 1 }, { x: 1 }] }), true);
    const strings = untrusted(uniqueIn({ type: 'string' }));
    assert.equal(strings({ a: ['x', 'y', 'x'] }), false);
    assert.deepEqual(strings.explain({ a: ['x', 'y', 'x'] }).violations, [
      { path: '$.a', message: 'must NOT have duplicate items (items ## 0 and 2 are identical)' },
    ]);
  });

  test('uniqueItems: an item nested too deeply to compare is reported, not thrown', () => {
    const validate = untrusted(uniqueIn());
    let deep: unknown = 0;
    for (let i = 0; i < 200_000; i++) deep = [deep];
    assert.equal(validate({ a: [deep, 1] }), false);
    assert.deepEqual(validate.explain({ a: [deep, 1] }).violations, [{ path: '$', message: 'is nested too deeply to check' }]);
  });

  test('uniqueItems: the same in a 2020-12 schema and in an output schema', () => {
    const schema2020: ObjectSchema = { $schema: 'https://json-schema.org/draft/2020-12/schema', ...uniqueIn() };
    const input = compileInputSchema(schema2020, createAjv({ untrusted: true }));
    const output = compileOutputSchema(uniqueIn(), createAjv({ untrusted: true }));
    for (const validate of [input, output]) {
      assert.equal(validate({ a: [[1], [2]] }), true);
      assert.deepEqual(validate.explain({ a: [[1], [2], [1]] }).violations, [
        { path: '$.a', message: 'must NOT have duplicate items (items ## 0 and 2 are identical)' },
      ]);
    }
  });

  test('writes nothing to the console: an unknown format is ignored quietly', (t) => {
    const warn = t.mock.method(console, 'warn', () => undefined);
    const validate = untrusted({ type: 'object', properties: { s: { type: 'string', format: 'no-such-format' } } });
    assert.equal(validate({ s: 'anything' }), true);
    assert.equal(warn.mock.callCount(), 0);
  });
});

test('a schema whose JSON text was handed a precompiled validator is checked by it, and explained by compiling', () => {
  const schema: ObjectSchema = { type: 'object', properties: { handedOver: { type: 'string' } }, additionalProperties: false };
  // A stand-in that refuses everything, so its use shows.
  const refuseAll = Object.assign(() => false, { errors: null });
  usePrecompiledValidators(new Map([[JSON.stringify(schema), refuseAll]]));
  const validate = compileInputSchema(schema);
  assert.equal(validate({ handedOver: 'yes' }), false);
  // Another instance of the same text, made by an Ajv with options, compiles its own.
  assert.equal(compileInputSchema({ ...schema }, createAjv({ untrusted: true }))({ handedOver: 'yes' }), true);
  // Explaining compiles the collecting form, which finds nothing wrong.
  assert.deepEqual(validate.explain({ handedOver: 'yes' }).violations, []);
});
