import { publishedSchema } from '../../core/formats.js';
import type { ToolRegistry } from '../../core/registry.js';
import type { ToolDef } from '../../core/types.js';
import type { OpenAPIDocument } from './tools-document.js';

const TOOL_TAG = 'tools';

/**
 * The document as the registry is now. Routes, and so the operations @fastify/swagger documents,
 * are made once, when the app is built; a tool source whose tools change later (an upstream that
 * sent `list_changed`) is served through `POST /tools/{name}`. Here each tool gets its operation
 * all the same (shaped as the built ones, from one of them), a source's tool the one of its
 * definition now, and a tool no longer registered loses its. Made again only when the registry's
 * list changes.
 */
export function liveDocument(registry: ToolRegistry): (built: () => OpenAPIDocument) => OpenAPIDocument {
  let madeFor: readonly ToolDef[] | undefined;
  let made: OpenAPIDocument | undefined;
  return (built) => {
    const tools = registry.tools();
    if (made !== undefined && madeFor === tools) return made;
    const document = built();
    const registered = new Set(tools.map((t) => t.name));
    const paths: OpenAPIDocument['paths'] = {};
    let template: Record<string, unknown> | undefined;
    for (const [path, item] of Object.entries(document.paths)) {
      const operation = toolOperation(item);
      if (operation !== undefined) {
        template ??= operation;
        if (!registered.has(operation['operationId'] as string)) continue;
      }
      paths[path] = item;
    }
    if (template !== undefined) {
      for (const tool of tools) {
        const path = `/tools/${tool.name}`;
        // A source's tool is described as it is now: its definition may have changed since its route was made.
        if (paths[path] === undefined || registry.sourceOf(tool.name) !== '') paths[path] = { post: operationOf(tool, template) };
      }
    }
    madeFor = tools;
    made = { ...document, paths };
    return made;
  };
}

function toolOperation(item: Record<string, unknown>): Record<string, unknown> | undefined {
  const post = item['post'] as { tags?: string[]; operationId?: string } | undefined;
  return post?.tags?.includes(TOOL_TAG) === true && typeof post.operationId === 'string' ? (post as Record<string, unknown>) : undefined;
}

/** A tool's operation, like one @fastify/swagger made from a route: the template's parameters and answers, the tool's own body. */
function operationOf(tool: ToolDef, template: Record<string, unknown>): Record<string, unknown> {
  const responses = { ...(template['responses'] as Record<string, unknown>) };
  // The template's 200 may name its own tool's ToolResult (a tool with an output schema): the plain one here.
  if (responses['200'] !== undefined) responses['200'] = plainAnswer(responses['200']);
  return {
    ...template,
    operationId: tool.name,
    summary: tool.annotations?.title ?? tool.name,
    description: tool.description,
    requestBody: { required: true, content: { 'application/json': { schema: publishedSchema(tool.inputSchema) } } },
    responses,
  };
}

function plainAnswer(answer: unknown): unknown {
  return JSON.parse(JSON.stringify(answer).replace(/"#\/components\/schemas\/ToolResult_[^"]*"/g, '"#/components/schemas/ToolResult"'));
}
