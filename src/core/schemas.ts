import { Type } from 'typebox';
import { ERROR_CODES } from './errors.js';
import type { ObjectSchema } from './types.js';

// The contracts every adapter answers with, declared once: the TypeScript types (types.ts,
// errors.ts) derive from these with Static<>, and the HTTP adapter publishes them in OpenAPI.

// Every schema a client sees on its own carries an `$id`: the OpenAPI document publishes it as a
// component of that name (see src/http/openapi/components.ts), so generated clients get `TextBlock`, not
// `ToolResultContentItemAnyOf0`. Closed objects (`additionalProperties: false`) say what a
// response holds exactly; the pipeline copies results into these shapes key by key.

// A media type as RFC 6838 names it, without parameters: what a data: URL and the providers take.
const SUBTYPE = '[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}';
/** The pattern of an image block's media type: any `image/...` type. */
export const IMAGE_MEDIA_TYPE_PATTERN = `^image/${SUBTYPE}$`;
/** The pattern of an audio block's media type: any `audio/...` type. */
export const AUDIO_MEDIA_TYPE_PATTERN = `^audio/${SUBTYPE}$`;

/** MCP's hints about a content block: who it is for, how much it matters, when it last changed. */
export const ContentAnnotationsSchema = Type.Object(
  {
    audience: Type.Optional(Type.Array(Type.Enum(['user', 'assistant'], { type: 'string' }), { description: 'Who the block is for.' })),
    priority: Type.Optional(Type.Number({ minimum: 0, maximum: 1, description: 'How much the block matters: 1 most, 0 least.' })),
    lastModified: Type.Optional(Type.String({ description: 'When the content last changed, as an ISO 8601 timestamp.' })),
  },
  { $id: 'ContentAnnotations', additionalProperties: false, description: "MCP's annotations of a content block, kept as the tool gave them." },
);

const annotations = Type.Optional(ContentAnnotationsSchema);

/** Plain text for the model. */
export const TextBlockSchema = Type.Object(
  { type: Type.Literal('text'), text: Type.String(), annotations },
  { $id: 'TextBlock', additionalProperties: false, description: 'Plain text for the model.' },
);

/**
 * An image, in the Anthropic API's base64 source shape. Any `image/...` type is carried; the
 * Anthropic and OpenAI shapes show the model png, jpeg, gif and webp, and name the others.
 */
export const ImageBlockSchema = Type.Object(
  {
    type: Type.Literal('image'),
    source: Type.Object(
      {
        type: Type.Literal('base64'),
        media_type: Type.String({ pattern: IMAGE_MEDIA_TYPE_PATTERN, description: 'image/png, image/jpeg, image/gif, image/webp, or another image type.' }),
        data: Type.String({ description: 'Base64-encoded image bytes.' }),
      },
      { additionalProperties: false },
    ),
    annotations,
  },
  {
    $id: 'ImageBlock',
    additionalProperties: false,
    description: "An image, in the Anthropic API's base64 source shape; the providers' shapes show png, jpeg, gif and webp and name other types.",
  },
);

/** Audio, in the image block's shape. No provider's tool result takes it: their shapes name it instead. */
export const AudioBlockSchema = Type.Object(
  {
    type: Type.Literal('audio'),
    source: Type.Object(
      {
        type: Type.Literal('base64'),
        media_type: Type.String({ pattern: AUDIO_MEDIA_TYPE_PATTERN }),
        data: Type.String({ description: 'Base64-encoded audio bytes.' }),
      },
      { additionalProperties: false },
    ),
    annotations,
  },
  { $id: 'AudioBlock', additionalProperties: false, description: "Audio, in the image block's shape; MCP carries it, the model providers' shapes name it." },
);

const uri = Type.String({ description: "The resource's URI." });
const mimeType = Type.Optional(Type.String({ description: "The resource's media type." }));

/** An embedded resource's contents as text, as in MCP. */
export const TextResourceContentsSchema = Type.Object(
  { uri, mimeType, text: Type.String() },
  { $id: 'TextResourceContents', additionalProperties: false, description: "A resource's contents as text." },
);

