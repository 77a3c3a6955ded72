import { Type } from 'typebox';
import { ContentBlockSchema } from '../core/schemas.js';

// The providers' wire shapes of tool results, declared once: results.ts derives its types from
// these with Static<>, and the OpenAPI document publishes them as named components. They are
// structural, so the package needs none of the providers' SDKs; test/providers/sdk-shapes.test.ts
// checks them against the SDKs' own types at compile time.

/** An Anthropic Messages API `tool_result` block: exactly the keys the API takes. */
export const AnthropicToolResultBlockSchema = Type.Object(
  { type: Type.Literal('tool_result'), tool_use_id: Type.String(), content: Type.Array(ContentBlockSchema), is_error: Type.Boolean() },
  { $id: 'AnthropicToolResultBlock', additionalProperties: false, description: 'An Anthropic tool_result block: exactly the keys the API takes.' },
);

/** The user message that answers an Anthropic assistant turn's `tool_use` blocks. */
export const AnthropicToolResultMessageSchema = Type.Object(
  { role: Type.Literal('user'), content: Type.Array(AnthropicToolResultBlockSchema) },
  { $id: 'AnthropicToolResultMessage', additionalProperties: false, description: 'The next user message of an Anthropic conversation: one tool_result per call, in order.' },
);

/** A Chat Completions `role: "tool"` message: text only, as the API takes for tool messages. */
export const OpenAIToolMessageSchema = Type.Object(
  { role: Type.Literal('tool'), tool_call_id: Type.String(), content: Type.String() },
  { $id: 'OpenAIToolMessage', additionalProperties: false, description: 'A Chat Completions tool message: text only, as the API takes it.' },
);

const OpenAITextPartSchema = Type.Object(
  { type: Type.Literal('text'), text: Type.String() },
  { $id: 'OpenAITextPart', additionalProperties: false },
);
const OpenAIImagePartSchema = Type.Object(
  { type: Type.Literal('image_url'), image_url: Type.Object({ url: Type.String({ description: 'A data: URL.' }) }, { additionalProperties: false }) },
  { $id: 'OpenAIImagePart', additionalProperties: false },
);

/** A Chat Completions user message carrying the images tool results held (tool messages cannot). */
export const OpenAIImageMessageSchema = Type.Object(
  { role: Type.Literal('user'), content: Type.Array(Type.Union([OpenAITextPartSchema, OpenAIImagePartSchema], { $id: 'OpenAIUserContentPart' })) },
  { $id: 'OpenAIImageMessage', additionalProperties: false, description: 'A Chat Completions user message carrying the images of tool results (tool messages take text only).' },
);

/** A message that answers Chat Completions tool calls. */
export const OpenAIChatMessageSchema = Type.Union([OpenAIToolMessageSchema, OpenAIImageMessageSchema], { $id: 'OpenAIChatMessage' });

/** The Chat Completions messages that answer an assistant's `tool_calls`. */
export const OpenAIChatMessagesSchema = Type.Array(OpenAIChatMessageSchema, {
  $id: 'OpenAIToolMessages',
  description: 'One tool message per call, in order, then one user message with the images when a result holds any.',
});

const OpenAIInputTextSchema = Type.Object({ type: Type.Literal('input_text'), text: Type.String() }, { $id: 'OpenAIInputText', additionalProperties: false });
const OpenAIInputImageSchema = Type.Object(
  { type: Type.Literal('input_image'), image_url: Type.String({ description: 'A data: URL.' }) },
  { $id: 'OpenAIInputImage', additionalProperties: false },
);

/** A Responses API `function_call_output` input item: a string, or text and image parts when there are images. */
export const OpenAIFunctionCallOutputSchema = Type.Object(
  {
    type: Type.Literal('function_call_output'),
    call_id: Type.String(),
    output: Type.Union([Type.String(), Type.Array(Type.Union([OpenAIInputTextSchema, OpenAIInputImageSchema], { $id: 'OpenAIFunctionCallOutputPart' }))]),
  },
  { $id: 'OpenAIFunctionCallOutput', additionalProperties: false, description: 'A Responses function_call_output item: text, or input parts when the result holds images.' },
);

/** The Responses API items that answer `function_call` items. */
export const OpenAIFunctionCallOutputsSchema = Type.Array(OpenAIFunctionCallOutputSchema, {
  $id: 'OpenAIFunctionCallOutputs',
  description: 'One function_call_output item per call, in order.',
});

const MCPTextContentSchema = Type.Object({ type: Type.Literal('text'), text: Type.String() }, { $id: 'MCPTextContent', additionalProperties: false });
const MCPImageContentSchema = Type.Object(
  { type: Type.Literal('image'), data: Type.String({ description: 'Base64-encoded image bytes.' }), mimeType: Type.String() },
  { $id: 'MCPImageContent', additionalProperties: false },
);

/** An MCP `CallToolResult`: text as is, images as `{type: 'image', data, mimeType}`. */
export const MCPCallToolResultSchema = Type.Object(
  { content: Type.Array(Type.Union([MCPTextContentSchema, MCPImageContentSchema], { $id: 'MCPContent' })), isError: Type.Boolean() },
  { $id: 'MCPCallToolResult', additionalProperties: false, description: 'An MCP CallToolResult.' },
);
