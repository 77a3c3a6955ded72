// What /calls answers and the package's helpers return, checked against the providers' own SDKs:
// at compile time (each assignment compiles only if the shape fits the SDK's type) and at run
// time, through the SDKs' real request builders, against the providers' published rules for the
// next request (no extra keys, every call answered by its id, images only where taken).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import type { MessageParam, ToolResultBlockParam } from '@anthropic-ai/sdk/resources/messages';
import OpenAI from 'openai';
import type { ChatCompletionMessageParam, ChatCompletionMessageToolCall, ChatCompletionToolMessageParam } from 'openai/resources/chat/completions';
import type { FunctionTool, ResponseInputItem } from 'openai/resources/responses/responses';
import type { CallToolResult } from '@modelcontextprotocol/server';
import { ToolRegistry } from '#src/core/registry.js';
import type { ToolResult } from '#src/core/types.js';
import { buildApp } from '#src/http/app.js';
import {
  toAnthropicToolResult,
  toAnthropicToolResultMessage,
  toMCPCallToolResult,
  toOpenAIFunctionCallOutputs,
  toOpenAIToolMessages,
  type OpenAIToolMessage,
} from '#src/providers/results.js';
import { Echo } from '#src/tools/echo.js';
import { Picture, PIXEL } from '../fixtures/tools.js';

const result: ToolResult = Picture.execute({}, undefined as never) as ToolResult;

// The compile-time checks.
const block: ToolResultBlockParam = toAnthropicToolResult('toolu_1', result);
const message: MessageParam = toAnthropicToolResultMessage([{ id: 'toolu_1', result }]);
const chat: ChatCompletionMessageParam[] = toOpenAIToolMessages([{ id: 'call_1', result }]);
const toolMessage: ChatCompletionToolMessageParam = chat[0] as OpenAIToolMessage;
const responses: ResponseInputItem[] = toOpenAIFunctionCallOutputs([{ id: 'call_1', result }]);
const mcp: CallToolResult = toMCPCallToolResult(result);
const registry = new ToolRegistry().register(Echo).register(Picture);
const responsesTools: FunctionTool[] = registry.toAPI('openai-responses');
const strictResponsesTools: FunctionTool[] = registry.toAPI('openai-responses', undefined, { strict: true });
// Proof that the checks can fail: a ToolResult as is is not a tool_result block.
// @ts-expect-error tool_use_id and type are missing, and isError is not a key the API takes
const notABlock: ToolResultBlockParam = result;

test("the helpers' values are the shapes the SDK types describe", () => {
  assert.deepEqual(Object.keys(block).sort(), ['content', 'is_error', 'tool_use_id', 'type']);
  assert.equal(message.role, 'user');
  assert.equal(toolMessage.role, 'tool');
  assert.equal(responses.length, 1);
  assert.deepEqual(mcp.content[1], { type: 'image', data: PIXEL, mimeType: 'image/png' });
  assert.equal(responsesTools[0]!.strict, false, 'Responses defaults to strict: the flag is said outright');
  assert.equal(strictResponsesTools[0]!.strict, true);
  assert.equal('tool_use_id' in notABlock, false);
});

/** A fetch that records the request body an SDK would send, and answers with `reply`. */
function recordingFetch(reply: unknown) {
  const bodies: Record<string, unknown>[] = [];
  const fetch = async (_url: string | URL | Request, init?: RequestInit): Promise<Response> => {
    bodies.push(JSON.parse(String(init?.body)) as Record<string, unknown>);
    return new Response(JSON.stringify(reply), { status: 200, headers: { 'content-type': 'application/json' } });
  };
  return { bodies, fetch };
}

