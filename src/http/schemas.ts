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
    strict: Type.Optional(
      Type.Boolean({
        default: false,
        description:
          'For `openai` and `openai-responses`: schemas for OpenAI\'s strict mode (every property required, optional ones nullable, keywords strict mode refuses removed), with `strict: true`. A `null` for an optional property is taken as absent in every call.',
      }),
    ),
  },
  { additionalProperties: false },
);

/** `?format=` of a single call: the result in a provider's shape, for the call `id` the provider gave it. */
export const CallQuery = Type.Object(
  {
    format: Type.Optional(
      Type.Enum([...API_FORMATS], {
        description:
          'Answer in a provider\'s shape instead of a ToolResult: an Anthropic tool_result block, the Chat Completions tool messages, a Responses function_call_output item, or an MCP CallToolResult. A call the gateway refuses is then an error result (status 200) too.',
      }),
    ),
    id: Type.Optional(Type.String({ minLength: 1, maxLength: 256, description: 'The provider\'s id of the call (tool_use_id, tool_call_id, call_id); required with every format but mcp.' })),
  },
  { additionalProperties: false },
);

export const ToolNameParams = Type.Object({ name: Type.String({ description: 'The tool\'s name.' }) });

export const ErrorRef = Type.Ref('ErrorBody');
export const ToolResultRef = Type.Ref('ToolResult');
