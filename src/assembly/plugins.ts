import { resolve } from 'import-meta-resolve';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { ToolRegistry } from '../core/registry.js';
import type { ToolDef } from '../core/types.js';

/**
 * What a plug-in module's default export may be: a tool, a list of tools, or a function that
 * receives the registry and registers what it likes (it may be async).
 */
export type ToolportPlugin = ToolDef | ToolDef[] | ((registry: ToolRegistry) => void | Promise<void>);

/** Start-up fails with this when a plug-in cannot be loaded or registered. */
export class PluginLoadError extends Error {
  override readonly name = 'PluginLoadError';
  readonly plugin: string;

  constructor(plugin: string, reason: string) {
    super(`Plug-in "${plugin}" failed to load: ${reason}`);
    this.plugin = plugin;
  }
}

/**
 * Loads plug-ins in order and registers their tools. A spec that starts with `.` or `/` is a file
 * path (relative to `cwd`); anything else is a package name, resolved from `cwd` as Node would.
 */
export async function loadPlugins(specs: readonly string[], registry: ToolRegistry, cwd = process.cwd()): Promise<void> {
  for (const spec of specs) {
    let mod: { default?: unknown };
    try {
      mod = (await import(resolveSpec(spec, cwd))) as { default?: unknown };
    } catch (err) {
      throw new PluginLoadError(spec, reason(err));
    }
    const plugin = mod.default;
    try {
      if (typeof plugin === 'function') await (plugin as (r: ToolRegistry) => unknown)(registry);
      else if (Array.isArray(plugin)) for (const tool of plugin) registry.register(tool as ToolDef);
      else if (typeof plugin === 'object' && plugin !== null) registry.register(plugin as ToolDef);
      else throw new Error('the default export must be a tool, an array of tools, or a function that receives the registry');
    } catch (err) {
      throw new PluginLoadError(spec, reason(err));
    }
  }
}

function reason(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function resolveSpec(spec: string, cwd: string): string {
  if (spec.startsWith('.') || path.isAbsolute(spec)) return pathToFileURL(path.resolve(cwd, spec)).href;
  // ESM resolution (the "import" condition), from cwd: import.meta.resolve takes a parent only behind a flag.
  return resolve(spec, pathToFileURL(path.join(cwd, 'noop.js')).href);
}
