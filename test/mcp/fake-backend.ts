// A stand-in for the gateway: a few tools, a scope per caller, and refusals shaped like the
// gateway's error bodies, so the MCP layer is tested without the core.
import type { ToolResult } from '#src/core/types.js';
import type { McpBackend, McpCallOptions, McpErrorBody, McpToolSource } from '#src/mcp/backend.js';

export interface FakeCaller {
  label: string;
  scope?: readonly string[];
}

export const ANYONE: FakeCaller = { label: 'anyone' };
export const ECHO_ONLY: FakeCaller = { label: 'echo-only', scope: ['Echo'] };

export const PNG = 'iVBORw0KGgo=';

export const TOOLS: readonly McpToolSource[] = [
  {
    name: 'Echo',
    description: 'Returns the text.',
    inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'], additionalProperties: false },
    annotations: { title: 'Echo', readOnlyHint: true },
  },
  {
    name: 'Pixel',
    description: 'Returns a caption and a one-pixel image.',
    inputSchema: { type: 'object', additionalProperties: false },
    title: 'One pixel',
    outputSchema: { type: 'object', properties: { width: { type: 'number' } } },
  },
  { name: 'Slow', description: 'Waits until aborted, reporting progress.', inputSchema: { type: 'object', properties: {} } },
];

const ECHO_TOOLS = TOOLS.filter((t) => t.name === 'Echo');

export function errorBody(code: string, message: string, details?: unknown): McpErrorBody {
  return { content: [{ type: 'text', text: message }], isError: true, error: details === undefined ? { code, message } : { code, message, details } };
}

export interface RecordedCall {
  caller: FakeCaller;
  name: string;
  args: Record<string, unknown>;
  options: McpCallOptions;
}

/** The fake, with every call it took; `handlers` replaces what a tool does. */
export function fakeBackend(
  handlers: Record<string, (args: Record<string, unknown>, options: McpCallOptions) => Promise<ToolResult | McpErrorBody>> = {},
  extra: Partial<Pick<McpBackend<FakeCaller>, 'rpcCodeOf' | 'instructions'>> = {},
): McpBackend<FakeCaller> & { calls: RecordedCall[] } {
  const calls: RecordedCall[] = [];
  return {
    calls,
    serverInfo: { name: 'toolport', version: '0.1.0' },
    ...extra,
    tools: (caller) => (caller.scope ? ECHO_TOOLS : TOOLS),
    async call(caller, name, args, options) {
      calls.push({ caller, name, args, options });
      if (caller.scope && !caller.scope.includes(name)) {
        return errorBody('FORBIDDEN', `API key "${caller.label}" may not use tool "${name}"; it may use Echo.`, { tool: name, available: ['Echo'] });
      }
      const handler = handlers[name];
      if (handler) return handler(args, options);
      switch (name) {
        case 'Echo':
          if (typeof args['text'] !== 'string') {
            return errorBody('INVALID_INPUT', 'Invalid input for tool "Echo":\n- $.text: is required', {
              violations: [{ path: '$.text', message: 'is required' }],
            });
          }
          return { content: [{ type: 'text', text: args['text'] }], isError: false };
        case 'Pixel':
          return {
            content: [
              { type: 'text', text: 'a pixel' },
              { type: 'image', source: { type: 'base64', media_type: 'image/png', data: PNG } },
            ],
            isError: false,
          };
        default:
          return errorBody('TOOL_NOT_FOUND', `No tool named "${name}". Available tools: Echo, Pixel, Slow.`, { tool: name });
      }
    },
  };
}
