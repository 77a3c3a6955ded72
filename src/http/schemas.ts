import { Type } from 'typebox';
import { API_FORMATS } from '../core/formats.js';
import { ErrorCodes } from '../core/errors.js';

// Response shapes, declared once: they document the API and type the handlers.

const TextBlock = Type.Object({ type: Type.Literal('text'), text: Type.String() });
const ImageBlock = Type.Object({
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

export const ToolResultSchema = Type.Object(
  {
    content: Type.Array(Type.Union([TextBlock, ImageBlock])),
    isError: Type.Boolean({ description: 'True when the call failed; the content says why, for the model.' }),
  },
  { $id: 'ToolResult', description: 'What the tool returned, in the Anthropic API\'s tool_result content shape.' },
);

export const ErrorBodySchema = Type.Object(
  {
    content: Type.Array(TextBlock, { minItems: 1, maxItems: 1 }),
    isError: Type.Literal(true),
    error: Type.Object({
      code: Type.Enum(Object.keys(ErrorCodes)),
      message: Type.String(),
      details: Type.Optional(Type.Unknown()),
    }),
  },
  {
    $id: 'ErrorBody',
    description: 'Every error is itself a ToolResult with isError: true, so it can go to the model unchanged.',
  },
);

export const FormatQuery = Type.Object(
  {
    format: Type.Optional(
      Type.Enum([...API_FORMATS], {
        default: 'anthropic',
        description: 'Which provider\'s tool format to return.',
      }),
    ),
  },
  { additionalProperties: false },
);

export const ToolNameParams = Type.Object({ name: Type.String({ description: 'The tool\'s name.' }) });

export const ErrorRef = Type.Ref('ErrorBody');
export const ToolResultRef = Type.Ref('ToolResult');
