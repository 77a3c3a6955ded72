import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { ToolExecutor } from '#src/core/executor.js';
import { strictProblem, strictSchema } from '#src/core/formats.js';
import { ToolRegistry } from '#src/core/registry.js';
import type { ObjectSchema } from '#src/core/types.js';
import { buildApp } from '#src/http/app.js';
import { builtinTools } from '#src/tools/index.js';
import { temporaryDirectory } from '../support/workspace.js';

// OpenAI's documented rules for `strict: true` (Structured Outputs, "Supported schemas"): the
// root is an object; every object sets additionalProperties: false and lists every property in
// required; only the supported keywords appear; at most 10 levels of nesting and 5000 properties.
const SUPPORTED = new Set([
  'type',
  'properties',
  'required',
  'additionalProperties',
  'items',
  'enum',
  'const',
  'anyOf',
  'description',
  'title',
  '$ref',
  '$defs',
  'definitions',
  'pattern',
  'format',
  'minimum',
  'maximum',
  'exclusiveMinimum',
  'exclusiveMaximum',
  'multipleOf',
  'minItems',
  'maxItems',
]);
const FORMATS = new Set(['date-time', 'time', 'date', 'duration', 'email', 'hostname', 'ipv4', 'ipv6', 'uuid']);

function strictViolations(schema: unknown): string[] {
  const problems: string[] = [];
  let properties = 0;
  const walk = (node: unknown, path: string, depth: number): void => {
    if (typeof node !== 'object' || node === null || Array.isArray(node)) return;
    const s = node as Record<string, unknown>;
    if (depth > 10) problems.push(`${path}: nested deeper than 10 levels`);
    for (const keyword of Object.keys(s)) if (!SUPPORTED.has(keyword)) problems.push(`${path}: keyword ${keyword} is not supported`);
    if (s.format !== undefined && !FORMATS.has(s.format as string)) problems.push(`${path}: format ${String(s.format)} is not supported`);
    if (Array.isArray(s.enum) && s.type === undefined) problems.push(`${path}: enum without type`);
    const types = Array.isArray(s.type) ? s.type : [s.type];
    if (types.includes('object') || s.properties !== undefined) {
      if (s.additionalProperties !== false) problems.push(`${path}: additionalProperties must be false`);
      const names = Object.keys((s.properties as object | undefined) ?? {});
      properties += names.length;
      const required = (s.required as string[] | undefined) ?? [];
      for (const name of names) if (!required.includes(name)) problems.push(`${path}.${name}: not in required`);
      for (const name of names) walk((s.properties as Record<string, unknown>)[name], `${path}.${name}`, depth + 1);
    }
    if (s.items !== undefined) walk(s.items, `${path}[]`, depth + 1);
    for (const member of (s.anyOf as unknown[] | undefined) ?? []) walk(member, `${path}|`, depth);
  };
  const root = schema as Record<string, unknown>;
  if (root.type !== 'object' || root.anyOf !== undefined) problems.push('$: the root must be an object, not anyOf');
  walk(schema, '$', 1);
  if (properties > 5000) problems.push(`${properties} properties; at most 5000`);
  return problems;
}

test("every built-in tool's strict schema follows OpenAI's strict-mode rules, and the checker catches each broken rule", async (t) => {
  const workspace = await temporaryDirectory(t, 'toolport-strict-');
  const tools = await builtinTools({ workspace, bashSandbox: false });
  const registry = new ToolRegistry();
  for (const tool of tools) registry.register(tool);
  const listed = registry.toAPI('openai', undefined, { strict: true });
  assert.equal(listed.length, tools.length);
  for (const { function: fn } of listed) {
    assert.equal(fn.strict, true);
    assert.deepEqual(strictViolations(fn.parameters), [], fn.name);
  }
  for (const tool of registry.toAPI('openai-responses', undefined, { strict: true })) assert.deepEqual(strictViolations(tool.parameters), [], tool.name);
  // The plain schemas are not strict: the checker says why, so it is not a test that cannot fail.
  const plain = registry.toAPI('openai').find((x) => x.function.name === 'Read')!.function.parameters;
  assert.deepEqual(strictViolations(plain), ['$.offset: not in required', '$.limit: not in required']);
});

