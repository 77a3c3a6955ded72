import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Type } from 'typebox';
import { namedSchemas } from '#src/http/openapi/components.js';

const Text = Type.Object({ type: Type.Literal('text'), text: Type.String() }, { $id: 'Text' });
const Image = Type.Object({ type: Type.Literal('image'), data: Type.String() }, { $id: 'Image' });
const Block = Type.Union([Text, Image], { $id: 'Block' });

test('namedSchemas gives each named schema once, every nested one replaced by a reference', () => {
  const Result = Type.Object({ content: Type.Array(Block) }, { $id: 'Result' });
  const Refusal = Type.Object({ content: Type.Array(Text), code: Type.Enum(['A', 'B'], { type: 'string' }) }, { $id: 'Refusal' });
  assert.deepEqual(JSON.parse(JSON.stringify(namedSchemas([Result, Refusal]))), [
    { $id: 'Result', type: 'object', required: ['content'], properties: { content: { type: 'array', items: { $ref: 'Block' } } } },
    { $id: 'Block', anyOf: [{ $ref: 'Text' }, { $ref: 'Image' }] },
    { $id: 'Text', type: 'object', required: ['type', 'text'], properties: { type: { type: 'string', const: 'text' }, text: { type: 'string' } } },
    { $id: 'Image', type: 'object', required: ['type', 'data'], properties: { type: { type: 'string', const: 'image' }, data: { type: 'string' } } },
    {
      $id: 'Refusal',
      type: 'object',
      required: ['content', 'code'],
      properties: { content: { type: 'array', items: { $ref: 'Text' } }, code: { enum: ['A', 'B'], type: 'string' } },
    },
  ]);
});

test('namedSchemas refuses two different schemas with one $id, and a root without one', () => {
  const Other = Type.Object({ type: Type.Literal('text'), body: Type.String() }, { $id: 'Text' });
  assert.throws(() => namedSchemas([Text, Other]), { message: 'Two different schemas are named Text.' });
  assert.throws(() => namedSchemas([Type.String()]), { message: 'Every root schema needs an $id.' });
  // The same schema reached twice is one component.
  assert.equal(namedSchemas([Block, Text]).length, 3);
});
