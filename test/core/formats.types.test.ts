// A compile-time test: `tsc -p tsconfig.json` (part of `npm test`) checks that what toolport
// publishes and returns can be handed to the official SDKs without a cast. The runtime tests
// below check that the same values hold the shapes the SDK types describe.
import { toAnthropicToolResult } from '#src/providers/results.js';
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Tool, ToolResultBlockParam } from '@anthropic-ai/sdk/resources/messages';
import type { ChatCompletionFunctionTool, ChatCompletionTool } from 'openai/resources/chat/completions';
import { Type } from 'typebox';
import { defineTool } from '#src/core/define-tool.js';
import { ToolExecutor } from '#src/core/executor.js';
import { ToolRegistry } from '#src/core/registry.js';
import type { ToolResult } from '#src/core/types.js';

const Pixel = defineTool({
  name: 'Pixel',
  description: 'Returns a caption and a one-pixel image.',
  inputSchema: Type.Object({ caption: Type.String() }, { additionalProperties: false }),
  annotations: { readOnlyHint: true },
  execute: ({ caption }) => ({
    content: [
      { type: 'text', text: caption },
      { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } },
    ],
  }),
});

const registry = new ToolRegistry().register(Pixel);

// The type checks: each assignment compiles only if toolport's shape fits the SDK's type.
const anthropicTools: Tool[] = registry.toAPI('anthropic');
const anthropicDefault: Tool[] = registry.toAPI();
const openaiFunctionTools: ChatCompletionFunctionTool[] = registry.toAPI('openai');
const openaiTools: ChatCompletionTool[] = registry.toAPI('openai');
const toToolResultContent = (result: ToolResult): ToolResultBlockParam['content'] => toAnthropicToolResult('toolu_1', result).content;

// Proof that the check can fail: an Anthropic tool without input_schema is not a Tool.
// @ts-expect-error input_schema is required by the Anthropic SDK's Tool
const missingSchema: Tool = { name: 'NoSchema', description: 'Has no input_schema.' };

test('the Anthropic tool list holds the shape of the SDK Tool type at runtime', () => {
  assert.equal(anthropicDefault, anthropicTools);
  assert.deepEqual(anthropicTools, [
    {
      name: 'Pixel',
      description: 'Returns a caption and a one-pixel image.',
      input_schema: {
        type: 'object',
        required: ['caption'],
        properties: { caption: { type: 'string' } },
        additionalProperties: false,
      },
    },
  ]);
  assert.equal('input_schema' in missingSchema, false);
});

test('the OpenAI tool list holds the shape of ChatCompletionFunctionTool at runtime', () => {
  assert.equal(openaiTools, openaiFunctionTools);
  assert.deepEqual(openaiFunctionTools, [
    {
      type: 'function',
      function: {
        name: 'Pixel',
        description: 'Returns a caption and a one-pixel image.',
        parameters: {
          type: 'object',
          required: ['caption'],
          properties: { caption: { type: 'string' } },
          additionalProperties: false,
        },
      },
    },
  ]);
});

test("registry.toAPI('anthropic') is assignable to the Anthropic SDK Tool[] without a cast", () => {
  assert.ok(Array.isArray(anthropicTools));
});

test('a ToolResult content is a valid tool_result content for the Anthropic SDK', async () => {
  const result = await new ToolExecutor({ registry }).call('Pixel', { caption: 'a dot' });
  const block: ToolResultBlockParam = { type: 'tool_result', tool_use_id: 'toolu_01', content: toToolResultContent(result), is_error: result.isError };
  assert.deepEqual(block, {
    type: 'tool_result',
    tool_use_id: 'toolu_01',
    content: [
      { type: 'text', text: 'a dot' },
      { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } },
    ],
    is_error: false,
  });
});
