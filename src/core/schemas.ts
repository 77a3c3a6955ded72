import { Type } from 'typebox';
import { ERROR_CODES } from './errors.js';

// The contracts every adapter answers with, declared once: the TypeScript types (types.ts,
// errors.ts) derive from these with Static<>, and the HTTP adapter publishes them in OpenAPI.

/** Plain text for the model. */
export const TextBlockSchema = Type.Object({ type: Type.Literal('text'), text: Type.String() });

/** An image for the model, in the Anthropic API's base64 source shape. */
export const ImageBlockSchema = Type.Object({
  type: Type.Literal('image'),
  source: Type.Object({
    type: Type.Literal('base64'),
    media_type: Type.Union([
      Type.Literal('image/png'),
      Type.Literal('image/jpeg'),
      Type.Literal('image/gif'),
      Type.Literal('image/webp'),
    ]),
    data: Type.String({ description: 'Base64-encoded image bytes.' }),
  }),
});

/** A content block, in the shape the Anthropic API takes for `tool_result` content. */
export const ContentBlockSchema = Type.Union([TextBlockSchema, ImageBlockSchema]);

/** A result as the pipeline returns it: normalised, `isError` always set. */
export const ToolResultSchema = Type.Object(
  {
    content: Type.Array(ContentBlockSchema),
    isError: Type.Boolean({ description: 'True when the call failed; the content says why, for the model.' }),
  },
  { $id: 'ToolResult', description: 'What the tool returned, in the Anthropic API\'s tool_result content shape.' },
);

/** The body of every refusal: a ToolResult with `isError: true`, plus a machine-readable error. */
export const ErrorBodySchema = Type.Object(
  {
    content: Type.Array(TextBlockSchema, { minItems: 1, maxItems: 1 }),
    isError: Type.Literal(true),
    error: Type.Object({
      code: Type.Enum(ERROR_CODES),
      message: Type.String(),
      details: Type.Optional(Type.Unknown()),
    }),
  },
  {
    $id: 'ErrorBody',
    description: 'Every error is itself a ToolResult with isError: true, so it can go to the model unchanged.',
  },
);
