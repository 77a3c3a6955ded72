import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { errorResult, normaliseResult, readableContent, resultSize, structuredText, textResult } from '#src/core/result.js';
import type { ToolResult } from '#src/core/types.js';

describe('textResult and errorResult', () => {
  test('textResult holds one text block and isError false by default', () => {
    assert.deepEqual(textResult('hello'), { content: [{ type: 'text', text: 'hello' }], isError: false });
  });

  test('textResult with isError true reports a failure', () => {
    assert.deepEqual(textResult('nope', true), { content: [{ type: 'text', text: 'nope' }], isError: true });
  });

  test('errorResult holds one text block and isError true', () => {
    assert.deepEqual(errorResult('it broke'), { content: [{ type: 'text', text: 'it broke' }], isError: true });
  });
});

describe('normaliseResult accepts and copies', () => {
  test('a text result, setting isError false when it is absent', () => {
    assert.deepEqual(normaliseResult({ content: [{ type: 'text', text: 'a' }] }), { result: { content: [{ type: 'text', text: 'a' }], isError: false } });
  });

  test('isError true and false as given', () => {
    assert.deepEqual(normaliseResult({ content: [], isError: true }), { result: { content: [], isError: true } });
    assert.deepEqual(normaliseResult({ content: [], isError: false }), { result: { content: [], isError: false } });
  });

  test('an empty content array', () => {
    assert.deepEqual(normaliseResult({ content: [] }), { result: { content: [], isError: false } });
  });

  for (const media_type of ['image/png', 'image/jpeg', 'image/gif', 'image/webp']) {
    test(`an image block of type ${media_type}`, () => {
      const block = { type: 'image', source: { type: 'base64', media_type, data: 'AAAA' } };
      assert.deepEqual(normaliseResult({ content: [block] }), { result: { content: [block], isError: false } });
    });
  }

  for (const media_type of ['image/svg+xml', 'image/bmp', 'image/vnd.microsoft.icon', 'image/PNG']) {
    test(`an image block of type ${media_type}, which the model providers do not take: their renderings name it`, () => {
      const block = { type: 'image', source: { type: 'base64', media_type, data: 'AAAA' } };
      assert.deepEqual(normaliseResult({ content: [block] }), { result: { content: [block], isError: false } });
    });
  }

  test('audio, embedded resources of text and of bytes, and resource links, each with annotations', () => {
    const annotations = { audience: ['user', 'assistant'], priority: 0.5, lastModified: '2025-01-12T15:00:58Z' };
    const content = [
      { type: 'text', text: 'a', annotations: {} },
      { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA' }, annotations: { priority: 0 } },
      { type: 'audio', source: { type: 'base64', media_type: 'audio/wav', data: 'UklGRg==' }, annotations },
      { type: 'audio', source: { type: 'base64', media_type: 'audio/mpeg', data: '' } },
      { type: 'resource', resource: { uri: 'file:///a.txt', mimeType: 'text/plain', text: 'hello' }, annotations: { audience: ['assistant'] } },
      { type: 'resource', resource: { uri: 'file:///a.txt', text: '' } },
      { type: 'resource', resource: { uri: 'file:///a.bin', mimeType: 'application/octet-stream', blob: 'AAEC' } },
      { type: 'resource_link', uri: 'file:///r.pdf', name: 'r.pdf' },
      { type: 'resource_link', uri: 'file:///r.pdf', name: 'r.pdf', title: 'Report', description: 'Q3', mimeType: 'application/pdf', size: 0, annotations },
    ];
    assert.deepEqual(normaliseResult({ content }), { result: { content, isError: false } });
  });

  test("a copy of MCP's blocks without _meta, icons or extra annotations", () => {
    const normalised = normaliseResult({
      content: [
        { type: 'text', text: 'a', annotations: { priority: 1, color: 'red' }, _meta: { x: 1 } },
        { type: 'resource', resource: { uri: 'u:a', text: 'a', _meta: { x: 1 } }, _meta: {} },
        { type: 'resource_link', uri: 'u:b', name: 'b', icons: [{ src: 'https://x/i.png' }], _meta: {} },
        { type: 'audio', source: { type: 'base64', media_type: 'audio/ogg', data: 'AAAA', url: 'x' }, extra: true },
      ],
    });
    assert.deepEqual(normalised, {
      result: {
        content: [
          { type: 'text', text: 'a', annotations: { priority: 1 } },
          { type: 'resource', resource: { uri: 'u:a', text: 'a' } },
          { type: 'resource_link', uri: 'u:b', name: 'b' },
          { type: 'audio', source: { type: 'base64', media_type: 'audio/ogg', data: 'AAAA' } },
        ],
        isError: false,
      },
    });
  });

  test('a copy without extra fields on the result, its blocks, or an image source; structuredContent kept', () => {
    const value = {
      content: [
        { type: 'text', text: 'a', citations: [] },
        { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA', url: 'https://x' }, cache_control: {} },
      ],
      isError: false,
      structuredContent: { x: 1 },
      _meta: {},
    };
    const normalised = normaliseResult(value);
    assert.deepEqual(normalised, {
      result: {
        content: [
          { type: 'text', text: 'a' },
          { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA' } },
        ],
        isError: false,
        structuredContent: { x: 1 },
      },
    });
    assert.ok('result' in normalised);
    assert.notEqual(normalised.result.content[0], value.content[0], "blocks are copies, not the tool's own objects");
    assert.notEqual(normalised.result.structuredContent, value.structuredContent, "structured content is a copy, not the tool's own object");
    assert.deepEqual(value.content[0], { type: 'text', text: 'a', citations: [] }, 'the input is not modified');
  });
});

describe('normaliseResult describes the defect of', () => {
  const cases: [string, unknown, string][] = [
    ['undefined', undefined, 'expected an object with a content array, got undefined'],
    ['null', null, 'expected an object with a content array, got null'],
    ['an array', [{ type: 'text', text: 'a' }], 'expected an object with a content array, got an array'],
    ['a string', 'done', 'expected an object with a content array, got a string'],
    ['a number', 42, 'expected an object with a content array, got number'],
    ['a result without content', { isError: false }, 'expected a content array, got undefined'],
    ['content that is a string', { content: 'x' }, 'expected a content array, got a string'],
    ['content that is an object', { content: { type: 'text', text: 'a' } }, 'expected a content array, got an object'],
    ['isError that is a string', { content: [], isError: 'yes' }, 'expected isError to be a boolean, got a string'],
    ['isError that is null', { content: [], isError: null }, 'expected isError to be a boolean, got null'],
    ['isError that is a number', { content: [], isError: 1 }, 'expected isError to be a boolean, got number'],
    ['a block that is not an object', { content: ['hi'] }, 'content[0] must be an object, got a string'],
    ['a block that is null', { content: [{ type: 'text', text: 'a' }, null] }, 'content[1] must be an object, got null'],
    ['a text block without text', { content: [{ type: 'text' }] }, 'content[0] is a text block without a string text'],
    ['a text block whose text is a number', { content: [{ type: 'text', text: 5 }] }, 'content[0] is a text block without a string text'],
    ['a block without a type', { content: [{ text: 'a' }] }, 'content[0] has unknown type undefined'],
  ];
  const imageDefect = 'content[0] is an image block without a base64 source of an image/* media type';
  for (const [label, source] of [
    ['an image block without a source', undefined],
    ['an image block with a url source', { type: 'url', url: 'https://x/a.png' }],
    ['an image block whose media type is not an image type', { type: 'base64', media_type: 'text/plain', data: 'AAAA' }],
    ['an image block whose media type has parameters', { type: 'base64', media_type: 'image/svg+xml; charset=utf-8', data: 'AAAA' }],
    ['an image block whose media type has no subtype', { type: 'base64', media_type: 'image/', data: 'AAAA' }],
    ['an image block whose data is not a string', { type: 'base64', media_type: 'image/png', data: [1, 2] }],
  ] as const) {
    cases.push([label, { content: [{ type: 'image', source }] }, imageDefect]);
  }
  const audioDefect = 'content[0] is an audio block without a base64 source of an audio/* media type';
  for (const [label, source] of [
    ['an audio block without a source', undefined],
    ['an audio block of a video type', { type: 'base64', media_type: 'video/mp4', data: 'AAAA' }],
    ['an audio block whose data is not a string', { type: 'base64', media_type: 'audio/wav', data: null }],
  ] as const) {
    cases.push([label, { content: [{ type: 'audio', source }] }, audioDefect]);
  }
  const resourceDefect = 'content[0] is a resource block without a resource {uri, mimeType?, text or blob} of strings';
  for (const [label, resource] of [
    ['a resource block without a resource', undefined],
    ['a resource block whose resource is a string', 'file:///a.txt'],
    ['a resource without a uri', { text: 'a' }],
    ['a resource with neither text nor blob', { uri: 'file:///a.txt' }],
    ['a resource with both text and blob', { uri: 'file:///a.txt', text: 'a', blob: 'AAAA' }],
    ['a resource whose blob is a number', { uri: 'file:///a.bin', blob: 5 }],
    ['a text resource with a blob that is not a string', { uri: 'file:///a.txt', text: 'a', blob: null }],
    ['a resource whose mimeType is a number', { uri: 'file:///a.txt', mimeType: 1, text: 'a' }],
  ] as const) {
    cases.push([label, { content: [{ type: 'resource', resource }] }, resourceDefect]);
  }
  const link = { type: 'resource_link', uri: 'file:///r.pdf', name: 'r.pdf' };
  cases.push(
    ['a resource link without a uri', { content: [{ ...link, uri: undefined }] }, 'content[0] is a resource_link block without a string uri'],
    ['a resource link without a name', { content: [{ ...link, name: 3 }] }, 'content[0] is a resource_link block without a string name'],
    ['a resource link whose title is not a string', { content: [{ ...link, title: 1 }] }, 'content[0] is a resource_link block whose title is not a string'],
    [
      'a resource link whose description is null',
      { content: [{ ...link, description: null }] },
      'content[0] is a resource_link block whose description is not a string',
    ],
    [
      'a resource link whose mimeType is not a string',
      { content: [{ ...link, mimeType: {} }] },
      'content[0] is a resource_link block whose mimeType is not a string',
    ],
  );
  for (const size of [-1, 1.5, '3', 2 ** 53]) {
    cases.push([
      `a resource link of size ${JSON.stringify(size)}`,
      { content: [{ ...link, size }] },
      'content[0] is a resource_link block whose size is not a whole number of bytes',
    ]);
  }
  for (const [label, annotations, defect] of [
    ['null', null, 'that are not an object but null'],
    ['an array', ['user'], 'that are not an object but an array'],
    ['an audience that is a string', { audience: 'user' }, 'whose audience is not a list of "user" and "assistant"'],
    ['an audience naming someone else', { audience: ['user', 'model'] }, 'whose audience is not a list of "user" and "assistant"'],
    ['a priority above 1', { priority: 2 }, 'whose priority is not a number from 0 to 1'],
    ['a priority that is NaN', { priority: Number.NaN }, 'whose priority is not a number from 0 to 1'],
    ['a priority that is a string', { priority: '1' }, 'whose priority is not a number from 0 to 1'],
    ['a lastModified that is a number', { lastModified: 1_700_000_000 }, 'whose lastModified is not a string'],
  ] as const) {
    cases.push([
      `annotations that are ${label}`,
      {
        content: [
          { type: 'text', text: 'a' },
          { type: 'text', text: 'b', annotations },
        ],
      },
      `content[1] has annotations ${defect}`,
    ]);
  }
  for (const [label, value, defect] of cases) {
    test(label, () => {
      assert.deepEqual(normaliseResult(value), { defect });
    });
  }

  test('a block of unknown type, naming the type', () => {
    assert.deepEqual(normaliseResult({ content: [{ type: 'video', data: '' }] }), { defect: 'content[0] has unknown type "video"' });
  });

  test('a block of unknown type, naming at most 64 characters of it', () => {
    assert.deepEqual(normaliseResult({ content: [{ type: 'v'.repeat(1000) }] }), { defect: `content[0] has unknown type "${'v'.repeat(64)}..."` });
  });

  test('a block in the MCP image shape, which is not a ToolResult image', () => {
    assert.deepEqual(normaliseResult({ content: [{ type: 'image', data: 'AAAA', mimeType: 'image/png' }] }), {
      defect: 'content[0] is an image block without a base64 source of an image/* media type',
    });
  });
});

describe('normaliseResult and structuredContent', () => {
  test('a copy is what JSON carries: undefined properties left out, a Date as its string, toJSON applied', () => {
    const when = new Date(Date.UTC(2024, 0, 2));
    const normalised = normaliseResult({ content: [], structuredContent: { a: 1, gone: undefined, when, nested: { list: [1, 'two', null] } } });
    assert.deepEqual(normalised, {
      result: { content: [], isError: false, structuredContent: { a: 1, when: '2024-01-02T00:00:00.000Z', nested: { list: [1, 'two', null] } } },
    });
  });

  test('structuredContent: undefined is no structured content', () => {
    assert.deepEqual(normaliseResult({ content: [], structuredContent: undefined }), { result: { content: [], isError: false } });
  });

  const circular: Record<string, unknown> = { a: 1 };
  circular.self = circular;
  const nested = (levels: number): Record<string, unknown> => {
    let value: Record<string, unknown> = {};
    for (let i = 1; i < levels; i++) value = { d: value };
    return value;
  };
  const deep = nested(100_000);
  const cases: [string, unknown, string | RegExp][] = [
    ['null', null, 'expected structuredContent to be an object, got null'],
    ['an array', [1], 'expected structuredContent to be an object, got an array'],
    ['a string', '{"a":1}', 'expected structuredContent to be an object, got a string'],
    ['a number', 3, 'expected structuredContent to be an object, got number'],
    ['an object whose toJSON gives an array', { toJSON: () => [1] }, 'expected structuredContent to be an object, got an array as JSON'],
    ['a cycle', circular, /^structuredContent is not JSON: Converting circular structure to JSON$/],
    ['a BigInt', { n: 1n }, /^structuredContent is not JSON: Do not know how to serialize a BigInt$/],
    [
      'a getter that throws',
      {
        get boom(): never {
          throw new Error('no value');
        },
      },
      'structuredContent is not JSON: no value',
    ],
    ['nesting deeper than 256 levels', nested(257), 'structuredContent nests deeper than 256 levels'],
    // Past the stack on Node 22 and 24 (JSON.stringify overflows first), not on 26: a defect either way.
    ['nesting deeper than the stack', deep, /^structuredContent (is not JSON: Maximum call stack size exceeded|nests deeper than 256 levels)$/],
  ];
  for (const [label, structuredContent, defect] of cases) {
    test(`a defect: structuredContent that is ${label}`, () => {
      const normalised = normaliseResult({ content: [], structuredContent });
      assert.ok('defect' in normalised, JSON.stringify(normalised));
      if (typeof defect === 'string') assert.equal(normalised.defect, defect);
      else assert.match(normalised.defect, defect);
    });
  }
});

describe('readableContent', () => {
  const json = { type: 'text', text: '{"files":["a.ts"],"n":1}' } as const;
  const structuredContent = { files: ['a.ts'], n: 1 };
  const image = { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA' } } as const;

  test('is the content itself for a result without structured content', () => {
    const result: ToolResult = { content: [] };
    assert.equal(readableContent(result), result.content);
  });

  test('adds the structured content as JSON text when the content holds no text', () => {
    assert.deepEqual(readableContent({ content: [], structuredContent }), [json]);
    assert.deepEqual(readableContent({ content: [image], structuredContent }), [image, json]);
  });

  test('adds it when the only text is empty or white space, which says nothing', () => {
    assert.deepEqual(readableContent({ content: [{ type: 'text', text: ' \n' }], structuredContent }), [{ type: 'text', text: ' \n' }, json]);
  });

  test("leaves a result with text of its own as it is: the tool's text is what a model reads", () => {
    const result: ToolResult = { content: [{ type: 'text', text: 'a.ts' }], structuredContent };
    assert.equal(readableContent(result), result.content);
  });

  test('uses the JSON text made by the copy, and does not change the result', () => {
    const normalised = normaliseResult({ content: [], structuredContent: { b: 2, a: [1] } });
    assert.ok('result' in normalised);
    assert.equal(structuredText(normalised.result.structuredContent!), '{"b":2,"a":[1]}');
    assert.deepEqual(readableContent(normalised.result), [{ type: 'text', text: '{"b":2,"a":[1]}' }]);
    assert.deepEqual(normalised.result.content, []);
  });
});

test('resultSize counts the text, base64 data and names of every kind of block', () => {
  const empty = resultSize({ content: [] });
  const sizes: [ToolResult['content'][number], number][] = [
    [{ type: 'text', text: 'abc' }, 3],
    [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA' } }, 4],
    [{ type: 'audio', source: { type: 'base64', media_type: 'audio/wav', data: 'AAAAAAAA' } }, 8],
    [{ type: 'resource', resource: { uri: 'u:a', text: 'hello' } }, 3 + 5],
    [{ type: 'resource', resource: { uri: 'u:a', mimeType: 'x/y', blob: 'AAAA' } }, 3 + 4],
    [{ type: 'resource_link', uri: 'u:a', name: 'nm', title: 'T', description: 'desc' }, 3 + 2 + 1 + 4],
  ];
  for (const [block, size] of sizes) assert.equal(resultSize({ content: [block] }) - empty, 32 + size, block.type);
});

test('resultSize counts structured content once, by its JSON text', () => {
  const plain = resultSize({ content: [{ type: 'text', text: 'x' }] });
  const withStructured = resultSize({ content: [{ type: 'text', text: 'x' }], structuredContent: { text: 'y'.repeat(1000) } });
  assert.equal(withStructured - plain, 32 + JSON.stringify({ text: 'y'.repeat(1000) }).length);
});

test('structuredContent nesting 256 levels (objects and arrays) is taken whole', () => {
  let value: unknown = {};
  for (let i = 1; i < 256; i++) value = i % 2 === 0 ? { d: value } : [value];
  const structuredContent = { d: value } as Record<string, unknown>;
  // 256 levels counting the root: the root, then 255 below it.
  let root: unknown = {};
  for (let i = 1; i < 256; i++) root = { d: root };
  const normalised = normaliseResult({ content: [], structuredContent: root });
  assert.ok('result' in normalised, JSON.stringify(normalised).slice(0, 200));
  assert.ok('defect' in normaliseResult({ content: [], structuredContent }), 'one level more (257) is a defect');
});
