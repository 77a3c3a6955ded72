import { Type } from 'typebox';
import { API_FORMATS } from '../../core/formats.js';
import {
  AnthropicToolListSchema,
  ErrorBodySchema,
  MCPToolListSchema,
  OpenAIResponsesToolListSchema,
  OpenAIToolListSchema,
  ToolResultSchema,
} from '../../core/schemas.js';
import {
  AnthropicToolResultMessageSchema,
  AssistantTurnSchema,
  MCPCallToolResultSchema,
  OpenAIChatMessagesSchema,
  OpenAIFunctionCallOutputsSchema,
} from '../../providers/shapes.js';

/** What the probes answer when all is well. */
export const HealthStatusSchema = Type.Object(
  {
    status: Type.String({ description: '`ok` (the process is up) or `ready` (ready to take tool calls).' }),
    tasks: Type.Optional(
      Type.Object({ running: Type.Integer({ description: "Bash's background tasks running now, of every caller." }) }, { additionalProperties: false }),
    ),
    callTasks: Type.Optional(
      Type.Object(
        { working: Type.Integer({ description: 'Tool calls run as tasks (`Prefer: respond-async`, MCP tasks) working now, of every caller.' }) },
        { additionalProperties: false },
      ),
    ),
    upstreams: Type.Optional(
      Type.Record(
        Type.String(),
        Type.Object(
          {
            state: Type.Enum(['idle', 'starting', 'ready', 'down', 'stopped'], {
              type: 'string',
              description: '`idle`: not started yet (started on first use); `down`: being restarted.',
            }),
            transport: Type.Enum(['stdio', 'http'], { type: 'string' }),
            tools: Type.Integer({ description: 'Its tools served now.' }),
            held: Type.Integer({ description: 'Tools it lists that are not served: changed or new under the lock file, or refused by a rule.' }),
            restarts: Type.Integer(),
            reason: Type.Optional(Type.String({ description: 'Why it is not ready.' })),
          },
          { additionalProperties: false },
        ),
        {
          description:
            '`/readyz` only, with upstream MCP servers configured: the state of each. The server stays ready while some are down; their calls answer errors that say so.',
        },
      ),
    ),
  },
  { $id: 'HealthStatus', additionalProperties: false },
);

/** A task (a call run detached from its request) as REST answers it: `POST /tools/{name}` with `Prefer: respond-async`, and `/tasks/{id}`. */
export const TaskAnswerSchema = Type.Object(
  {
    id: Type.String({ description: 'The task id: unguessable, and known only to the caller (API key) that started it.' }),
    tool: Type.String({ description: 'The tool called.' }),
    status: Type.Enum(['working', 'completed', 'failed', 'cancelled'], {
      type: 'string',
      description:
        '`working` until the call answers; `completed`: the tool answered (`result`, `isError` or not); `failed`: the call was refused or lost after it was accepted (`error`); `cancelled`: the caller cancelled it. The last three are final.',
    }),
    createdAt: Type.String({ format: 'date-time' }),
    lastUpdatedAt: Type.String({ format: 'date-time', description: 'When the status or the progress last changed.' }),
    ttlMs: Type.Integer({ description: 'How long a finished task is kept, from its end, before it is forgotten (then 404 TASK_NOT_FOUND).' }),
    pollIntervalMs: Type.Integer({ description: 'How often to ask about a working task.' }),
    progress: Type.Optional(
      Type.Object(
        { progress: Type.Number(), total: Type.Optional(Type.Number()), message: Type.Optional(Type.String()) },
        { additionalProperties: false, description: 'The last progress the tool reported, while it works.' },
      ),
    ),
    result: Type.Optional(Type.Ref('ToolResult')),
    error: Type.Optional(Type.Ref('ErrorBody')),
  },
  { $id: 'Task', additionalProperties: false },
);

/** A caller's tasks, oldest first (`GET /tasks`). */
export const TaskListSchema = Type.Object(
  { tasks: Type.Array(Type.Ref('Task'), { description: "The caller's tasks, working and kept, oldest first; results left out (ask `/tasks/{id}`)." }) },
  { $id: 'TaskList', additionalProperties: false },
);

