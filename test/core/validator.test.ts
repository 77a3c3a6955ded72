import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { ErrorObject } from 'ajv';
import { compileInputSchema, describeViolations, type InputViolation } from '../../src/core/validator.js';
import type { ObjectSchema } from '../../src/core/types.js';

/** Validates `input` against `schema` and returns the described violations ([] when valid). */
function violations(schema: ObjectSchema, input: unknown): InputViolation[] {
  const validate = compileInputSchema(schema);
  return validate(input) ? [] : describeViolations(validate.errors ?? []);
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
    assert.doesNotThrow(() => compileInputSchema({ type: 'object', 'x-internal': true, properties: { a: { type: 'string', examples: ['x'], deprecated: true } } }));
  });

  test('throws for a schema that is not valid JSON Schema', () => {
    assert.throws(() => compileInputSchema({ type: 'object', properties: { a: { type: 'nope' } } }), /^Error: schema is invalid: data\/properties\/a\/type must be equal to one of the allowed values/);
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
