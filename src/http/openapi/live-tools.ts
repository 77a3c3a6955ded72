import { publishedSchema } from '../../core/formats.js';
import type { ToolRegistry } from '../../core/registry.js';
import type { ToolDef } from '../../core/types.js';
import { toolResultComponent, type OpenAPIDocument } from './tools-document.js';

/**
 * The operationId of `POST /tools/{name}`, the one route that calls every tool: its operation is
 * the template of each tool's own, and is not in the document itself (a generic "call any tool"
 * would reach the consumers that turn operations into tools as a tool of its own).
 */
export const TOOL_CALL_TEMPLATE = 'callTool';

const SCHEMA_REF = '#/components/schemas/';

interface Operation {
  parameters?: Array<{ in?: string }>;
  responses?: Record<string, unknown>;
  [key: string]: unknown;
}

/**
 * The document as the registry is now: `POST /tools/<name>` for every tool registered, each shaped
 * as the template (its query parameters and answers) with the tool's own name, description and
 * body, and the 200 naming the tool's typed ToolResult when the document has one (never for a
 * source's tool). Made again only when the registry's list changes, so a tool that an upstream
 * added or changed later is described as it is now, and one no longer registered loses its
 * operation.
 */
export function liveDocument(registry: ToolRegistry): (built: () => OpenAPIDocument) => OpenAPIDocument {
  let madeFor: readonly ToolDef[] | undefined;
  let made: OpenAPIDocument | undefined;
  return (built) => {
    const tools = registry.tools();
    if (made !== undefined && madeFor === tools) return made;
    const document = built();
    const schemas = document.components?.schemas ?? {};
    const paths: OpenAPIDocument['paths'] = {};
    for (const [path, item] of Object.entries(document.paths)) {
      const { post, ...others } = item as { post?: Operation };
      if (post?.operationId !== TOOL_CALL_TEMPLATE) {
        paths[path] = item;
        continue;
      }
      if (Object.keys(others).length > 0) paths[path] = others;
      const template = toolTemplate(post);
      for (const tool of tools) {
        // A source's tool may change its output schema after start-up, when the document's
        // components are already made: it answers the plain ToolResult, which never goes stale.
        const typed = tool.outputSchema !== undefined && registry.sourceOf(tool.name) === '' && schemas[toolResultComponent(tool.name)] !== undefined;
        paths[`/tools/${tool.name}`] = { post: operationOf(tool, template, typed) };
      }
    }
    madeFor = tools;
    made = { ...document, paths };
    return made;
  };
}

/** The generic call's operation without what is the generic route's own: the name in the path, and its 404 for no such tool. */
function toolTemplate(generic: Operation): Operation {
  const { parameters = [], responses = {}, ...rest } = generic;
  const answers = { ...responses };
  delete answers['404'];
  const query = parameters.filter((p) => p.in !== 'path');
  return { ...rest, ...(query.length > 0 ? { parameters: query } : {}), responses: answers };
}

/** A tool's operation; `typed`: its 200 names the tool's own ToolResult component. */
function operationOf(tool: ToolDef, template: Operation, typed: boolean): Operation {
  const own = `${SCHEMA_REF}${toolResultComponent(tool.name)}`;
  const responses = typed ? { ...template.responses, 200: typedAnswer(template.responses?.['200'], own) } : template.responses;
  const { parameters, tags, ...rest } = template;
  delete rest['operationId'];
  // In the order of the operations @fastify/swagger makes, so the document reads as one made from routes.
  return {
    operationId: tool.name,
    summary: tool.annotations?.title ?? tool.name,
    tags,
    description: tool.description,
    // As the tool lists publish it: `properties` always there, every enum with its type (Open
    // WebUI loses the values of an enum without one).
    requestBody: { required: true, content: { 'application/json': { schema: publishedSchema(tool.inputSchema) } } },
    ...(parameters !== undefined ? { parameters } : {}),
    ...rest,
    responses,
  };
}

/** The 200 answer with the plain ToolResult among its JSON answer's alternatives replaced by the tool's own. */
function typedAnswer(answer: unknown, own: string): unknown {
  const { content } = answer as { content?: Record<string, { schema?: { anyOf?: Array<{ $ref?: unknown }> } }> };
  const json = content?.['application/json'];
  const anyOf = json?.schema?.anyOf;
  if (json === undefined || !Array.isArray(anyOf)) return answer;
  const members = anyOf.map((member) => (member.$ref === `${SCHEMA_REF}ToolResult` ? { ...member, $ref: own } : member));
  return { ...(answer as object), content: { ...content, 'application/json': { ...json, schema: { ...json.schema, anyOf: members } } } };
}
