import { Type } from 'typebox';
import { ContentAnnotationsSchema, ResourceBlockSchema, ResourceLinkBlockSchema, StructuredContentSchema } from '../core/schemas.js';

// The providers' wire shapes of tool results, declared once: results.ts derives its types from
// these with Static<>, and the OpenAPI document publishes them as named components. They are
// structural, so the package needs none of the providers' SDKs; test/providers/sdk-shapes.test.ts
// checks them against the SDKs' own types at compile time.

const AnthropicTextBlockSchema = Type.Object({ type: Type.Literal('text'), text: Type.String() }, { $id: 'AnthropicTextBlock', additionalProperties: false });

/** The image types the Anthropic and OpenAI APIs take; the renderings name an image of another type in text. */
export const PROVIDER_IMAGE_TYPES = ['image/png', 'image/jpeg', 'image/gif', 'image/webp'] as const;

const AnthropicImageBlockSchema = Type.Object(
  {
    type: Type.Literal('image'),
    source: Type.Object(
      {
        type: Type.Literal('base64'),
        media_type: Type.Enum(PROVIDER_IMAGE_TYPES, { type: 'string' }),
        data: Type.String({ description: 'Base64-encoded image bytes.' }),
      },
      { additionalProperties: false },
    ),
  },
  { $id: 'AnthropicImageBlock', additionalProperties: false },
);

/** An Anthropic Messages API `tool_result` block: exactly the keys the API takes. */
export const AnthropicToolResultBlockSchema = Type.Object(
  {
    type: Type.Literal('tool_result'),
    tool_use_id: Type.String(),
    content: Type.Array(Type.Union([AnthropicTextBlockSchema, AnthropicImageBlockSchema], { $id: 'AnthropicToolResultContent' }), {
      description: 'Text and images; every other block of the result as text that names it.',
    }),
    is_error: Type.Boolean(),
  },
  { $id: 'AnthropicToolResultBlock', additionalProperties: false, description: 'An Anthropic tool_result block: exactly the keys the API takes.' },
);

/** The user message that answers an Anthropic assistant turn's `tool_use` blocks. */
export const AnthropicToolResultMessageSchema = Type.Object(
  { role: Type.Literal('user'), content: Type.Array(AnthropicToolResultBlockSchema) },
  {
    $id: 'AnthropicToolResultMessage',
    additionalProperties: false,
    description: 'The next user message of an Anthropic conversation: one tool_result per call, in order.',
  },
);

/** A Chat Completions `role: "tool"` message: text only, as the API takes for tool messages. */
export const OpenAIToolMessageSchema = Type.Object(
  { role: Type.Literal('tool'), tool_call_id: Type.String(), content: Type.String() },
  { $id: 'OpenAIToolMessage', additionalProperties: false, description: 'A Chat Completions tool message: text only, as the API takes it.' },
);

const OpenAITextPartSchema = Type.Object({ type: Type.Literal('text'), text: Type.String() }, { $id: 'OpenAITextPart', additionalProperties: false });
const OpenAIImagePartSchema = Type.Object(
  { type: Type.Literal('image_url'), image_url: Type.Object({ url: Type.String({ description: 'A data: URL.' }) }, { additionalProperties: false }) },
  { $id: 'OpenAIImagePart', additionalProperties: false },
);

/** A Chat Completions user message carrying the images tool results held (tool messages cannot). */
export const OpenAIImageMessageSchema = Type.Object(
  { role: Type.Literal('user'), content: Type.Array(Type.Union([OpenAITextPartSchema, OpenAIImagePartSchema], { $id: 'OpenAIUserContentPart' })) },
  {
    $id: 'OpenAIImageMessage',
    additionalProperties: false,
    description: 'A Chat Completions user message carrying the images of tool results (tool messages take text only).',
  },
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
  {
    $id: 'OpenAIFunctionCallOutput',
    additionalProperties: false,
    description: 'A Responses function_call_output item: text, or input parts when the result holds images.',
  },
);

/** The Responses API items that answer `function_call` items. */
export const OpenAIFunctionCallOutputsSchema = Type.Array(OpenAIFunctionCallOutputSchema, {
  $id: 'OpenAIFunctionCallOutputs',
  description: 'One function_call_output item per call, in order.',
});

// MCP's content blocks. Its embedded resources and resource links are the core's own blocks.
const annotations = Type.Optional(ContentAnnotationsSchema);
const MCPTextContentSchema = Type.Object(
  { type: Type.Literal('text'), text: Type.String(), annotations },
  { $id: 'MCPTextContent', additionalProperties: false },
);
const MCPImageContentSchema = Type.Object(
  { type: Type.Literal('image'), data: Type.String({ description: 'Base64-encoded image bytes.' }), mimeType: Type.String(), annotations },
  { $id: 'MCPImageContent', additionalProperties: false },
);
const MCPAudioContentSchema = Type.Object(
  { type: Type.Literal('audio'), data: Type.String({ description: 'Base64-encoded audio bytes.' }), mimeType: Type.String(), annotations },
  { $id: 'MCPAudioContent', additionalProperties: false },
);