/** An embedded resource's contents as bytes, as in MCP. */
export const BlobResourceContentsSchema = Type.Object(
  { uri, mimeType, blob: Type.String({ description: 'Base64-encoded bytes.' }) },
  { $id: 'BlobResourceContents', additionalProperties: false, description: "A resource's contents as bytes." },
);

/** A resource embedded in the result, in MCP's shape: its URI and its contents, text or bytes. */
export const ResourceBlockSchema = Type.Object(
  { type: Type.Literal('resource'), resource: Type.Union([TextResourceContentsSchema, BlobResourceContentsSchema]), annotations },
  { $id: 'ResourceBlock', additionalProperties: false, description: "A resource embedded in the result, in MCP's shape: its URI and its text or bytes." },
);

/** A resource the result names without its contents, in MCP's shape. */
export const ResourceLinkBlockSchema = Type.Object(
  {
    type: Type.Literal('resource_link'),
    uri,
    name: Type.String({ description: "The resource's name." }),
    title: Type.Optional(Type.String({ description: 'A name for people.' })),
    description: Type.Optional(Type.String()),
    mimeType,
    size: Type.Optional(Type.Integer({ minimum: 0, description: 'Its size in bytes.' })),
    annotations,
  },
  { $id: 'ResourceLinkBlock', additionalProperties: false, description: "A resource the result names without its contents, in MCP's shape." },
);

/**
 * A content block of a result: text and images in the shape the Anthropic API takes for
 * `tool_result` content, audio in the image's shape, resources and resource links in MCP's.
 */
export const ContentBlockSchema = Type.Union([TextBlockSchema, ImageBlockSchema, AudioBlockSchema, ResourceBlockSchema, ResourceLinkBlockSchema], {
  $id: 'ContentBlock',
  description: "A content block: text and images in the Anthropic API's tool_result shape, audio in the image's shape, resources and resource links in MCP's.",
});

/**
 * A result's machine-readable part, as MCP's `structuredContent`: a JSON object. A tool that
 * declares an `outputSchema` returns one matching it on every success.
 */
export const StructuredContentSchema = Type.Unsafe<Record<string, unknown>>(
  Type.Object(
    {},
    {
      additionalProperties: true,
      description: "The result as JSON, for programs: present when the tool returns it; it matches the tool's output schema when the tool has one.",
    },
  ),
);

/** A result as the pipeline returns it: normalised, `isError` always set. */
export const ToolResultSchema = Type.Object(
  {
    content: Type.Array(ContentBlockSchema),
    isError: Type.Boolean({ description: 'True when the call failed; the content says why, for the model.' }),
    structuredContent: Type.Optional(StructuredContentSchema),
  },
  { $id: 'ToolResult', additionalProperties: false, description: 'What the tool returned: content blocks, isError, and structuredContent when it has some.' },
);

/** The body of every refusal: a ToolResult with `isError: true`, plus a machine-readable error. */
export const ErrorBodySchema = Type.Object(
  {
    content: Type.Array(TextBlockSchema, { minItems: 1, maxItems: 1 }),
    isError: Type.Literal(true),
    error: Type.Object(
      {
        code: Type.Enum(ERROR_CODES, { $id: 'ErrorCode', type: 'string', description: 'The catalog code (src/core/errors.ts); each has one HTTP status.' }),
        message: Type.String(),
        details: Type.Optional(Type.Unknown()),
      },
      { additionalProperties: false },
    ),
  },
  {
    $id: 'ErrorBody',
    additionalProperties: false,
    description: 'Every error is itself a ToolResult with isError: true, so it can go to the model unchanged.',
  },
);

// The tool definitions `GET /tools` lists, in each provider's own shape (formats.ts makes them).

/**
 * A tool's input schema as published: a JSON Schema whose root is `type: "object"` and which
 * always carries `properties` (OpenAI refuses an object schema without them). Open: it holds any
 * JSON Schema keyword.
 */
