import type { Static } from 'typebox';
import type { AnthropicToolSchema, InputSchemaSchema, MCPToolListSchema, MCPToolSchema, OpenAIResponsesToolSchema, OpenAIToolSchema } from './schemas.js';
import type { ObjectSchema, ToolDef } from './types.js';
import { isRecord } from './json.js';

/** The formats `ToolRegistry.toAPI` can produce. */
export const API_FORMATS = ['anthropic', 'openai', 'openai-responses', 'mcp'] as const;
export type APIFormat = (typeof API_FORMATS)[number];

/** The formats with a strict-mode variant: OpenAI's function tools (Chat Completions and Responses). */
export const STRICT_FORMATS = ['openai', 'openai-responses'] as const satisfies readonly APIFormat[];

/** How a list is published: a format, and for OpenAI's, whether its schemas follow strict mode. */
export interface ListOptions {
  strict?: boolean;
}

// The shapes are declared once, as the schemas the OpenAPI document publishes (core/schemas.ts).
type PublishedSchema = Static<typeof InputSchemaSchema>;

/** A tool in the Anthropic Messages API's `tools` shape. */
export type AnthropicTool = Static<typeof AnthropicToolSchema>;

/** A function tool of OpenAI's Chat Completions API. */
export type OpenAITool = Static<typeof OpenAIToolSchema>;

/** A function tool of OpenAI's Responses API: flat, and `strict` said outright (the API's default is true). */
export type OpenAIResponsesTool = Static<typeof OpenAIResponsesToolSchema>;

/** A tool in MCP's `tools/list` shape. */
export type MCPTool = Static<typeof MCPToolSchema>;

export interface APIShapes {
  anthropic: AnthropicTool[];
  openai: OpenAITool[];
  'openai-responses': OpenAIResponsesTool[];
  mcp: Static<typeof MCPToolListSchema>;
}

export function isAPIFormat(value: unknown): value is APIFormat {
  return typeof value === 'string' && (API_FORMATS as readonly string[]).includes(value);
}

export function hasStrictMode(format: APIFormat): format is (typeof STRICT_FORMATS)[number] {
  return (STRICT_FORMATS as readonly string[]).includes(format);
}

export function formatTools<F extends APIFormat>(tools: readonly ToolDef[], format: F, options?: ListOptions): APIShapes[F];
export function formatTools(tools: readonly ToolDef[], format: APIFormat, { strict = false }: ListOptions = {}): APIShapes[APIFormat] {
  if (strict && !hasStrictMode(format)) throw new RangeError(`strict mode applies to ${STRICT_FORMATS.join(' and ')}, not ${format}`);
  const schema = (t: ToolDef): PublishedSchema => (strict ? strictSchema(t.inputSchema) : publishedSchema(t.inputSchema));
  switch (format) {
    case 'anthropic':
      return tools.map((t) => ({ name: t.name, description: t.description, input_schema: schema(t) }));
    // A tool whose schema strict mode cannot express is listed as it is, with strict: false.
    case 'openai':
      return tools.map((t) => {
        const ok = strict && strictProblem(t.inputSchema) === undefined;
        const parameters = ok ? strictSchema(t.inputSchema) : publishedSchema(t.inputSchema);
        return { type: 'function' as const, function: { name: t.name, description: t.description, parameters, ...(strict ? { strict: ok } : {}) } };
      });
    case 'openai-responses':
      return tools.map((t) => {
        const ok = strict && strictProblem(t.inputSchema) === undefined;
        const parameters = ok ? strictSchema(t.inputSchema) : publishedSchema(t.inputSchema);
        return { type: 'function' as const, name: t.name, description: t.description, parameters, strict: ok };
      });
    case 'mcp':
      return {
        tools: tools.map((t) => ({
          name: t.name,
          ...(t.annotations?.title !== undefined ? { title: t.annotations.title } : {}),
          description: t.description,
          inputSchema: schema(t),
          // The schema of the tool's structuredContent, as MCP's tools/list carries it.
          ...(t.outputSchema ? { outputSchema: t.outputSchema } : {}),
          ...(t.annotations ? { annotations: t.annotations } : {}),
        })),
      };
  }
}

