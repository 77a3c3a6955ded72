import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ToolRegistry } from '../../src/core/registry.js';
import type { ToolResult } from '../../src/core/types.js';
import { buildApp } from '../../src/http/app.js';
import {
  toAnthropicToolResult,
  toAnthropicToolResultMessage,
  toMCPCallToolResult,
  toOpenAIFunctionCallOutput,
  toOpenAIToolMessages,
} from '../../src/providers/results.js';
import { Echo } from '../../src/tools/echo.js';
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
