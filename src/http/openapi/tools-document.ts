import type { ToolScope } from '../../core/principal.js';

/** The parts of an OpenAPI 3.1 document the tools-only view reads and writes. */
export interface OpenAPIDocument {
  info: Record<string, unknown>;
  paths: Record<string, Record<string, unknown>>;
  components?: { schemas?: Record<string, unknown>; [section: string]: unknown };
  tags?: Array<{ name: string; [key: string]: unknown }>;
  [key: string]: unknown;
}

/** Where the tools-only document is served. */
export const TOOLS_DOCUMENT_URL = '/openapi.tools.json';

const SCHEMA_REF = '#/components/schemas/';
const TOOL_TAG = 'tools';

const TOOL_RESULT_ANSWER = {
  description: 'The tool ran. `isError` is true when it failed, threw, timed out or returned garbage; the content says why, for the model.',
  content: { 'application/json': { schema: { $ref: `${SCHEMA_REF}ToolResult` } } },
};

/**
 * The document for consumers that turn every operation into a model tool (Open WebUI's tool
 * servers, mcpo-style proxies, LangChain's OpenAPI toolkits): only the tool operations of `full`,
 * `POST /tools/<name>`, and the components they use. Each answers a plain ToolResult and takes no
 * query parameters (nor the `Prefer` header of a task): `format` and `id` would otherwise be offered to the model as arguments of
 * every tool. With a `scope`, only the tools in it are listed. The service routes (listing,
 * health, `/calls`, MCP) stay in the full document, where an agent framework would turn them into
 * tools nobody wants (`healthz`, a 17k-character `getTool`).
 */
export function toolsDocument(full: OpenAPIDocument, scope?: ToolScope): OpenAPIDocument {
  const paths: OpenAPIDocument['paths'] = {};
  for (const [path, item] of Object.entries(full.paths)) {
    const operation = item.post as { operationId?: string; tags?: string[]; parameters?: unknown; responses?: Record<string, unknown> } | undefined;
    if (operation?.tags?.includes(TOOL_TAG) !== true || operation.operationId === undefined) continue;
    if (scope !== undefined && !scope.has(operation.operationId)) continue;
    // A model calls synchronously: no `Prefer: respond-async` header, so no 202 with a task.
    const responses = Object.fromEntries(Object.entries(operation.responses ?? {}).filter(([status]) => status !== '202'));
    const answered = { ...operation, responses: { ...responses, 200: toolResultAnswer(operation.operationId, operation.responses?.[200]) } };
    delete answered.parameters;
    paths[path] = { post: answered };
  }
  const { schemas = {}, ...otherComponents } = full.components ?? {};
  return {
    ...full,
    info: {
      ...full.info,
      title: `${String(full.info.title)} tools`,
      description:
        'One operation per tool: POST the tool input as JSON, get a ToolResult (`content` blocks and `isError`), which goes to the model as it is. ' +
        'Errors are ToolResults too, with a machine-readable `error`. The full API, with the tool listing, health and batch routes, is described at /openapi.json.',
    },
    tags: (full.tags ?? []).filter((tag) => tag.name === TOOL_TAG),
    paths,
    components: { ...otherComponents, schemas: reachable(paths, schemas) },
  };
}

/**
 * The full document as a caller with `scope` sees it: the service routes as they are, and the
 * operations of the tools in its scope only, so a token scoped to one tool reads no other tool's
 * name or schema here either (the lists and `toolsDocument` filter the same way). A removed tool's
 * own ToolResult component goes with it.
 */
export function scopedDocument(full: OpenAPIDocument, scope: ToolScope): OpenAPIDocument {
  const paths: OpenAPIDocument['paths'] = {};
  const removed = new Set<string>();
  for (const [path, item] of Object.entries(full.paths)) {
    const operation = item.post as { operationId?: string; tags?: string[] } | undefined;
    const tool = operation?.tags?.includes(TOOL_TAG) === true ? operation.operationId : undefined;
    if (tool !== undefined && !scope.has(tool)) removed.add(toolResultComponent(tool));
    else paths[path] = item;
  }
  const { schemas = {}, ...otherComponents } = full.components ?? {};
  return { ...full, paths, components: { ...otherComponents, schemas: Object.fromEntries(Object.entries(schemas).filter(([name]) => !removed.has(name))) } };
}

/**
 * The component of a tool's own ToolResult, for a tool with an output schema: its structuredContent
 * typed. No other component holds "_", so no tool name makes one clash.
 */
export function toolResultComponent(tool: string): string {
  return `ToolResult_${tool}`;
}

/** The plain ToolResult answer of one tool: its own component when the full document has one. */
function toolResultAnswer(operationId: string, full: unknown): typeof TOOL_RESULT_ANSWER {
  const members = (full as { content?: { 'application/json'?: { schema?: { anyOf?: Array<{ $ref?: unknown }> } } } } | undefined)?.content?.['application/json']?.schema?.anyOf;
  const own = `${SCHEMA_REF}${toolResultComponent(operationId)}`;
  if (members?.some((m) => m.$ref === own) !== true) return TOOL_RESULT_ANSWER;
  return { ...TOOL_RESULT_ANSWER, content: { 'application/json': { schema: { $ref: own } } } };
}

/** The schemas `paths` refers to, directly or through other schemas, in the order of `schemas`. */
function reachable(paths: unknown, schemas: Record<string, unknown>): Record<string, unknown> {
  const used = new Set<string>();
  const pending: unknown[] = [paths];
  while (pending.length > 0) {
    const node = pending.pop();
    if (Array.isArray(node)) pending.push(...node);
    else if (typeof node === 'object' && node !== null) {
      for (const [key, value] of Object.entries(node)) {
        if (key === '$ref' && typeof value === 'string' && value.startsWith(SCHEMA_REF)) {
          const name = value.slice(SCHEMA_REF.length);
          if (!used.has(name)) {
            used.add(name);
            pending.push(schemas[name]);
          }
        } else pending.push(value);
      }
    }
  }
  return Object.fromEntries(Object.entries(schemas).filter(([name]) => used.has(name)));
}
