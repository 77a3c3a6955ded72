import type { Static } from 'typebox';
import { readableContent } from '../core/result.js';
import type { AudioBlock, ContentBlock, ImageBlock, ResourceBlock, ResourceLinkBlock, ToolResult } from '../core/types.js';
import {
  PROVIDER_IMAGE_TYPES,
  type AnthropicToolResultBlockSchema,
  type AnthropicToolResultMessageSchema,
  type MCPCallToolResultSchema,
  type OpenAIFunctionCallOutputSchema,
  type OpenAIImageMessageSchema,
  type OpenAIToolMessageSchema,
} from './shapes.js';

// A ToolResult in each model provider's own shape, for what goes back to the model. The shapes
// are declared once, as TypeBox schemas in ./schemas.ts (which the OpenAPI document publishes);
// test/providers/sdk-shapes.test.ts checks them against the SDKs' own types at compile time.
// Anthropic's and OpenAI's shapes have no place for structured content: a result that has some
// and no text of its own carries it as a JSON text block (`readableContent`), as MCP's does.
// Nor do they take audio, resources or images of other types than png, jpeg, gif and webp: the
// model reads a text resource's text, and a line that names each of the others (`shownToModel`).

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

/** An MCP `CallToolResult`: text as is, images and audio as `{type, data, mimeType}`, resources as in MCP. A type, not an interface, so it fits the SDK's open object type. */
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
  const content: AnthropicToolResultBlock['content'] = [];
  let blank = false;
  for (const block of readableContent(result)) {
    const shown = shownToModel(block);
    if (typeof shown !== 'string') content.push({ type: 'image', source: { type: 'base64', ...shown } });
    else if (shown.trim() === '') blank ||= shown !== '';
    else content.push({ type: 'text', text: shown });
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
      const shown = shownToModel(block);
      if (typeof shown === 'string') texts.push(shown);
      else {
        if (count++ === 0) images.push({ type: 'text', text: `Images returned by tool call ${id}:` });
        images.push({ type: 'image_url', image_url: { url: dataUrl(shown) } });
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
  const shown = readableContent(result).map(shownToModel);
  if (shown.every((part) => typeof part === 'string')) {
    return { type: 'function_call_output', call_id: callId, output: prefix + shown.join('\n') };
  }
  const parts: Exclude<OpenAIFunctionCallOutput['output'], string> = prefix ? [{ type: 'input_text', text: prefix.trimEnd() }] : [];
  for (const part of shown) parts.push(typeof part === 'string' ? { type: 'input_text', text: part } : { type: 'input_image', image_url: dataUrl(part) });
  return { type: 'function_call_output', call_id: callId, output: parts };
}

/**
 * The content kinds an MCP client can read: audio arrived in revision 2025-03-26, resource links in
 * 2025-06-18. A kind a client cannot read reaches it as a text block that names it.
 */
export interface MCPContentKinds {
  audio: boolean;
  resourceLinks: boolean;
}

const EVERY_MCP_KIND: MCPContentKinds = { audio: true, resourceLinks: true };

/**
 * `result` as an MCP `CallToolResult`, as the MCP layer answers `tools/call` and `?format=mcp`
 * renders: each block in MCP's own shape with its annotations (images and audio as
 * `{type, data, mimeType}`), `isError` always present (a tool's own failure stays a result the
 * model can read), and `structuredContent` when it has some (held in the content as JSON text too
 * when the tool wrote no text of its own, for clients that do not read the field).
 */
export function toMCPCallToolResult(result: ToolResult, kinds: MCPContentKinds = EVERY_MCP_KIND): MCPCallToolResult {
  const out: MCPCallToolResult = { content: readableContent(result).map((block) => toMCPContent(block, kinds)), isError: result.isError === true };
  if (result.structuredContent !== undefined) out.structuredContent = result.structuredContent;
  return out;
}

type MCPContent = MCPCallToolResult['content'][number];

function toMCPContent(block: ContentBlock, kinds: MCPContentKinds): MCPContent {
  const annotations = block.annotations === undefined ? {} : { annotations: block.annotations };
  switch (block.type) {
    case 'text':
      return { type: 'text', text: block.text, ...annotations };
    case 'image':
      return { type: 'image', data: block.source.data, mimeType: block.source.media_type, ...annotations };
    case 'audio':
      if (!kinds.audio) return { type: 'text', text: audioNote(block, "the client's MCP revision has no audio content"), ...annotations };
      return { type: 'audio', data: block.source.data, mimeType: block.source.media_type, ...annotations };
    case 'resource': {
      const { uri, mimeType } = block.resource;
      const type = mimeType === undefined ? {} : { mimeType };
      const contents = 'text' in block.resource ? { uri, ...type, text: block.resource.text } : { uri, ...type, blob: block.resource.blob };
      return { type: 'resource', resource: contents, ...annotations };
    }
    case 'resource_link':
      if (!kinds.resourceLinks) return { type: 'text', text: resourceLinkText(block), ...annotations };
      return { ...copyResourceLink(block), ...annotations };
  }
}

// OpenAI's tool messages have no error flag: the text says it, as a model would read it.
function errorPrefix(result: ToolResult): string {
  return result.isError === true ? 'Error: ' : '';
}

type ProviderImageType = (typeof PROVIDER_IMAGE_TYPES)[number];

/** An image a provider takes: one of its four types, in lower case as the APIs spell them. */
interface ShownImage {
  media_type: ProviderImageType;
  data: string;
}

const PROVIDER_IMAGE_TYPE_SET: ReadonlySet<string> = new Set(PROVIDER_IMAGE_TYPES);

/** What a model is shown of a block in the Anthropic and OpenAI shapes: an image they take, or text. */
function shownToModel(block: ContentBlock): string | ShownImage {
  switch (block.type) {
    case 'text':
      return block.text;
    case 'image': {
      const media_type = block.source.media_type.toLowerCase();
      if (PROVIDER_IMAGE_TYPE_SET.has(media_type)) return { media_type: media_type as ProviderImageType, data: block.source.data };
      return imageNote(block);
    }
    case 'audio':
      return audioNote(block, 'the API takes no audio in tool results');
    case 'resource':
      return resourceText(block);
    case 'resource_link':
      return resourceLinkText(block);
  }
}

function imageNote(block: ImageBlock): string {
  return `[${block.source.media_type} image, ${base64Bytes(block.source.data)} bytes, not shown: the API takes png, jpeg, gif and webp]`;
}

function audioNote(block: AudioBlock, why: string): string {
  return `[${block.source.media_type} audio, ${base64Bytes(block.source.data)} bytes, not shown: ${why}]`;
}

/** A text resource as its text under a line that names it; a binary one as that line alone. */
function resourceText(block: ResourceBlock): string {
  const r = block.resource;
  const name = `resource ${r.uri}${r.mimeType === undefined ? '' : `, ${r.mimeType}`}`;
  return 'text' in r ? `[${name}]\n${r.text}` : `[${name}, ${base64Bytes(r.blob)} bytes, not shown: binary content]`;
}

function resourceLinkText(block: ResourceLinkBlock): string {
  const title = block.title === undefined ? '' : ` (${block.title})`;
  const type = block.mimeType === undefined ? '' : `, ${block.mimeType}`;
  const size = block.size === undefined ? '' : `, ${block.size} bytes`;
  const description = block.description === undefined ? '' : `\n${block.description}`;
  return `[resource link: ${block.name}${title}, ${block.uri}${type}${size}]${description}`;
}

/** How many bytes base64 text decodes to. */
function base64Bytes(data: string): number {
  const padding = data.endsWith('==') ? 2 : data.endsWith('=') ? 1 : 0;
  return Math.max(0, Math.floor((data.length * 3) / 4) - padding);
}

function dataUrl(image: ShownImage): string {
  return `data:${image.media_type};base64,${image.data}`;
}

// A copy with only the keys MCP's resource link has, whatever else the block object carries.
function copyResourceLink(block: ResourceLinkBlock): ResourceLinkBlock {
  const copy: ResourceLinkBlock = { type: 'resource_link', uri: block.uri, name: block.name };
  if (block.title !== undefined) copy.title = block.title;
  if (block.description !== undefined) copy.description = block.description;
  if (block.mimeType !== undefined) copy.mimeType = block.mimeType;
  if (block.size !== undefined) copy.size = block.size;
  return copy;
}