async function callsApp() {
  const app = await buildApp({ registry: new ToolRegistry().register(Echo).register(Picture) });
  const turn = async (body: unknown) => {
    const res = await app.inject({ method: 'POST', url: '/calls', payload: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
    assert.equal(res.statusCode, 200, res.body);
    return res.json() as unknown;
  };
  return { app, turn };
}

const ANTHROPIC_TOOL_RESULT_KEYS = new Set(['type', 'tool_use_id', 'content', 'is_error', 'cache_control']);

test("Anthropic: the SDK sends /calls' answer as the next user message, and the API's rules for it hold", async (t) => {
  const { app, turn } = await callsApp();
  t.after(() => app.close());
  const assistant = {
    role: 'assistant' as const,
    content: [
      { type: 'text' as const, text: 'Two tools.' },
      { type: 'tool_use' as const, id: 'toolu_a', name: 'Echo', input: { text: 'hi' } },
      { type: 'tool_use' as const, id: 'toolu_b', name: 'Picture', input: {} },
    ],
  };
  const next = (await turn(assistant)) as MessageParam;
  const { bodies, fetch } = recordingFetch({
    id: 'msg',
    type: 'message',
    role: 'assistant',
    content: [],
    model: 'm',
    stop_reason: 'end_turn',
    stop_sequence: null,
    usage: { input_tokens: 1, output_tokens: 1 },
  });
  const client = new Anthropic({ apiKey: 'test', fetch, maxRetries: 0 });
  await client.messages.create({ model: 'claude-test-model', max_tokens: 64, messages: [{ role: 'user', content: 'go' }, assistant, next] });

  const sent = (bodies[0]!.messages as { role: string; content: { type: string; tool_use_id?: string; content?: { type: string }[] }[] }[])[2]!;
  assert.equal(sent.role, 'user');
  // Rules: the user message right after tool_use blocks starts with a tool_result for each, by id.
  assert.deepEqual(
    sent.content.map((b) => b.tool_use_id),
    ['toolu_a', 'toolu_b'],
  );
  for (const b of sent.content) {
    assert.equal(b.type, 'tool_result');
    for (const key of Object.keys(b)) assert.ok(ANTHROPIC_TOOL_RESULT_KEYS.has(key), `tool_result takes no key ${key}`);
    for (const part of b.content!) assert.ok(['text', 'image'].includes(part.type));
  }
});

test("OpenAI Chat Completions: the SDK sends the tool messages after the assistant's tool_calls, every call answered, images in a user message", async (t) => {
  const { app, turn } = await callsApp();
  t.after(() => app.close());
  const toolCalls: ChatCompletionMessageToolCall[] = [
    { id: 'call_a', type: 'function', function: { name: 'Echo', arguments: '{"text":"hi"}' } },
    { id: 'call_b', type: 'function', function: { name: 'Picture', arguments: '{}' } },
  ];
  const assistant: ChatCompletionMessageParam = { role: 'assistant', content: null, tool_calls: toolCalls };
  const next = (await turn(assistant)) as ChatCompletionMessageParam[];
  const { bodies, fetch } = recordingFetch({ id: 'c', object: 'chat.completion', created: 0, model: 'm', choices: [] });
  const client = new OpenAI({ apiKey: 'test', fetch, maxRetries: 0 });
  await client.chat.completions.create({ model: 'gpt-5', messages: [{ role: 'user', content: 'go' }, assistant, ...next] });

  const messages = bodies[0]!.messages as { role: string; tool_call_id?: string; content: unknown }[];
  // Rules: each tool_call is answered by a tool message with its id, right after the assistant
  // message; tool messages hold text only; images travel in a user message.
  const tools = messages.slice(2, 4);
  assert.deepEqual(
    tools.map((m) => [m.role, m.tool_call_id]),
    [
      ['tool', 'call_a'],
      ['tool', 'call_b'],
    ],
  );
  for (const m of tools) assert.equal(typeof m.content, 'string');
  const images = messages[4]!;
  assert.equal(images.role, 'user');
  assert.ok((images.content as { type: string }[]).some((p) => p.type === 'image_url'));
  assert.equal(messages.length, 5);
});

test('OpenAI Responses: the SDK sends function_call_output items whose call_ids match the function_call items', async (t) => {
  const { app, turn } = await callsApp();
  t.after(() => app.close());
  const output = [
    { type: 'function_call' as const, id: 'fc_1', call_id: 'call_a', name: 'Echo', arguments: '{"text":"hi"}', status: 'completed' as const },
    { type: 'function_call' as const, id: 'fc_2', call_id: 'call_b', name: 'Picture', arguments: '{}', status: 'completed' as const },
  ];
  const next = (await turn({ id: 'resp_1', object: 'response', output })) as ResponseInputItem[];
  const { bodies, fetch } = recordingFetch({ id: 'resp_2', object: 'response', output: [] });
  const client = new OpenAI({ apiKey: 'test', fetch, maxRetries: 0 });
  await client.responses.create({ model: 'gpt-5', input: [...output, ...next] });

  const input = bodies[0]!.input as { type: string; call_id?: string; output?: unknown }[];
  const calls = input.filter((i) => i.type === 'function_call').map((i) => i.call_id);
  const answers = input.filter((i) => i.type === 'function_call_output');
  assert.deepEqual(
    answers.map((i) => i.call_id),
    calls,
  );
  for (const answer of answers) assert.deepEqual(Object.keys(answer).sort(), ['call_id', 'output', 'type']);
  assert.deepEqual(
    (answers[1]!.output as { type: string }[]).map((p) => p.type),
    ['input_text', 'input_image'],
  );
});
