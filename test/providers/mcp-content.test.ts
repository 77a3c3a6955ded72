import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { normaliseResult } from '#src/core/result.js';
import type { ToolResult } from '#src/core/types.js';
import { fromMCPCallResult } from '#src/providers/mcp-content.js';
import { toMCPCallToolResult } from '#src/providers/results.js';
import { PIXEL } from '../fixtures/tools.js';

const text = (t: string) => ({ type: 'text' as const, text: t });

/** fromMCPCallResult, and proof that the pipeline takes what it gives unchanged. */
function read(wire: unknown): ToolResult {
  const result = fromMCPCallResult(wire);
  const normalised = normaliseResult(result);
  assert.ok('result' in normalised, `the pipeline refuses it: ${JSON.stringify(normalised)}`);
  assert.deepEqual(normalised.result, { ...result, isError: result.isError === true });
  return result;
}

const annotations = { audience: ['user', 'assistant'], priority: 0.8, lastModified: '2025-06-18T00:00:00Z' };
const WELL_FORMED = [
  { type: 'text', text: 'three files', annotations: { audience: ['assistant'] } },
  { type: 'image', data: PIXEL, mimeType: 'image/png' },
  { type: 'image', data: 'PHN2Zy8+', mimeType: 'image/svg+xml', annotations },
  { type: 'audio', data: 'UklGRg==', mimeType: 'audio/wav' },
  { type: 'resource', resource: { uri: 'file:///a.txt', mimeType: 'text/plain', text: 'a' }, annotations: { priority: 1 } },
  { type: 'resource', resource: { uri: 'test://static/resource/2', blob: 'AAEC' } },
  { type: 'resource_link', uri: 'file:///r.pdf', name: 'r.pdf', title: 'Report', description: 'Q3', mimeType: 'application/pdf', size: 1234, annotations },
  { type: 'resource_link', uri: 'https://example.com/y', name: 'y' },
];

describe('fromMCPCallResult keeps well-formed content', () => {
  test('MCP wire, ToolResult and MCP wire again: the same result, every kind of block with its annotations', () => {
    const wire = { content: WELL_FORMED, isError: true, structuredContent: { files: ['a', 'b', 'c'] } };
    const result = read(wire);
    assert.deepEqual(result.content[1], { type: 'image', source: { type: 'base64', media_type: 'image/png', data: PIXEL } });
    assert.deepEqual(result.content[3], { type: 'audio', source: { type: 'base64', media_type: 'audio/wav', data: 'UklGRg==' } });
    assert.deepEqual(toMCPCallToolResult(result), wire);
  });

  test('each block alone goes back to MCP unchanged', () => {
    for (const block of WELL_FORMED) assert.deepEqual(toMCPCallToolResult(read({ content: [block] })).content, [block]);
  });

  test('isError is true only when the result says true', () => {
    for (const [isError, expected] of [
      [true, true],
      [false, false],
      [undefined, false],
      ['true', false],
      [1, false],
    ] as const) {
      assert.equal(read({ content: [], isError }).isError, expected, String(isError));
    }
  });

  test('structuredContent is kept as a copy; null is none', () => {
    const structuredContent = { n: 1, list: [{ a: null }] };
    const result = read({ content: [text('x')], structuredContent });
    assert.deepEqual(result, { content: [text('x')], isError: false, structuredContent });
    assert.notEqual(result.structuredContent, structuredContent);
    assert.deepEqual(read({ content: [text('x')], structuredContent: null }), { content: [text('x')], isError: false });
  });

  test('a result without content is a result with none', () => {
    assert.deepEqual(read({ structuredContent: { a: 1 } }), { content: [], isError: false, structuredContent: { a: 1 } });
  });

  test("_meta on the result, a block or a resource, and a resource link's icons, are not passed on", () => {
    const wire = {
      _meta: { 'io.modelcontextprotocol/related-task': { taskId: '1' } },
      resultType: 'complete',
      content: [
        { type: 'text', text: 'a', _meta: { x: 1 } },
        { type: 'resource', resource: { uri: 'u:a', text: 'a', _meta: { x: 1 } }, _meta: {} },
        { type: 'resource_link', uri: 'u:b', name: 'b', icons: [{ src: 'https://example.com/i.png' }] },
      ],
    };
    assert.deepEqual(read(wire), {
      content: [text('a'), { type: 'resource', resource: { uri: 'u:a', text: 'a' } }, { type: 'resource_link', uri: 'u:b', name: 'b' }],
      isError: false,
    });
  });
});