test('strictSchema: optional properties become nullable at every depth; refused keywords and formats go; enums get their type', () => {
  const schema: ObjectSchema = {
    type: 'object',
    properties: {
      name: { type: 'string', minLength: 1, maxLength: 9, default: 'x' },
      mode: { enum: ['a', 'b'] },
      when: { type: 'string', format: 'date-time' },
      site: { type: 'string', format: 'uri' },
      tags: { type: 'array', items: { type: 'object', properties: { k: { type: 'string' } } }, uniqueItems: true },
      ref: { $ref: '#/$defs/Thing', description: 'a thing' },
    },
    required: ['name'],
    $defs: { Thing: { type: 'object', properties: { id: { type: 'integer' } }, required: ['id'] } },
  };
  assert.deepEqual(strictSchema(schema), {
    type: 'object',
    properties: {
      name: { type: 'string' },
      mode: { enum: ['a', 'b', null], type: ['string', 'null'] },
      when: { type: ['string', 'null'], format: 'date-time' },
      site: { type: ['string', 'null'] },
      tags: {
        type: ['array', 'null'],
        items: { type: 'object', properties: { k: { type: ['string', 'null'] } }, required: ['k'], additionalProperties: false },
      },
      ref: { description: 'a thing', anyOf: [{ $ref: '#/$defs/Thing' }, { type: 'null' }] },
    },
    required: ['name', 'mode', 'when', 'site', 'tags', 'ref'],
    $defs: { Thing: { type: 'object', properties: { id: { type: 'integer' } }, required: ['id'], additionalProperties: false } },
    additionalProperties: false,
  });
  assert.deepEqual(strictViolations(strictSchema(schema)), []);
});

test('a null for an optional property is taken as absent, at any depth, where the schema does not take null itself', async () => {
  const seen: unknown[] = [];
  const registry = new ToolRegistry().register({
    name: 'Probe',
    description: 'Records its input.',
    inputSchema: {
      type: 'object',
      properties: {
        need: { type: 'string' },
        opt: { type: 'integer' },
        maybe: { type: ['string', 'null'] },
        nested: { type: 'object', properties: { inner: { type: 'boolean' } }, additionalProperties: false },
        list: { type: 'array', items: { type: 'object', properties: { x: { type: 'number' } }, additionalProperties: false } },
      },
      required: ['need'],
      additionalProperties: false,
    },
    execute: (input) => {
      seen.push(input);
      return { content: [{ type: 'text', text: 'ok' }] };
    },
  });
  const executor = new ToolExecutor({ registry });
  const input = { need: 'a', opt: null, maybe: null, nested: { inner: null }, list: [{ x: null }, { x: 1 }] };
  const result = await executor.call('Probe', input);
  assert.equal(result.isError, false);
  assert.deepEqual(seen[0], { need: 'a', maybe: null, nested: {}, list: [{}, { x: 1 }] });
  assert.deepEqual(input.nested, { inner: null }, "the caller's object is not changed");
  // A required property is never dropped: null there is the client's error.
  await assert.rejects(executor.call('Probe', { need: null }), { code: 'INVALID_INPUT', message: 'Invalid input for tool "Probe":\n- $.need: must be string' });
});

test('REST: Read with "offset": null and "limit": null, as a strict-mode model sends them, reads the file', async (t) => {
  const workspace = await temporaryDirectory(t, 'toolport-nulls-');
  await writeFile(join(workspace, 'a.txt'), 'one\ntwo\n');
  const registry = new ToolRegistry();
  for (const tool of await builtinTools({ workspace, bashSandbox: false })) registry.register(tool);
  const app = await buildApp({ registry });
  t.after(() => app.close());
  const res = await app.inject({
    method: 'POST',
    url: '/tools/Read',
    payload: { file_path: 'a.txt', offset: null, limit: null },
    headers: { 'content-type': 'application/json' },
  });
  assert.equal(res.statusCode, 200);
  assert.equal(res.json().isError, false);
  assert.match(res.json().content[0].text, /one/);
});

test('a null is taken as absent where strict mode made it nullable: through local $refs and anyOf members too', async () => {
  const seen: unknown[] = [];
  const registry = new ToolRegistry().register({
    name: 'Refs',
    description: 'Records its input.',
    inputSchema: {
      type: 'object',
      properties: {
        n: { $ref: '#/$defs/N' },
        either: { anyOf: [{ type: 'object', properties: { a: { type: 'string' } } }, { type: 'string' }] },
        tree: { $ref: '#/$defs/Tree' },
      },
      required: ['n'],
      $defs: {
        N: { type: 'object', properties: { x: { type: 'string' }, y: { type: ['string', 'null'] } } },
        Tree: { type: 'object', properties: { label: { type: 'string' }, child: { $ref: '#/$defs/Tree' } } },
      },
      additionalProperties: false,
    },
    execute: (input) => {
      seen.push(input);
      return { content: [{ type: 'text', text: 'ok' }] };
    },
  });
  const executor = new ToolExecutor({ registry });
  const result = await executor.call('Refs', {
    n: { x: null, y: null },
    either: { a: null },
    tree: { label: null, child: { label: 'b', child: { label: null, child: null } } },
  });
  assert.equal(result.isError, false);
  assert.deepEqual(seen[0], { n: { y: null }, either: {}, tree: { child: { label: 'b', child: {} } } });
  // Strict mode's schema for it offers exactly those nulls.
  const strict = strictSchema(registry.get('Refs')!.inputSchema) as unknown as { $defs: { N: { properties: { x: { type: unknown } } } } };
  assert.deepEqual(strict.$defs.N.properties.x.type, ['string', 'null']);
});