/** An MCP `CallToolResult`: text, images and audio as `{type, data, mimeType}`, resources and resource links, and the structured content when there is some. */
export const MCPCallToolResultSchema = Type.Object(
  {
    content: Type.Array(
      Type.Union([MCPTextContentSchema, MCPImageContentSchema, MCPAudioContentSchema, ResourceBlockSchema, ResourceLinkBlockSchema], { $id: 'MCPContent' }),
    ),
    isError: Type.Boolean(),
    structuredContent: Type.Optional(StructuredContentSchema),
  },
  { $id: 'MCPCallToolResult', additionalProperties: false, description: 'An MCP CallToolResult.' },
);

// The assistant turns POST /calls takes, as the providers return them: for the OpenAPI document
// and generated clients. readTurn reads them (and says what is wrong with a body that is none of
// them), so these stay open: blocks and keys the providers add are allowed and ignored.

const AnthropicToolUseBlockSchema = Type.Object(
  { type: Type.Literal('tool_use'), id: Type.String(), name: Type.String(), input: Type.Object({}, { additionalProperties: true }) },
  { $id: 'AnthropicToolUseBlock', description: 'A tool_use block of an assistant message.' },
);

/** An Anthropic assistant message's content: `tool_use` blocks among others (text, thinking), which are ignored. */
export const AnthropicAssistantContentSchema = Type.Array(
  Type.Union([
    AnthropicToolUseBlockSchema,
    Type.Object({ type: Type.String() }, { $id: 'AnthropicOtherBlock', description: 'Any other block (text, thinking, ...): ignored.' }),
  ]),
  { $id: 'AnthropicAssistantContent', description: 'The content array of an Anthropic assistant message.' },
);

/** An Anthropic assistant message, or the whole Messages API response. */
export const AnthropicAssistantMessageSchema = Type.Object(
  { role: Type.Literal('assistant'), content: AnthropicAssistantContentSchema },
  { $id: 'AnthropicAssistantMessage', description: 'An Anthropic assistant message, or the Messages API response whose content it is.' },
);

const OpenAIToolCallSchema = Type.Object(
  {
    id: Type.String(),
    type: Type.Literal('function'),
    function: Type.Object({ name: Type.String(), arguments: Type.String({ description: 'The arguments as JSON text, as the model wrote them.' }) }),
  },
  { $id: 'OpenAIToolCall', description: 'A Chat Completions tool call.' },
);

/** A Chat Completions assistant message's `tool_calls`. */
export const OpenAIToolCallsSchema = Type.Array(OpenAIToolCallSchema, {
  $id: 'OpenAIToolCalls',
  description: 'The tool_calls of a Chat Completions assistant message.',
});

/** A Chat Completions assistant message. */
export const OpenAIAssistantMessageSchema = Type.Object(
  { role: Type.Literal('assistant'), tool_calls: OpenAIToolCallsSchema },
  { $id: 'OpenAIAssistantMessage', description: 'A Chat Completions assistant message (choices[0].message).' },
);

const OpenAIFunctionCallSchema = Type.Object(
  { type: Type.Literal('function_call'), call_id: Type.String(), name: Type.String(), arguments: Type.String({ description: 'The arguments as JSON text.' }) },
  { $id: 'OpenAIFunctionCall', description: 'A Responses API function_call item.' },
);

/** A Responses API response's `output` items: `function_call` items among others (messages, reasoning), which are ignored. */
export const OpenAIResponseOutputSchema = Type.Array(
  Type.Union([
    OpenAIFunctionCallSchema,
    Type.Object({ type: Type.String() }, { $id: 'OpenAIOtherOutputItem', description: 'Any other output item (message, reasoning, ...): ignored.' }),
  ]),
  { $id: 'OpenAIResponseOutput', description: 'The output items of a Responses API response.' },
);

/** A Responses API response. */
export const OpenAIResponseSchema = Type.Object({ output: OpenAIResponseOutputSchema }, { $id: 'OpenAIResponse', description: 'A Responses API response.' });

/** What POST /calls takes: an assistant turn of any of the three dialects, whole or as its list of calls. */
export const AssistantTurnSchema = Type.Union(
  [
    AnthropicAssistantMessageSchema,
    AnthropicAssistantContentSchema,
    OpenAIAssistantMessageSchema,
    OpenAIToolCallsSchema,
    OpenAIResponseSchema,
    OpenAIResponseOutputSchema,
  ],
  {
    $id: 'AssistantTurn',
    description:
      "An assistant's turn exactly as the provider returned it: an Anthropic message (or its content), a Chat Completions assistant message (or its tool_calls), or a Responses API response (or its output).",
  },
);
