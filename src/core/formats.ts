import type { ObjectSchema, ToolAnnotations, ToolDef } from './types.js';

/** The formats `ToolRegistry.toAPI` can produce. */
export const API_FORMATS = ['anthropic', 'openai', 'mcp'] as const;
export type APIFormat = (typeof API_FORMATS)[number];

export interface AnthropicTool {
  name: string;
  description: string;
  input_schema: ObjectSchema & { properties: Record<string, unknown> };
}

export interface OpenAITool {
  type: 'function';
  function: { name: string; description: string; parameters: ObjectSchema & { properties: Record<string, unknown> } };
}

export interface MCPTool {
  name: string;
  description: string;
  inputSchema: ObjectSchema & { properties: Record<string, unknown> };
  annotations?: ToolAnnotations;
}

export interface APIShapes {
  anthropic: AnthropicTool[];
  openai: OpenAITool[];
  mcp: { tools: MCPTool[] };
}

export function isAPIFormat(value: unknown): value is APIFormat {
  return typeof value === 'string' && (API_FORMATS as readonly string[]).includes(value);
}

/** OpenAI rejects an object schema without `properties`, so every published schema carries one. */
function publishedSchema(schema: ObjectSchema): ObjectSchema & { properties: Record<string, unknown> } {
  return { ...schema, properties: schema.properties ?? {} };
}

export function formatTools<F extends APIFormat>(tools: readonly ToolDef[], format: F): APIShapes[F];
export function formatTools(tools: readonly ToolDef[], format: APIFormat): APIShapes[APIFormat] {
  switch (format) {
    case 'anthropic':
      return tools.map((t) => ({ name: t.name, description: t.description, input_schema: publishedSchema(t.inputSchema) }));
    case 'openai':
      return tools.map((t) => ({
        type: 'function' as const,
        function: { name: t.name, description: t.description, parameters: publishedSchema(t.inputSchema) },
      }));
    case 'mcp':
      return {
        tools: tools.map((t) => ({
          name: t.name,
          description: t.description,
          inputSchema: publishedSchema(t.inputSchema),
          ...(t.annotations ? { annotations: t.annotations } : {}),
        })),
      };
  }
}
