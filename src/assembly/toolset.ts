import path from 'node:path';
import type { Logger } from 'pino';
import { ToolRegistry } from '../core/registry.js';
import type { Config } from '../config/config.js';
import { loadPlugins } from './plugins.js';
import { builtinTools } from '../tools/index.js';
import type { Workspace } from '../os/fs/workspace.js';
import type { BackgroundTasks } from '../tools/tasks/background-tasks.js';

/** Raised when TOOLPORT_TOOLS names a tool that no one registered. */
export class UnknownToolError extends Error {
  override readonly name = 'UnknownToolError';
}

/** What createToolset reads of the configuration; without `apiKeysFile`, no keys file is hidden. */
export type ToolsetConfig = Pick<Config, 'workspace' | 'bashSandbox' | 'plugins' | 'tools'> &
  Partial<Pick<Config, 'apiKeysFile' | 'bashLimits' | 'bashNetwork' | 'workspaceQuota'>>;

/**
 * The registry a server or the CLI serves: the built-in tools and the plug-ins' tools, narrowed
 * to the ones `TOOLPORT_TOOLS` names (in its order), or all of them. With `log` (a server's), Bash
 * says there which mode it runs in (the sandbox or not) and why, and the workspace is swept of
 * what a crashed server left in it. With `workspace` (`config.workspace`, already open), the
 * caller closes it; without, it is opened here and held for the life of the process.
 */
export async function createToolset(
  config: ToolsetConfig,
  cwd = process.cwd(),
  log?: Logger,
  workspace?: Workspace,
  tasks?: BackgroundTasks,
): Promise<ToolRegistry> {
  const all = new ToolRegistry();
  const builtins = await builtinTools({
    workspace: workspace ?? config.workspace,
    bashSandbox: config.bashSandbox,
    bashNetwork: config.bashNetwork,
    bashLimits: config.bashLimits,
    secretFiles: secretFiles(config, cwd),
    log,
    sweepLeftovers: log !== undefined,
    workspaceQuota: config.workspaceQuota,
    tasks,
  });
  for (const tool of builtins) all.register(tool);
  await loadPlugins(config.plugins, all, cwd);
  if (config.tools === undefined) return all;
  const served = new ToolRegistry();
  for (const name of config.tools) {
    if (served.get(name)) throw new UnknownToolError(`Invalid TOOLPORT_TOOLS: "${name}" is listed more than once.`);
    const tool = all.get(name);
    if (!tool) {
      const available = all
        .list()
        .map((t) => t.name)
        .join(', ');
      throw new UnknownToolError(`Invalid TOOLPORT_TOOLS: no tool named "${name}". Available tools: ${available}.`);
    }
    served.register(tool);
  }
  return served;
}

/**
 * The files the server reads its secrets and configuration from, which the Bash sandbox hides:
 * the API keys file and the plug-ins given as file paths (package names are left alone).
 */
export function secretFiles(config: ToolsetConfig, cwd: string): string[] {
  const files = config.plugins.filter((spec) => spec.startsWith('.') || spec.startsWith('/'));
  if (config.apiKeysFile !== undefined) files.unshift(config.apiKeysFile);
  return files.map((file) => path.resolve(cwd, file));
}
