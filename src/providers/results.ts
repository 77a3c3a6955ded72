import type { Static } from 'typebox';
import { readableContent } from '../core/result.js';
import type { ContentBlock, ToolResult } from '../core/types.js';
import type {
  AnthropicToolResultBlockSchema,
  AnthropicToolResultMessageSchema,
  MCPCallToolResultSchema,
  OpenAIFunctionCallOutputSchema,
  OpenAIImageMessageSchema,
  OpenAIToolMessageSchema,
} from './shapes.js';

// A ToolResult in each model provider's own shape, for what goes back to the model. The shapes
// are declared once, as TypeBox schemas in ./schemas.ts (which the OpenAPI document publishes);
// test/providers/sdk-shapes.test.ts checks them against the SDKs' own types at compile time.
// Anthropic's and OpenAI's shapes have no place for structured content: a result that has some
// and no text of its own carries it as a JSON text block (`readableContent`), as MCP's does.

/** An Anthropic Messages API `tool_result` block: exactly the keys the API takes. */
export type AnthropicToolResultBlock = Static<typeof AnthropicToolResultBlockSchema>;

/** The user message that answers an Anthropic assistant turn's `tool_use` blocks. */
export type AnthropicToolResultMessage = Static<typeof AnthropicToolResultMessageSchema>;

/** A Chat Completions `role: "tool"` message: text only, as the API takes for tool messages. */
export type OpenAIToolMessage = Static<typeof OpenAIToolMessageSchema>;

/** A Chat Completions user message carrying the images tool results held (tool messages cannot). */
export type OpenAIImageMessage = Static<typeof OpenAIImageMessageSchema>;

export type OpenAIChatMessage = OpenAIToolMessage | OpenAIImageMessage;

/** A Responses API `function_call_output` input item: a string, or text and image parts when there are images. */
export type OpenAIFunctionCallOutput = Static<typeof OpenAIFunctionCallOutputSchema>;

/** An MCP `CallToolResult`: text as is, images as `{type: 'image', data, mimeType}`. A type, not an interface, so it fits the SDK's open object type. */
export type MCPCallToolResult = Static<typeof MCPCallToolResultSchema>;

/** A result and the id the provider gave its call. */
export interface AnsweredCall {
  id: string;
  result: ToolResult;
}

/**
 * `result` as an Anthropic `tool_result` block for the call `toolUseId`. The Messages API refuses
 * text blocks that are empty or only white space, so those are left out; a result left with no
 * block at all says what it held instead, `(no output)` or `(only white space)`.
 */
export function toAnthropicToolResult(toolUseId: string, result: ToolResult): AnthropicToolResultBlock {
  const content: ContentBlock[] = [];
  let blank = false;
  for (const block of readableContent(result)) {
    if (block.type === 'text' && block.text.trim() === '') blank ||= block.text !== '';
    else content.push(copyBlock(block));
  }
  if (content.length === 0) content.push({ type: 'text', text: blank ? EMPTY_TEXT.blank : EMPTY_TEXT.none });
  return { type: 'tool_result', tool_use_id: toolUseId, content, is_error: result.isError === true };
}

/** What an Anthropic result says in place of text that was empty, or only white space. */
const EMPTY_TEXT = { none: '(no output)', blank: '(only white space)' } as const;

/** The next user message of an Anthropic conversation: one `tool_result` per call, in order. */
export function toAnthropicToolResultMessage(calls: readonly AnsweredCall[]): AnthropicToolResultMessage {
  return { role: 'user', content: calls.map((c) => toAnthropicToolResult(c.id, c.result)) };
}

/**
 * The Chat Completions messages that answer an assistant's `tool_calls`: one `role: "tool"`
 * message per call, in order, then, when any result holds images, one user message carrying
 * them (tool messages take text only); each tool message names the images it left there.
 */
export function toOpenAIToolMessages(calls: readonly AnsweredCall[]): OpenAIChatMessage[] {
  const messages: OpenAIChatMessage[] = [];
  const images: OpenAIImageMessage['content'] = [];
  for (const { id, result } of calls) {
    const texts: string[] = [];
    let count = 0;
    for (const block of readableContent(result)) {
      if (block.type === 'text') texts.push(block.text);
      else {
        if (count++ === 0) images.push({ type: 'text', text: `Images returned by tool call ${id}:` });
        images.push({ type: 'image_url', image_url: { url: dataUrl(block) } });
      }
    }
    if (count > 0) texts.push(`[${count === 1 ? 'an image' : `${count} images`}: in the next user message]`);
    messages.push({ role: 'tool', tool_call_id: id, content: errorPrefix(result) + texts.join('\n') });
  }
  if (images.length > 0) messages.push({ role: 'user', content: images });
  return messages;
}

/** The Responses API items that answer `function_call` items: one `function_call_output` each, in order. */
export function toOpenAIFunctionCallOutputs(calls: readonly AnsweredCall[]): OpenAIFunctionCallOutput[] {
  return calls.map(({ id, result }) => toOpenAIFunctionCallOutput(id, result));
}

/** One `function_call_output` item: a string for text, a list of input parts when the result holds images. */
export function toOpenAIFunctionCallOutput(callId: string, result: ToolResult): OpenAIFunctionCallOutput {
  const prefix = errorPrefix(result);
  const content = readableContent(result);
  if (content.every((b) => b.type === 'text')) {
    return { type: 'function_call_output', call_id: callId, output: prefix + content.map((b) => (b as { text: string }).text).join('\n') };
  }
  const parts: Exclude<OpenAIFunctionCallOutput['output'], string> = prefix ? [{ type: 'input_text', text: prefix.trimEnd() }] : [];
  for (const block of content) {
    parts.push(block.type === 'text' ? { type: 'input_text', text: block.text } : { type: 'input_image', image_url: dataUrl(block) });
  }
  return { type: 'function_call_output', call_id: callId, output: parts };
}

/**
 * `result` as an MCP `CallToolResult`, as the MCP layer answers `tools/call` and `?format=mcp`
 * renders: images as `{type: 'image', data, mimeType}`, `isError` always present (a tool's own
 * failure stays a result the model can read), and `structuredContent` when it has some (held in
 * the content as JSON text too when the tool wrote no text of its own, for clients that do not
 * read the field).
 */
export function toMCPCallToolResult(result: ToolResult): MCPCallToolResult {
  const out: MCPCallToolResult = {
    content: readableContent(result).map((b) =>
      b.type === 'text' ? { type: 'text', text: b.text } : { type: 'image', data: b.source.data, mimeType: b.source.media_type },
    ),
    isError: result.isError === true,
  };
  if (result.structuredContent !== undefined) out.structuredContent = result.structuredContent;
  return out;
}

// OpenAI's tool messages have no error flag: the text says it, as a model would read it.
function errorPrefix(result: ToolResult): string {
  return result.isError === true ? 'Error: ' : '';
}

function dataUrl(block: Extract<ContentBlock, { type: 'image' }>): string {
  return `data:${block.source.media_type};base64,${block.source.data}`;
}

// A copy with only the keys the provider takes, whatever else a block object carries.
function copyBlock(block: ContentBlock): ContentBlock {
  if (block.type === 'text') return { type: 'text', text: block.text };
  return { type: 'image', source: { type: 'base64', media_type: block.source.media_type, data: block.source.data } };
}
