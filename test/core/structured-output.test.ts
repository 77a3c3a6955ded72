import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Type } from 'typebox';
import { defineTool } from '#src/core/define-tool.js';
import { ToolRegistrationError } from '#src/core/errors.js';
import { ToolExecutor, type CallObserver, type CallOutcome } from '#src/core/executor.js';
import { ToolRegistry } from '#src/core/registry.js';
import { errorResult, textResult } from '#src/core/result.js';
import type { ObjectSchema, ToolDef, ToolResult } from '#src/core/types.js';
import { MAX_VALUES_FULLY_CHECKED } from '#src/core/validator.js';
import type { ErrorResult, TypedToolResult } from '#src/index.js';

const FILES_SCHEMA: ObjectSchema = {
  type: 'object',
  properties: { files: { type: 'array', items: { type: 'string' } }, count: { type: 'integer', minimum: 0 } },
  required: ['files', 'count'],
  additionalProperties: false,
};

/** A tool with the files output schema (unless another is given) that answers `answer` for every call. */
function tool(answer: () => unknown, extra: Partial<ToolDef> = {}): ToolDef {
  return {
    name: 'T',
    description: 'The T tool.',
    inputSchema: { type: 'object' },
    outputSchema: FILES_SCHEMA,
    execute: answer as ToolDef['execute'],
    ...extra,
  };
}

/** Runs one call of `def` and returns its result and the outcome the observer heard. */
async function callOnce(def: ToolDef): Promise<{ result: ToolResult & { isError: boolean }; outcome: CallOutcome | undefined }> {
  let outcome: CallOutcome | undefined;
  const observer: CallObserver = { loadChanged: () => {}, callFinished: (_tool, o) => (outcome = o) };
  const executor = new ToolExecutor({ registry: new ToolRegistry().register(def), observer });
  return { result: await executor.call(def.name, {}), outcome };
}

const error = (text: string) => ({ content: [{ type: 'text', text }], isError: true });

describe('ToolRegistry.register and output schemas', () => {
  /** Asserts that registering a tool with this output schema throws exactly this rule. */
  function assertRefused(outputSchema: unknown, rule: string | RegExp): void {
    const registry = new ToolRegistry();
    assert.throws(
      () => registry.register(tool(() => textResult('x'), { outputSchema: outputSchema as ObjectSchema })),
      (err: unknown) => {
        assert.ok(err instanceof ToolRegistrationError, String(err));
        assert.equal(err.tool, 'T');
        if (typeof rule === 'string') assert.equal(err.message, `Cannot register tool "T": ${rule}`);
        else assert.match(err.message, rule);
        return true;
      },
    );
    assert.deepEqual(registry.list(), [], 'a refused tool is not registered');
  }

  const ROOT_RULE = 'the output schema\'s root must be { "type": "object" }';
  for (const [label, schema] of [
    ['null', null],
    ['a string', 'object'],
    ['an array', [{ type: 'object' }]],
    ['a root of type array', { type: 'array', items: { type: 'string' } }],
    ['a root without a type', { properties: { a: { type: 'string' } } }],
    ['a root whose type is a list', { type: ['object', 'null'] }],
  ] as const) {
    test(`refuses an output schema that is ${label}, naming the tool`, () => assertRefused(schema, ROOT_RULE));
  }

  test("refuses an output schema Ajv cannot compile, with Ajv's reason", () => {
    assertRefused({ type: 'object', properties: { a: { type: 'nope' } } }, /^Cannot register tool "T": the output schema does not compile: .*type/);
    assertRefused(
      { type: 'object', properties: { a: { $ref: '#/$defs/missing' } } },
      /^Cannot register tool "T": the output schema does not compile: can't resolve reference #\/\$defs\/missing/,
    );
  });

  test('accepts a 2020-12 output schema and compiles it with that dialect', async () => {
    const outputSchema: ObjectSchema = {
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      type: 'object',
      properties: { pair: { type: 'array', prefixItems: [{ type: 'string' }, { type: 'integer' }], items: false } },
      required: ['pair'],
    };
    const ok = await callOnce(tool(() => ({ content: [], structuredContent: { pair: ['a', 1] } }), { outputSchema }));
    assert.deepEqual(ok.result, { content: [], isError: false, structuredContent: { pair: ['a', 1] } });
    // draft-07 would ignore prefixItems and take this.
    const bad = await callOnce(tool(() => ({ content: [], structuredContent: { pair: [1, 'a'] } }), { outputSchema }));
    assert.deepEqual(
      bad.result,
      error('Tool "T" returned structuredContent that does not match its output schema:\n- $.pair[0]: must be string\n- $.pair[1]: must be integer'),
    );
  });

  test('compiles the output schema once, at registration: outputValidator() gives it, or undefined without one', () => {
    const registry = new ToolRegistry()
      .register(tool(() => textResult('x')))
      .register({ ...tool(() => textResult('x')), name: 'Plain', outputSchema: undefined });
    const check = registry.outputValidator('T');
    assert.ok(check !== undefined);
    assert.equal(registry.outputValidator('T'), check);
    assert.equal(check({ files: [], count: 0 }), true);
    assert.equal(check({ files: [1], count: 0 }), false);
    assert.equal(registry.outputValidator('Plain'), undefined);
    assert.equal(registry.outputValidator('Missing'), undefined);
  });
});

