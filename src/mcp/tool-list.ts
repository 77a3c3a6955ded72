import type { Tool } from '@modelcontextprotocol/server';
import type { McpToolSource } from './backend.js';
import { toolFieldsOf } from './protocol-versions.js';

/**
 * One tool as `tools/list` publishes it in a revision: `name`, `description`, `inputSchema`;
 * `annotations` from 2025-03-26; `title` and `outputSchema` from 2025-06-18. Fields a revision
 * does not define are left out, so a strict client of that revision reads the list as it expects.
 * `execution.taskSupport` (2025-11-25 only) where the server runs tasks (`taskSupport`).
 */
export function toMcpTool(tool: McpToolSource, version: string, taskSupport = false): Tool {
  const fields = toolFieldsOf(version);
  // OpenAI refuses an object schema without `properties`, and the REST formats always carry one;
  // publish the same schema here so every format agrees.
  const out: Record<string, unknown> = {
    name: tool.name,
    description: tool.description,
    inputSchema: tool.inputSchema.properties ? tool.inputSchema : { ...tool.inputSchema, properties: {} },
  };
  if (fields.titleAndOutput) {
    const title = tool.title ?? tool.annotations?.title;
    if (title !== undefined) out['title'] = title;
  }
  if (fields.annotations && tool.annotations) out['annotations'] = tool.annotations;
  if (fields.titleAndOutput && tool.outputSchema) out['outputSchema'] = tool.outputSchema;
  // 2025-11-25's values: `forbidden` (the default), `optional`, `required`. Any call may be a task; none must.
  if (taskSupport) out['execution'] = { taskSupport: 'optional' };
  // The schemas are JSON Schema objects typed `unknown` inside; the SDK's Tool types them as JSON
  // values. Same data, so the cast only bridges the two declarations.
  return out as unknown as Tool;
}

/**
 * Results computed once per tools array (one per key scope) and revision. Keyed weakly, so a
 * backend that returns a new array on every call costs a rebuild, never a leak.
 */
export class PerListCache<T> {
  readonly #entries = new WeakMap<readonly McpToolSource[], Map<string, T>>();

  get(tools: readonly McpToolSource[], version: string, build: () => T): T {
    let byVersion = this.#entries.get(tools);
    if (!byVersion) {
      byVersion = new Map();
      this.#entries.set(tools, byVersion);
    }
    let value = byVersion.get(version);
    if (value === undefined) {
      value = build();
      byVersion.set(version, value);
    }
    return value;
  }
}