export const InputSchemaSchema = Type.Unsafe<ObjectSchema & { properties: Record<string, unknown> }>(
  Type.Object(
    { type: Type.Literal('object'), properties: Type.Object({}, { additionalProperties: true, description: 'The JSON Schema of each property.' }) },
    { $id: 'InputSchema', additionalProperties: true, description: "The tool's input, as a JSON Schema whose root is an object." },
  ),
);

const name = Type.String({ description: "The tool's name, which a call names." });
const description = Type.String({ description: 'What the tool does, written for a model.' });

/** A tool in the Anthropic Messages API's `tools` shape. */
export const AnthropicToolSchema = Type.Object(
  { name, description, input_schema: InputSchemaSchema },
  { $id: 'AnthropicTool', additionalProperties: false, description: "A tool in the Anthropic Messages API's shape." },
);

/** A function tool of OpenAI's Chat Completions API: nested under `function`. */
export const OpenAIToolSchema = Type.Object(
  {
    type: Type.Literal('function'),
    function: Type.Object(
      {
        name,
        description,
        parameters: InputSchemaSchema,
        strict: Type.Optional(Type.Boolean({ description: 'Present (true) for a strict-mode list (?strict=true).' })),
      },
      { $id: 'OpenAIFunction', additionalProperties: false },
    ),
  },
  { $id: 'OpenAITool', additionalProperties: false, description: "A function tool of OpenAI's Chat Completions API." },
);

/** A function tool of OpenAI's Responses API: flat, and `strict` said outright (the API's default is true). */
export const OpenAIResponsesToolSchema = Type.Object(
  { type: Type.Literal('function'), name, description, parameters: InputSchemaSchema, strict: Type.Boolean() },
  { $id: 'OpenAIResponsesTool', additionalProperties: false, description: "A function tool of OpenAI's Responses API: flat, with strict said outright." },
);

/** Hints about a tool's behaviour, as in MCP. Open: MCP may add hints. */
export const ToolAnnotationsSchema = Type.Object(
  {
    title: Type.Optional(Type.String()),
    readOnlyHint: Type.Optional(Type.Boolean()),
    destructiveHint: Type.Optional(Type.Boolean()),
    idempotentHint: Type.Optional(Type.Boolean()),
    openWorldHint: Type.Optional(Type.Boolean()),
  },
  { $id: 'ToolAnnotations', description: "Hints about the tool's behaviour, as in MCP." },
);

/** A tool's output schema as published: the JSON Schema of its `structuredContent`, whose root is an object. */
export const OutputSchemaSchema = Type.Unsafe<ObjectSchema>(
  Type.Object(
    { type: Type.Literal('object') },
    { $id: 'OutputSchema', additionalProperties: true, description: "The tool's structuredContent, as a JSON Schema whose root is an object." },
  ),
);

/** A tool in MCP's `tools/list` shape. */
export const MCPToolSchema = Type.Object(
  {
    name,
    title: Type.Optional(Type.String()),
    description,
    inputSchema: InputSchemaSchema,
    outputSchema: Type.Optional(OutputSchemaSchema),
    annotations: Type.Optional(ToolAnnotationsSchema),
  },
  { $id: 'MCPTool', additionalProperties: false, description: "A tool in MCP's tools/list shape." },
);

/** The lists, one per format; MCP's is the `tools/list` result object. */
export const AnthropicToolListSchema = Type.Array(AnthropicToolSchema, { $id: 'AnthropicToolList' });
export const OpenAIToolListSchema = Type.Array(OpenAIToolSchema, { $id: 'OpenAIToolList' });
export const OpenAIResponsesToolListSchema = Type.Array(OpenAIResponsesToolSchema, { $id: 'OpenAIResponsesToolList' });
export const MCPToolListSchema = Type.Object(
  { tools: Type.Array(MCPToolSchema) },
  { $id: 'MCPToolList', additionalProperties: false, description: "The result of MCP's tools/list." },
);
