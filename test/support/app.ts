import type { FastifyInstance } from 'fastify';
import { buildApp } from '#src/http/app.js';
import { runtimeFromOptions, type AppOptions } from '#src/http/app-options.js';
import { ToolRegistry } from '#src/core/registry.js';
import type { ToolDef } from '#src/core/types.js';

/** A registry of these tools, in this order. */
export function registryOf(tools: readonly ToolDef[]): ToolRegistry {
  const registry = new ToolRegistry();
  for (const tool of tools) registry.register(tool);
  return registry;
}

/**
 * An app over these tools (a registry as it is, or definitions registered in order) and the rest
 * of a runtime made from `options` (keys, rules, limits, a logger), answering HTTP as `options`
 * says. With `t`, the app is closed after the test.
 */
export async function appWith(
  tools: ToolRegistry | readonly ToolDef[],
  options: Partial<AppOptions> = {},
  t?: { after(fn: () => unknown): void },
): Promise<FastifyInstance> {
  const registry = tools instanceof ToolRegistry ? tools : registryOf(tools);
  const [runtime, http] = runtimeFromOptions({ ...options, registry });
  const app = await buildApp(runtime, http);
  t?.after(() => app.close());
  return app;
}
