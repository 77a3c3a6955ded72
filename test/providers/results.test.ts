import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ToolRegistry } from '#src/core/registry.js';
import type { ToolResult } from '#src/core/types.js';
import { buildApp } from '#src/http/app.js';
import {
  toAnthropicToolResult,
  toAnthropicToolResultMessage,
  toMCPCallToolResult,
  toOpenAIFunctionCallOutput,
  toOpenAIToolMessages,
} from '#src/providers/results.js';
import { Echo } from '#src/tools/echo.js';
import { PIXEL } from '../fixtures/tools.js';

const text = (t: string) => ({ type: 'text' as const, text: t });

test('an Anthropic tool_result never holds an empty or white-space-only text block, nor an empty content array', () => {
  const cases: Array<[ToolResult, unknown[]]> = [
    [{ content: [text('')] }, [text('(no output)')]],
    [{ content: [] }, [text('(no output)')]],
    [{ content: [text(' \n\t')] }, [text('(only white space)')]],
    [{ content: [text(''), text('\u00a0\u2003')] }, [text('(only white space)')]],
    [{ content: [text(''), text('kept'), text('  ')] }, [text('kept')]],
    [
      { content: [text('\n'), { type: 'image', source: { type: 'base64', media_type: 'image/png', data: PIXEL } }] },
      [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: PIXEL } }],
    ],
  ];
  for (const [result, content] of cases) {
    assert.deepEqual(toAnthropicToolResult('toolu_1', result), { type: 'tool_result', tool_use_id: 'toolu_1', content, is_error: false });
  }
  assert.deepEqual(toAnthropicToolResultMessage([{ id: 'toolu_2', result: { content: [text('')], isError: true } }]), {
    role: 'user',
    content: [{ type: 'tool_result', tool_use_id: 'toolu_2', content: [text('(no output)')], is_error: true }],
  });
});

test('Echo of empty text answers a non-empty tool_result through POST /calls and POST /tools/Echo?format=anthropic', async (t) => {
  const registry = new ToolRegistry();
  registry.register(Echo);
  const app = await buildApp({ registry });
  t.after(() => app.close());
  const turn = await app.inject({ method: 'POST', url: '/calls', payload: [{ type: 'tool_use', id: 'toolu_1', name: 'Echo', input: { text: '' } }] });
  assert.deepEqual(turn.json(), { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: [text('(no output)')], is_error: false }] });
  const single = await app.inject({ method: 'POST', url: '/tools/Echo?format=anthropic&id=toolu_9', payload: { text: '   ' } });
  assert.deepEqual(single.json(), { type: 'tool_result', tool_use_id: 'toolu_9', content: [text('(only white space)')], is_error: false });
  const plain = await app.inject({ method: 'POST', url: '/tools/Echo', payload: { text: '' } });
  assert.deepEqual(plain.json(), { content: [text('')], isError: false }, "the plain ToolResult is the tool's own, unchanged");
});