test('an input nested deeper than a recursive schema can be checked is INVALID_INPUT, not an internal error', async () => {
  const registry = new ToolRegistry().register({
    name: 'Deep',
    description: 'Takes a tree.',
    inputSchema: { type: 'object', properties: { child: { $ref: '#' }, label: { type: 'string' } } },
    execute: () => ({ content: [{ type: 'text', text: 'ok' }] }),
  });
  let input: Record<string, unknown> = { label: null };
  for (let i = 0; i < 50_000; i++) input = { child: input };
  const executor = new ToolExecutor({ registry });
  await assert.rejects(executor.call('Deep', input), (err: Error & { code?: string }) => {
    assert.equal(err.code, 'INVALID_INPUT');
    assert.equal(err.message, 'Invalid input for tool "Deep":\n- $: is nested too deeply to check');
    return true;
  });
});

test('a schema using keywords only 2019-09 and 2020-12 have is checked as 2020-12, even without $schema', async () => {
  const registry = new ToolRegistry().register({
    name: 'Modern',
    description: 'Uses dependentRequired and unevaluatedProperties.',
    inputSchema: {
      type: 'object',
      properties: { card: { type: 'string' }, billing: { type: 'string' } },
      dependentRequired: { card: ['billing'] },
      unevaluatedProperties: false,
    },
    execute: () => ({ content: [{ type: 'text', text: 'ok' }] }),
  });
  const executor = new ToolExecutor({ registry });
  assert.equal((await executor.call('Modern', { card: '1', billing: 'x' })).isError, false);
  await assert.rejects(executor.call('Modern', { card: '1' }), { code: 'INVALID_INPUT' });
  await assert.rejects(executor.call('Modern', { other: 1 }), { code: 'INVALID_INPUT' });
});

test('a tool whose schema strict mode cannot express is listed with strict: false and its own schema; oneOf becomes anyOf', () => {
  const cases: [ObjectSchema, string | undefined][] = [
    [{ type: 'object', properties: { a: { oneOf: [{ type: 'string' }, { type: 'integer' }] } } }, undefined],
    [{ type: 'object', properties: { a: {} } }, '$.a: no type'],
    [{ type: 'object', properties: { m: { type: 'object', additionalProperties: { type: 'string' } } } }, '$.m: additionalProperties with a schema'],
    [{ type: 'object', properties: { t: { type: 'array', items: [{ type: 'string' }] } } }, '$.t: tuple items'],
    [{ type: 'object', properties: { p: { type: 'object', patternProperties: { '^x': { type: 'string' } } } } }, '$.p: patternProperties'],
    [{ type: 'object', properties: { c: { type: 'string' } }, if: { required: ['c'] }, then: {} }, '$: if'],
    [{ type: 'object', properties: { enum: { type: 'string', enum: ['a'] }, default: { enum: [1, 2] } } }, undefined],
  ];
  for (const [schema, problem] of cases) assert.equal(strictProblem(schema), problem, JSON.stringify(schema));

  const registry = new ToolRegistry()
    .register({ name: 'Fine', description: 'd', inputSchema: cases[0]![0], execute: () => ({ content: [] }) })
    .register({ name: 'Map', description: 'd', inputSchema: cases[2]![0], execute: () => ({ content: [] }) })
    .register({ name: 'Named', description: 'd', inputSchema: cases[6]![0], execute: () => ({ content: [] }) });
  const [fine, map, named] = registry.toAPI('openai', undefined, { strict: true });
  assert.equal(fine!.function.strict, true);
  assert.deepEqual(fine!.function.parameters.properties.a, { anyOf: [{ anyOf: [{ type: 'string' }, { type: 'integer' }] }, { type: 'null' }] });
  assert.equal(map!.function.strict, false);
  assert.deepEqual(map!.function.parameters, { ...cases[2]![0], properties: cases[2]![0].properties });
  assert.equal(named!.function.strict, true);
  assert.deepEqual(strictViolations(named!.function.parameters), [], 'properties named enum and default get their enum types');
  const responses = registry.toAPI('openai-responses', undefined, { strict: true });
  assert.deepEqual(
    responses.map((t) => t.strict),
    [true, false, true],
  );
});