/**
 * A tool's schema as published: OpenAI rejects an object schema without `properties`, so every
 * one carries them; and every `enum` carries its `type`, which some consumers (OpenAPI tool
 * servers, older converters) need to keep the values.
 */
export function publishedSchema(schema: ObjectSchema): PublishedSchema {
  const published = withEnumTypes(schema) as ObjectSchema;
  return { ...published, properties: published.properties ?? {} };
}

// Keywords whose value is data, not schemas; and keywords whose value maps names to schemas.
const LITERAL_KEYWORDS = new Set(['enum', 'const', 'default', 'examples', 'required']);
const SCHEMA_MAP_KEYWORDS = new Set(['properties', 'patternProperties', '$defs', 'definitions', 'dependentSchemas']);

/** A copy of `node` in which every schema with an `enum` and no `type` has the type of its values. */
function withEnumTypes(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(withEnumTypes);
  if (typeof node !== 'object' || node === null) return node;
  const copy: Record<string, unknown> = {};
  for (const [keyword, value] of Object.entries(node)) {
    if (LITERAL_KEYWORDS.has(keyword)) copy[keyword] = value;
    else if (SCHEMA_MAP_KEYWORDS.has(keyword) && isRecord(value))
      copy[keyword] = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, withEnumTypes(v)]));
    else copy[keyword] = withEnumTypes(value);
  }
  if (Array.isArray(copy.enum) && copy.type === undefined) {
    const types = [...new Set(copy.enum.map(jsonType))];
    copy.type = types.length === 1 ? types[0] : types;
  }
  return copy;
}

function jsonType(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  return typeof value;
}

// The keywords OpenAI's strict mode documents as supported; every other one is removed. The
// server still validates calls against the tool's own schema, so removing a keyword loosens only
// what the model is held to, never what a call must satisfy.
const STRICT_KEYWORDS = new Set([
  'type',
  'properties',
  'required',
  'additionalProperties',
  'items',
  'enum',
  'const',
  'anyOf',
  'description',
  'title',
  '$ref',
  '$defs',
  'definitions',
  'pattern',
  'format',
  'minimum',
  'maximum',
  'exclusiveMinimum',
  'exclusiveMaximum',
  'multipleOf',
  'minItems',
  'maxItems',
]);
const STRICT_FORMAT_NAMES = new Set(['date-time', 'time', 'date', 'duration', 'email', 'hostname', 'ipv4', 'ipv6', 'uuid']);

// What strict mode cannot express: removing these would change what the model may send (the
// server would then refuse calls the published schema allows), so such a tool is not strict.
const NOT_STRICT = [
  'allOf',
  'not',
  'if',
  'then',
  'else',
  'patternProperties',
  'dependentSchemas',
  'dependentRequired',
  'prefixItems',
  '$dynamicRef',
  'unevaluatedProperties',
  'unevaluatedItems',
];

/**
 * Why strict mode cannot express a schema, or undefined when it can: a keyword that constrains
 * in a way strict mode lacks, a map (`additionalProperties` given a schema), a tuple, or a node
 * that says nothing of its type (strict mode wants a type on every property).
 */