test('structured content goes to Anthropic and OpenAI, which have no field for it, as JSON text when the tool wrote none', () => {
  const structuredContent = { files: ['a.ts'], count: 1 };
  const json = text('{"files":["a.ts"],"count":1}');
  const image = { type: 'image' as const, source: { type: 'base64' as const, media_type: 'image/png' as const, data: PIXEL } };
  const bare: ToolResult = { content: [], isError: false, structuredContent };
  const withImage: ToolResult = { content: [image], isError: false, structuredContent };
  const withText: ToolResult = { content: [text('a.ts')], isError: false, structuredContent };
  const blank: ToolResult = { content: [text(' ')], isError: true, structuredContent };

  assert.deepEqual(toAnthropicToolResult('t1', bare), { type: 'tool_result', tool_use_id: 't1', content: [json], is_error: false });
  assert.deepEqual(toAnthropicToolResult('t1', withImage), { type: 'tool_result', tool_use_id: 't1', content: [image, json], is_error: false });
  assert.deepEqual(toAnthropicToolResult('t1', withText), { type: 'tool_result', tool_use_id: 't1', content: [text('a.ts')], is_error: false });
  // White space says nothing: the JSON is added, and the blank block left out as before.
  assert.deepEqual(toAnthropicToolResult('t1', blank), { type: 'tool_result', tool_use_id: 't1', content: [json], is_error: true });

  assert.deepEqual(
    toOpenAIToolMessages([
      { id: 'c1', result: bare },
      { id: 'c2', result: withText },
      { id: 'c3', result: withImage },
    ]),
    [
      { role: 'tool', tool_call_id: 'c1', content: json.text },
      { role: 'tool', tool_call_id: 'c2', content: 'a.ts' },
      { role: 'tool', tool_call_id: 'c3', content: `${json.text}\n[an image: in the next user message]` },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'Images returned by tool call c3:' },
          { type: 'image_url', image_url: { url: `data:image/png;base64,${PIXEL}` } },
        ],
      },
    ],
  );

  assert.deepEqual(toOpenAIFunctionCallOutput('c1', bare), { type: 'function_call_output', call_id: 'c1', output: json.text });
  assert.deepEqual(toOpenAIFunctionCallOutput('c1', { ...bare, isError: true }), {
    type: 'function_call_output',
    call_id: 'c1',
    output: `Error: ${json.text}`,
  });
  assert.deepEqual(toOpenAIFunctionCallOutput('c3', withImage), {
    type: 'function_call_output',
    call_id: 'c3',
    output: [
      { type: 'input_image', image_url: `data:image/png;base64,${PIXEL}` },
      { type: 'input_text', text: json.text },
    ],
  });
});

test('the MCP shape carries structuredContent as it is, and the JSON text only when the tool wrote none', () => {
  const structuredContent = { files: ['a.ts'], count: 1 };
  assert.deepEqual(toMCPCallToolResult({ content: [], isError: false, structuredContent }), {
    content: [{ type: 'text', text: '{"files":["a.ts"],"count":1}' }],
    isError: false,
    structuredContent,
  });
  assert.deepEqual(toMCPCallToolResult({ content: [text('a.ts')], structuredContent }), { content: [text('a.ts')], isError: false, structuredContent });
  assert.deepEqual(toMCPCallToolResult({ content: [text('a.ts')] }), { content: [text('a.ts')], isError: false });
});

