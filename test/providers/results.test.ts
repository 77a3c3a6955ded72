import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ToolRegistry } from '../../src/core/registry.js';
import type { ToolResult } from '../../src/core/types.js';
import { buildApp } from '../../src/http/app.js';
import { toAnthropicToolResult, toAnthropicToolResultMessage } from '../../src/providers/results.js';
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
    [{ content: [text('\n'), { type: 'image', source: { type: 'base64', media_type: 'image/png', data: PIXEL } }] }, [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: PIXEL } }]],
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
  assert.deepEqual(plain.json(), { content: [text('')], isError: false }, 'the plain ToolResult is the tool\'s own, unchanged');
});
