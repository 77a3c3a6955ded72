import { ToolRegistry } from './core/registry.js';
import type { Config } from './config.js';
import { loadPlugins } from './plugins.js';
import { builtinTools } from './tools/index.js';

/** Raised when TOOLPORT_TOOLS names a tool that no one registered. */
export class UnknownToolError extends Error {
  override readonly name = 'UnknownToolError';
}

/**
 * The registry a server or the CLI serves: the built-in tools and the plug-ins' tools, narrowed
 * to the ones `TOOLPORT_TOOLS` names (in its order), or all of them.
 */
export async function createToolset(config: Pick<Config, 'workspace' | 'bashSandbox' | 'plugins' | 'tools'>, cwd = process.cwd()): Promise<ToolRegistry> {
  const all = new ToolRegistry();
  for (const tool of await builtinTools({ workspace: config.workspace, bashSandbox: config.bashSandbox })) all.register(tool);
  await loadPlugins(config.plugins, all, cwd);
  if (config.tools === undefined) return all;
  const served = new ToolRegistry();
  for (const name of config.tools) {
    if (served.get(name)) throw new UnknownToolError(`Invalid TOOLPORT_TOOLS: "${name}" is listed more than once.`);
    const tool = all.get(name);
    if (!tool) {
      const available = all.list().map((t) => t.name).join(', ');
      throw new UnknownToolError(`Invalid TOOLPORT_TOOLS: no tool named "${name}". Available tools: ${available}.`);
    }
    served.register(tool);
  }
  return served;
}