describe('audio, resources, resource links and images of other types', () => {
  const png = { type: 'image' as const, source: { type: 'base64' as const, media_type: 'image/png', data: PIXEL } };
  const svg = { type: 'image' as const, source: { type: 'base64' as const, media_type: 'image/svg+xml', data: 'PHN2Zy8+' } };
  const upperPng = { type: 'image' as const, source: { type: 'base64' as const, media_type: 'image/PNG', data: PIXEL } };
  const audio = { type: 'audio' as const, source: { type: 'base64' as const, media_type: 'audio/wav', data: 'UklGRg==' }, annotations: { priority: 0.2 } };
  const textResource = { type: 'resource' as const, resource: { uri: 'file:///notes.txt', mimeType: 'text/plain', text: 'milk' } };
  const untypedResource = { type: 'resource' as const, resource: { uri: 'mem://1', text: '' } };
  const blobResource = { type: 'resource' as const, resource: { uri: 'file:///a.bin', mimeType: 'application/octet-stream', blob: 'AAEC' } };
  const link = {
    type: 'resource_link' as const,
    uri: 'file:///r.pdf',
    name: 'r.pdf',
    title: 'Q3 report',
    description: 'Revenue by region',
    mimeType: 'application/pdf',
    size: 1234,
    annotations: { audience: ['user' as const] },
  };
  const bareLink = { type: 'resource_link' as const, uri: 'https://example.com/y', name: 'y' };
  const all: ToolResult = { content: [text('Here:'), svg, audio, textResource, untypedResource, blobResource, link, bareLink], isError: false };
  const notes = [
    '[image/svg+xml image, 6 bytes, not shown: the API takes png, jpeg, gif and webp]',
    '[audio/wav audio, 4 bytes, not shown: the API takes no audio in tool results]',
    '[resource file:///notes.txt, text/plain]\nmilk',
    '[resource mem://1]\n',
    '[resource file:///a.bin, application/octet-stream, 3 bytes, not shown: binary content]',
    '[resource link: r.pdf (Q3 report), file:///r.pdf, application/pdf, 1234 bytes]\nRevenue by region',
    '[resource link: y, https://example.com/y]',
  ];

  test('Anthropic: a text resource is its text under a line naming it; every other kind a line naming it; no bytes', () => {
    assert.deepEqual(toAnthropicToolResult('t1', all), {
      type: 'tool_result',
      tool_use_id: 't1',
      content: [text('Here:'), ...notes.map(text)],
      is_error: false,
    });
  });

  test('Anthropic: an image of a type the API takes is shown, its type in lower case', () => {
    const image = { type: 'image', source: { type: 'base64', media_type: 'image/png', data: PIXEL } };
    assert.deepEqual(toAnthropicToolResult('t1', { content: [png, upperPng, svg] }).content, [image, image, text(notes[0]!)]);
  });

  test('OpenAI Chat Completions: the lines go in the tool message; only images the API takes go to the user message', () => {
    assert.deepEqual(toOpenAIToolMessages([{ id: 'c1', result: { ...all, isError: true } }]), [
      { role: 'tool', tool_call_id: 'c1', content: `Error: Here:\n${notes.join('\n')}` },
    ]);
    assert.deepEqual(toOpenAIToolMessages([{ id: 'c2', result: { content: [svg, png] } }]), [
      { role: 'tool', tool_call_id: 'c2', content: `${notes[0]}\n[an image: in the next user message]` },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'Images returned by tool call c2:' },
          { type: 'image_url', image_url: { url: `data:image/png;base64,${PIXEL}` } },
        ],
      },
    ]);
  });

  test('OpenAI Responses: a string when no image is shown; input parts, the lines as text, when one is', () => {
    assert.deepEqual(toOpenAIFunctionCallOutput('c1', all), { type: 'function_call_output', call_id: 'c1', output: `Here:\n${notes.join('\n')}` });
    assert.deepEqual(toOpenAIFunctionCallOutput('c2', { content: [audio, upperPng] }), {
      type: 'function_call_output',
      call_id: 'c2',
      output: [
        { type: 'input_text', text: notes[1] },
        { type: 'input_image', image_url: `data:image/png;base64,${PIXEL}` },
      ],
    });
  });

  test("MCP: every block in MCP's own shape, with its annotations", () => {
    assert.deepEqual(toMCPCallToolResult({ ...all, content: [...all.content, png] }), {
      content: [
        text('Here:'),
        { type: 'image', data: 'PHN2Zy8+', mimeType: 'image/svg+xml' },
        { type: 'audio', data: 'UklGRg==', mimeType: 'audio/wav', annotations: { priority: 0.2 } },
        textResource,
        untypedResource,
        blobResource,
        link,
        bareLink,
        { type: 'image', data: PIXEL, mimeType: 'image/png' },
      ],
      isError: false,
    });
  });

  test('MCP: for a client whose revision lacks audio or resource links, those are lines of text that keep their annotations', () => {
    const result: ToolResult = { content: [audio, link, bareLink, textResource] };
    assert.deepEqual(toMCPCallToolResult(result, { audio: true, resourceLinks: false }).content, [
      { type: 'audio', data: 'UklGRg==', mimeType: 'audio/wav', annotations: { priority: 0.2 } },
      { type: 'text', text: notes[5], annotations: { audience: ['user'] } },
      text(notes[6]!),
      textResource,
    ]);
    assert.deepEqual(toMCPCallToolResult(result, { audio: false, resourceLinks: false }).content[0], {
      type: 'text',
      text: "[audio/wav audio, 4 bytes, not shown: the client's MCP revision has no audio content]",
      annotations: { priority: 0.2 },
    });
  });

  test('MCP: only the keys MCP has, whatever else a block object carries', () => {
    const extra = { ...bareLink, icons: [], _meta: {} } as unknown as ToolResult['content'][number];
    const resource = { type: 'resource', resource: { uri: 'u:x', blob: 'AAAA', _meta: {} } } as unknown as ToolResult['content'][number];
    assert.deepEqual(toMCPCallToolResult({ content: [extra, resource] }).content, [bareLink, { type: 'resource', resource: { uri: 'u:x', blob: 'AAAA' } }]);
  });
});
