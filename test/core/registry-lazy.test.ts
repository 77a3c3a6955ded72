import assert from 'node:assert/strict';
import { describe, test, type TestContext } from 'node:test';
import { Ajv } from 'ajv';
import { ToolRegistrationError } from '#src/core/errors.js';
import { ToolRegistry } from '#src/core/registry.js';
import { textResult } from '#src/core/result.js';
import type { ObjectSchema, ToolDef } from '#src/core/types.js';

/** Counts Ajv compilations while the test runs. */
function countCompiles(t: TestContext): { count: number } {
  const core = Object.getPrototypeOf(Ajv.prototype) as { compile: Ajv['compile'] };
  assert.ok(Object.hasOwn(core, 'compile'), "Ajv's compile has moved: the spy needs updating");
  const original = core.compile;
  const counter = { count: 0 };
  core.compile = function (this: Ajv, ...args: Parameters<Ajv['compile']>) {
    counter.count++;
    return original.apply(this, args);
  } as Ajv['compile'];
  t.after(() => {
    core.compile = original;
  });
  return counter;
}

const tool = (inputSchema: ObjectSchema, outputSchema?: ObjectSchema): ToolDef => ({
  name: 'Lazy',
  description: '',
  inputSchema,
  ...(outputSchema !== undefined ? { outputSchema } : {}),
  execute: () => textResult(''),
});

function assertRefused(def: ToolDef, message: string): void {
  assert.throws(
    () => new ToolRegistry().register(def),
    (err: unknown) => {
      assert.ok(err instanceof ToolRegistrationError);
      assert.equal(err.message, `Cannot register tool "Lazy": ${message}`);
      return true;
    },
  );
}

describe('ToolRegistry.register: schemas compiled on first use', () => {
  test('registering compiles nothing; the first call compiles the input schema, once', (t) => {
    const compiles = countCompiles(t);
    const registry = new ToolRegistry().register(tool({ type: 'object', properties: { id: { type: 'string', pattern: '^[a-z]+$' } }, required: ['id'] }));
    assert.equal(compiles.count, 0);
    const validate = registry.validator('Lazy')!;
    assert.equal(validate({ id: 'abc' }), true);
    assert.equal(validate({ id: 'ABC' }), false);
    assert.equal(compiles.count, 1);
    assert.deepEqual(validate.explain({}).violations, [{ path: '$.id', message: 'is required' }]);
  });

  test('explain before any check compiles what it needs and says what is wrong', () => {
    const registry = new ToolRegistry().register(tool({ type: 'object', properties: { n: { type: 'integer', maximum: 3 } } }));
    assert.deepEqual(registry.validator('Lazy')!.explain({ n: 4 }).violations, [{ path: '$.n', message: 'must be <= 3' }]);
  });

  test('an output schema is compiled on first use too, and checks as before', (t) => {
    const compiles = countCompiles(t);
    const registry = new ToolRegistry().register(tool({ type: 'object' }, { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] }));
    assert.equal(compiles.count, 0);
    assert.equal(registry.outputValidator('Lazy')!({ n: 1 }), true);
    assert.equal(registry.outputValidator('Lazy')!({}), false);
  });

  test('a local $ref that resolves is followed when the schema compiles', () => {
    const registry = new ToolRegistry().register(
      tool({ type: 'object', $defs: { id: { type: 'string', minLength: 2 } }, properties: { a: { $ref: '#/$defs/id' }, b: { $ref: '#' } } }),
    );
    assert.equal(registry.validator('Lazy')!({ a: 'xy', b: { a: 'zz' } }), true);
    assert.equal(registry.validator('Lazy')!({ a: 'x' }), false);
  });

  test('a schema with an anchor compiles at registration, as only compiling can follow its references', (t) => {
    const compiles = countCompiles(t);
    new ToolRegistry().register(tool({ type: 'object', $defs: { id: { $anchor: 'id', type: 'string' } }, properties: { a: { $ref: '#id' } } }));
    assert.ok(compiles.count > 0);
  });
});

describe('ToolRegistry.register still refuses, without compiling, a schema that would not compile', () => {
  test('a pattern that is not a regular expression', () => {
    assertRefused(
      tool({ type: 'object', properties: { a: { type: 'string', pattern: '(' } } }),
      'the input schema does not compile: Invalid regular expression: /(/u: Unterminated group',
    );
  });

  test('a patternProperties key that is not a regular expression', () => {
    assertRefused(
      tool({ type: 'object', properties: { a: { type: 'object', patternProperties: { '[a-': { type: 'string' } } } } }),
      'the input schema does not compile: Invalid regular expression: /[a-/u: Unterminated character class',
    );
  });

  test('a local $ref to nowhere, at any depth', () => {
    assertRefused(
      tool({ type: 'object', properties: { a: { type: 'array', items: { $ref: '#/$defs/missing' } } } }),
      "the input schema does not compile: can't resolve reference #/$defs/missing from id #",
    );
  });

  test('a keyword with a value its meta-schema refuses', () => {
    assertRefused(
      tool({ type: 'object', properties: { a: { type: 'string', minLength: -1 } } }),
      'the input schema does not compile: schema is invalid: data/properties/a/minLength must be >= 0',
    );
  });

  test('a 2020-12 schema checked against its own meta-schema', () => {
    assertRefused(
      tool({ type: 'object', properties: { a: { type: 'array', prefixItems: { type: 'string' } } } }),
      'the input schema does not compile: schema is invalid: data/properties/a/prefixItems must be array',
    );
  });

  test('an output schema with a pattern that is not a regular expression', () => {
    assertRefused(
      tool({ type: 'object' }, { type: 'object', properties: { a: { type: 'string', pattern: '+' } } }),
      'the output schema does not compile: Invalid regular expression: /+/u: Nothing to repeat',
    );
  });

  test('what looks like a pattern inside enum, const, default and examples is data, not a schema', () => {
    const registry = new ToolRegistry().register(
      tool({ type: 'object', properties: { a: { enum: [{ pattern: '(' }], default: { $ref: '#/nowhere' }, examples: [{ pattern: '[' }] } } }),
    );
    assert.equal(registry.validator('Lazy')!({ a: { pattern: '(' } }), true);
  });
});