describe('the pipeline and structured content', () => {
  test('passes structured content that matches the schema through, as a copy', async () => {
    const structuredContent = { files: ['a.ts'], count: 1 };
    const { result, outcome } = await callOnce(tool(() => ({ content: [{ type: 'text', text: 'a.ts' }], structuredContent })));
    assert.deepEqual(result, { content: [{ type: 'text', text: 'a.ts' }], isError: false, structuredContent });
    assert.notEqual(result.structuredContent, structuredContent);
    assert.equal(outcome, 'ok');
  });

  test('checks what an asynchronous tool answers too', async () => {
    const { result, outcome } = await callOnce(tool(() => Promise.resolve({ content: [], structuredContent: { files: 'a.ts', count: 1 } })));
    assert.deepEqual(result, error('Tool "T" returned structuredContent that does not match its output schema:\n- $.files: must be array'));
    assert.equal(outcome, 'malformed');
  });

  test('a success without structured content is an error result: MCP clients refuse one', async () => {
    const { result, outcome } = await callOnce(tool(() => textResult('a.ts')));
    assert.deepEqual(result, error('Tool "T" returned no structuredContent, which its output schema requires on success.'));
    assert.equal(outcome, 'malformed');
  });

  test('a failure may leave structured content out; one it carries is checked too', async () => {
    const { result, outcome } = await callOnce(tool(() => errorResult('no such directory')));
    assert.deepEqual(result, error('no such directory'));
    assert.equal(outcome, 'tool_error');
    const ok = await callOnce(tool(() => ({ ...errorResult('partial'), structuredContent: { files: ['a'], count: 1 } })));
    assert.deepEqual(ok.result, { ...error('partial'), structuredContent: { files: ['a'], count: 1 } });
    const bad = await callOnce(tool(() => ({ ...errorResult('partial'), structuredContent: { files: ['a'] } })));
    assert.deepEqual(bad.result, error('Tool "T" returned structuredContent that does not match its output schema:\n- $.count: is required'));
    assert.equal(bad.outcome, 'malformed');
  });

  test('a mismatch is an error result naming the JSON path of every violation', async () => {
    const { result } = await callOnce(tool(() => ({ content: [], structuredContent: { files: ['a', 2, null], count: -1, extra: true } })));
    assert.deepEqual(
      result,
      error(
        'Tool "T" returned structuredContent that does not match its output schema:\n' +
          '- $.extra: is not an allowed property\n- $.files[1]: must be string\n- $.files[2]: must be string\n- $.count: must be >= 0',
      ),
    );
  });

  test('a mismatch in a large value is reported at its first violation, with that said', async () => {
    const files = Array.from({ length: MAX_VALUES_FULLY_CHECKED }, (_, i) => (i % 2 === 0 ? 'f' : i));
    const { result } = await callOnce(tool(() => ({ content: [], structuredContent: { files, count: 1 } })));
    assert.deepEqual(
      result,
      error(
        'Tool "T" returned structuredContent that does not match its output schema:\n- $.files[1]: must be string\n' +
          `(The structured content holds more than ${MAX_VALUES_FULLY_CHECKED} values, so checking stopped at the first violation.)`,
      ),
    );
  });

  test('structured content JSON cannot carry is an error result, checked before the schema', async () => {
    const { result, outcome } = await callOnce(tool(() => ({ content: [], structuredContent: { files: [], count: 1n } })));
    assert.deepEqual(result, error('Tool "T" returned a malformed result: structuredContent is not JSON: Do not know how to serialize a BigInt.'));
    assert.equal(outcome, 'malformed');
  });

  test('the schema is checked against what JSON carries: a Date is a string', async () => {
    const outputSchema: ObjectSchema = { type: 'object', properties: { at: { type: 'string', format: 'date-time' } }, required: ['at'] };
    const at = new Date(Date.UTC(2024, 0, 2));
    const { result } = await callOnce(tool(() => ({ content: [], structuredContent: { at } }), { outputSchema }));
    assert.deepEqual(result, { content: [], isError: false, structuredContent: { at: '2024-01-02T00:00:00.000Z' } });
  });

  test('a tool without an output schema may return structured content, passed through unchecked', async () => {
    const { result, outcome } = await callOnce(tool(() => ({ content: [], structuredContent: { anything: [1, 'a'] } }), { outputSchema: undefined }));
    assert.deepEqual(result, { content: [], isError: false, structuredContent: { anything: [1, 'a'] } });
    assert.equal(outcome, 'ok');
  });

  test('the tool of the registry the call names is the one checked', async () => {
    const main = new ToolRegistry().register(tool(() => textResult('plain'), { outputSchema: undefined }));
    const other = new ToolRegistry().register(tool(() => textResult('plain')));
    const executor = new ToolExecutor({ registry: main });
    assert.deepEqual(await executor.call('T', {}), { content: [{ type: 'text', text: 'plain' }], isError: false });
    assert.deepEqual(
      await executor.call('T', {}, { registry: other }),
      error('Tool "T" returned no structuredContent, which its output schema requires on success.'),
    );
  });
});