describe('fromMCPCallResult names what it cannot carry, in place, and keeps the rest', () => {
  const cases: [string, unknown, string][] = [
    ['a block of unknown type', { type: 'video', data: 'AAAA' }, '[content[0] has unknown type "video"; left out]'],
    ['a block without a type', { text: 'a' }, '[content[0] has unknown type undefined; left out]'],
    ['a block that is a string', 'hello', '[content[0] must be an object, got a string; left out]'],
    ['a block that is null', null, '[content[0] must be an object, got null; left out]'],
    ['a text block without text', { type: 'text' }, '[content[0] is a text block without a string text; left out]'],
    ['an image without data', { type: 'image', mimeType: 'image/png' }, '[content[0] is an image block without string data; left out]'],
    ['an image without a mimeType', { type: 'image', data: PIXEL }, '[content[0] is an image block whose mimeType is not an image/* type; left out]'],
    [
      'an image of a type that is no image type',
      { type: 'image', data: PIXEL, mimeType: 'application/pdf' },
      '[content[0] is an image block whose mimeType is not an image/* type; left out]',
    ],
    [
      'audio of a video type',
      { type: 'audio', data: 'AAAA', mimeType: 'video/mp4' },
      '[content[0] is an audio block whose mimeType is not an audio/* type; left out]',
    ],
    ['audio whose data is a number', { type: 'audio', data: 7, mimeType: 'audio/wav' }, '[content[0] is an audio block without string data; left out]'],
    [
      'a resource with neither text nor blob',
      { type: 'resource', resource: { uri: 'u:a' } },
      '[content[0] is a resource block without a resource {uri, mimeType?, text or blob} of strings; left out]',
    ],
    [
      'a resource without a uri',
      { type: 'resource', resource: { text: 'a' } },
      '[content[0] is a resource block without a resource {uri, mimeType?, text or blob} of strings; left out]',
    ],
    [
      'a resource that is a string',
      { type: 'resource', resource: 'u:a' },
      '[content[0] is a resource block without a resource {uri, mimeType?, text or blob} of strings; left out]',
    ],
    [
      'a resource whose blob is not base64',
      { type: 'resource', resource: { uri: 'u:a', blob: 'not base64!' } },
      '[content[0] is a resource block whose blob is not base64; left out]',
    ],
    ['a resource link without a name', { type: 'resource_link', uri: 'u:a' }, '[content[0] is a resource_link block without a string name; left out]'],
    [
      'a resource link whose uri is a number',
      { type: 'resource_link', uri: 1, name: 'a' },
      '[content[0] is a resource_link block without a string uri; left out]',
    ],
  ];
  // Base64 as the providers take it: the standard alphabet, padded to a multiple of four.
  for (const data of ['AAA', 'AA=A', 'A===', 'AA\nAA', 'AA-_', ' AAAA', 'AAA=AAAA']) {
    cases.push([
      `an image whose data ${JSON.stringify(data)} is not base64`,
      { type: 'image', data, mimeType: 'image/png' },
      '[content[0] is an image block whose data is not base64; left out]',
    ]);
  }
  for (const [label, block, note] of cases) {
    test(label, () => {
      assert.deepEqual(read({ content: [text('before'), block, text('after')] }).content, [
        text('before'),
        { type: 'text', text: note.replace('content[0]', 'content[1]') },
        text('after'),
      ]);
    });
  }

  test('malformed optional fields are left out and their block kept', () => {
    const result = read({
      content: [
        { type: 'text', text: 'a', annotations: { priority: 7 } },
        { type: 'image', data: PIXEL, mimeType: 'image/png', annotations: 'high' },
        { type: 'resource', resource: { uri: 'u:a', mimeType: 3, text: 'a' }, annotations: { audience: ['everyone'] } },
        { type: 'resource_link', uri: 'u:b', name: 'b', title: 4, description: null, mimeType: [], size: -1 },
        { type: 'resource_link', uri: 'u:c', name: 'c', size: 1.5, annotations: { lastModified: 0 } },
      ],
    });
    assert.deepEqual(result.content, [
      text('a'),
      { type: 'image', source: { type: 'base64', media_type: 'image/png', data: PIXEL } },
      { type: 'resource', resource: { uri: 'u:a', text: 'a' } },
      { type: 'resource_link', uri: 'u:b', name: 'b' },
      { type: 'resource_link', uri: 'u:c', name: 'c' },
    ]);
  });

  test('content that is not a list', () => {
    assert.deepEqual(read({ content: { type: 'text', text: 'a' }, isError: true }), {
      content: [text("[the tool's content is not a list but an object; left out]")],
      isError: true,
    });
  });

  test('structuredContent that is not an object, or nests too deep', () => {
    assert.deepEqual(read({ content: [text('a')], structuredContent: [1, 2] }), {
      content: [text('a'), text('[expected structuredContent to be an object, got an array; structuredContent left out]')],
      isError: false,
    });
    let deep: unknown = {};
    for (let i = 0; i < 300; i++) deep = { d: deep };
    assert.deepEqual(read({ content: [], structuredContent: deep }).content, [
      text('[structuredContent nests deeper than 256 levels; structuredContent left out]'),
    ]);
  });

  test('something that is no result at all is an error result', () => {
    for (const [wire, what] of [
      [undefined, 'undefined'],
      [null, 'null'],
      ['done', 'a string'],
      [42, 'a number'],
      [[{ type: 'text', text: 'a' }], 'an array'],
    ] as const) {
      assert.deepEqual(read(wire), { content: [text(`[the tool's result is not an object but ${what}]`)], isError: true });
    }
  });

  test('never throws, even for an object whose getter does', () => {
    const wire = {
      get content(): never {
        throw new Error('gone');
      },
    };
    assert.deepEqual(read(wire), { content: [text("[the tool's result could not be read: gone]")], isError: true });
  });
});
