import { Type } from 'typebox';
import { API_FORMATS } from '../core/formats.js';

// The response contracts are declared once, in the core; this adapter publishes them.
export { ErrorBodySchema, ToolResultSchema } from '../core/schemas.js';

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