// The response contracts are declared once, in the core and the providers; this adapter publishes
// them. Each of these, and each named schema inside them, becomes a component of the document.
export const PUBLISHED_SCHEMAS = [
  HealthStatusSchema,
  ToolResultSchema,
  ErrorBodySchema,
  AnthropicToolListSchema,
  OpenAIToolListSchema,
  OpenAIResponsesToolListSchema,
  MCPToolListSchema,
  AnthropicToolResultMessageSchema,
  OpenAIChatMessagesSchema,
  OpenAIFunctionCallOutputsSchema,
  MCPCallToolResultSchema,
  AssistantTurnSchema,
  TaskAnswerSchema,
  TaskListSchema,
];

export const FormatQuery = Type.Object(
  {
    format: Type.Optional(
      Type.Enum([...API_FORMATS], {
        type: 'string',
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
        type: 'string',
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

// Answers whose shape the query chooses. anyOf, not oneOf: the shapes overlap (an empty list is
// every format's list; a text-only MCP result is also a ToolResult), and oneOf would then refuse
// the very answers the server gives.

/** `GET /tools`: the list in the shape `format` names. */
export const ToolListAnswer = {
  description: 'The tools the caller may use, in the shape `format` names: an array of AnthropicTool (the default), OpenAITool or OpenAIResponsesTool, or MCP\'s `{tools: [MCPTool]}`.',
  anyOf: [Type.Ref('AnthropicToolList'), Type.Ref('OpenAIToolList'), Type.Ref('OpenAIResponsesToolList'), Type.Ref('MCPToolList')],
};

/** `GET /tools/{name}`: one tool in the shape `format` names. */
export const ToolDefinitionAnswer = {
  description: 'The tool, in the shape `format` names: AnthropicTool (the default), OpenAITool, OpenAIResponsesTool or MCPTool.',
  oneOf: [Type.Ref('AnthropicTool'), Type.Ref('OpenAITool'), Type.Ref('OpenAIResponsesTool'), Type.Ref('MCPTool')],
};

/** `POST /tools/{name}`: a ToolResult, or with `?format=` the result in that provider's shape. */
export const CallAnswer = {
  description:
    'The tool ran. `isError` is true when it failed, threw, timed out or returned garbage. Without `format`, a ToolResult; with it, an AnthropicToolResultBlock, the OpenAIToolMessages, an OpenAIFunctionCallOutput or an MCPCallToolResult, and a refusal of the call is such an error result too.',
  anyOf: [ToolResultRef, Type.Ref('AnthropicToolResultBlock'), Type.Ref('OpenAIToolMessages'), Type.Ref('OpenAIFunctionCallOutput'), Type.Ref('MCPCallToolResult')],
};

/** `POST /calls`: the next turn, in the dialect of the turn given. */
export const TurnAnswer = {
  description:
    'The results, in the provider\'s shape and the order of the calls: an AnthropicToolResultMessage, the OpenAIToolMessages, or the OpenAIFunctionCallOutputs. A call that failed or was refused is an error result.',
  anyOf: [Type.Ref('AnthropicToolResultMessage'), Type.Ref('OpenAIToolMessages'), Type.Ref('OpenAIFunctionCallOutputs')],
};

/** The refusals every route but the probes may answer, with what each means. */
export const REFUSALS = {
  401: { ...ErrorRef, description: 'API keys are configured and the request has no valid `Authorization: Bearer` key (UNAUTHORIZED); `WWW-Authenticate` says so.' },
  403: { ...ErrorRef, description: 'The Host and Origin guard refused the request: a Host or web Origin that is neither local nor allowed (FORBIDDEN).' },
  429: { ...ErrorRef, description: 'Over the rate limit (RATE_LIMITED); Retry-After says when to retry.' },
  500: { ...ErrorRef, description: 'An unexpected failure of the service itself (INTERNAL_ERROR); no internals are included.' },
  503: { ...ErrorRef, description: 'Shutting down (SHUTTING_DOWN) or overloaded (OVERLOADED); Retry-After says when to retry.' },
};

/** A bad query: an unknown parameter, or a value out of its range (INVALID_QUERY). */
export const BAD_QUERY = { ...ErrorRef, description: 'A query parameter is unknown or its value is not allowed (INVALID_QUERY).' };