export function strictProblem(schema: ObjectSchema): string | undefined {
  const walk = (node: unknown, path: string, depth: number): string | undefined => {
    if (depth > 64) return `${path}: nested too deeply`;
    if (!isRecord(node)) return node === true ? `${path}: takes anything` : undefined;
    const found = NOT_STRICT.find((keyword) => keyword in node);
    if (found !== undefined) return `${path}: ${found}`;
    if (isRecord(node.additionalProperties)) return `${path}: additionalProperties with a schema`;
    if (Array.isArray(node.items)) return `${path}: tuple items`;
    const typed =
      node.type !== undefined ||
      node.$ref !== undefined ||
      node.anyOf !== undefined ||
      node.oneOf !== undefined ||
      node.enum !== undefined ||
      node.const !== undefined;
    if (!typed) return `${path}: no type`;
    for (const [name, sub] of Object.entries(isRecord(node.properties) ? node.properties : {})) {
      const problem = walk(sub, `${path}.${name}`, depth + 1);
      if (problem !== undefined) return problem;
    }
    for (const defs of ['$defs', 'definitions'] as const) {
      for (const [name, sub] of Object.entries(isRecord(node[defs]) ? node[defs] : {})) {
        const problem = walk(sub, `${path}.${defs}.${name}`, depth + 1);
        if (problem !== undefined) return problem;
      }
    }
    if (node.items !== undefined) return walk(node.items, `${path}[]`, depth + 1);
    for (const members of [node.anyOf, node.oneOf]) {
      if (!Array.isArray(members)) continue;
      for (const [i, member] of members.entries()) {
        const problem = walk(member, `${path}|${i}`, depth + 1);
        if (problem !== undefined) return problem;
      }
    }
    return undefined;
  };
  return walk(schema, '$', 0);
}

/**
 * A schema OpenAI accepts with `strict: true`: every object lists all its properties in
 * `required` and forbids others, an optional property becomes nullable (a `null` sent for it is
 * taken as absent, see `dropNullOptionals`), and keywords strict mode refuses are removed.
 */
export function strictSchema(schema: ObjectSchema): PublishedSchema {
  return strictNode(withEnumTypes(schema), false) as PublishedSchema;
}

function strictNode(node: unknown, nullable: boolean): unknown {
  if (typeof node !== 'object' || node === null || Array.isArray(node)) return node;
  const source = node as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const [keyword, value] of Object.entries(source)) {
    // A model's value fits one branch or another; strict mode has only anyOf for that.
    if (keyword === 'oneOf') {
      out.anyOf = value;
      continue;
    }
    if (!STRICT_KEYWORDS.has(keyword)) continue;
    if (keyword === 'format' && !STRICT_FORMAT_NAMES.has(value as string)) continue;
    out[keyword] = value;
  }
  if (typeof out.items === 'object') out.items = strictNode(out.items, false);
  if (Array.isArray(out.anyOf)) out.anyOf = out.anyOf.map((member) => strictNode(member, false));
  for (const defs of ['$defs', 'definitions'] as const) {
    if (isRecord(out[defs])) out[defs] = Object.fromEntries(Object.entries(out[defs]).map(([k, v]) => [k, strictNode(v, false)]));
  }
  if (out.type === 'object' || isRecord(out.properties)) {
    const properties = isRecord(out.properties) ? out.properties : {};
    const required = new Set(Array.isArray(source.required) ? (source.required as string[]) : []);
    out.properties = Object.fromEntries(Object.entries(properties).map(([name, sub]) => [name, strictNode(sub, !required.has(name))]));
    out.required = Object.keys(properties);
    out.additionalProperties = false;
  }
  return nullable ? orNull(out) : out;
}

/** `schema`, also accepting null. */
function orNull(schema: Record<string, unknown>): Record<string, unknown> {
  if (typeof schema.type === 'string') {
    const nullable: Record<string, unknown> = { ...schema, type: [schema.type, 'null'] };
    if (Array.isArray(schema.enum) && !schema.enum.includes(null)) nullable.enum = [...schema.enum, null];
    return nullable;
  }
  if (Array.isArray(schema.type)) {
    if (schema.type.includes('null')) return schema;
    const nullable: Record<string, unknown> = { ...schema, type: [...(schema.type as unknown[]), 'null'] };
    if (Array.isArray(schema.enum) && !schema.enum.includes(null)) nullable.enum = [...schema.enum, null];
    return nullable;
  }
  // No type to widen ($ref, anyOf, const): offer null beside it.
  const { description, ...rest } = schema;
  return { ...(description !== undefined ? { description } : {}), anyOf: [rest, { type: 'null' }] };
}