describe('ToolRegistry.toAPI and output schemas', () => {
  const registry = new ToolRegistry()
    .register(tool(() => textResult('x')))
    .register({ ...tool(() => textResult('x')), name: 'Plain', outputSchema: undefined });

  test('mcp: the tool list carries outputSchema for a tool that has one; anthropic and openai have no place for it', () => {
    const [withOutput, plain] = registry.toAPI('mcp').tools;
    assert.deepEqual(withOutput, { name: 'T', description: 'The T tool.', inputSchema: { type: 'object', properties: {} }, outputSchema: FILES_SCHEMA });
    assert.equal(plain !== undefined && 'outputSchema' in plain, false);
    for (const format of ['anthropic', 'openai', 'openai-responses'] as const) {
      assert.doesNotMatch(JSON.stringify(registry.toAPI(format)), /outputSchema|"files"/, format);
    }
  });
});

describe('defineTool with an output schema', () => {
  const Listing = defineTool({
    name: 'Listing',
    description: 'Lists.',
    inputSchema: Type.Object({ dir: Type.String() }, { additionalProperties: false }),
    outputSchema: Type.Object({ names: Type.Array(Type.String()) }, { additionalProperties: false }),
    execute: ({ dir }) => {
      if (dir === '') return errorResult('dir is empty');
      // The type of structuredContent follows the schema: names is string[].
      const names: string[] = [`${dir}/a`];
      return { content: [{ type: 'text', text: names.join('\n') }], structuredContent: { names } };
    },
  });

  test('publishes its output schema and runs through the pipeline checked against it', async () => {
    assert.deepEqual(Listing.outputSchema, {
      type: 'object',
      properties: { names: { type: 'array', items: { type: 'string' } } },
      required: ['names'],
      additionalProperties: false,
    });
    const executor = new ToolExecutor({ registry: new ToolRegistry().register(Listing) });
    assert.deepEqual(await executor.call('Listing', { dir: 'src' }), {
      content: [{ type: 'text', text: 'src/a' }],
      isError: false,
      structuredContent: { names: ['src/a'] },
    });
    assert.deepEqual(await executor.call('Listing', { dir: '' }), error('dir is empty'));
  });

  test('types structuredContent with Static<> of the schema (checked by tsc)', () => {
    const outputSchema = Type.Object({ count: Type.Integer() });
    const inputSchema = Type.Object({});
    // @ts-expect-error count must be a number
    defineTool({ name: 'Typed', description: 'Typed.', inputSchema, outputSchema, execute: () => ({ content: [], structuredContent: { count: 'one' } }) });
    // @ts-expect-error a success must carry structuredContent
    defineTool({ name: 'Typed', description: 'Typed.', inputSchema, outputSchema, execute: () => textResult('no structured content') });
    defineTool({
      name: 'Typed',
      description: 'Typed.',
      inputSchema,
      outputSchema,
      execute: async () => (Math.random() > 2 ? errorResult('failed') : { content: [], structuredContent: { count: 1 } }),
    });
    // Without an output schema, any ToolResult, as before.
    defineTool({ name: 'Untyped', description: 'Untyped.', inputSchema, execute: () => textResult('x') });
  });
});

test('the package exports what a plug-in or an adapter of its own needs for structured output', async () => {
  const api = await import('#src/index.js');
  assert.deepEqual(api.readableContent({ content: [], structuredContent: { a: 1 } }), [{ type: 'text', text: '{"a":1}' }]);
  assert.deepEqual(api.ToolResultSchema.properties.structuredContent, api.StructuredContentSchema);
  const typed: TypedToolResult<{ a: number }> = { content: [], structuredContent: { a: 1 } };
  const failed: ErrorResult = api.errorResult('x');
  assert.deepEqual([typed.structuredContent, failed.isError], [{ a: 1 }, true]);
});
