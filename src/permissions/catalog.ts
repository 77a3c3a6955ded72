import type { ServerPermissions } from '../core/principal.js';
import type { ToolDef } from '../core/types.js';
import { loadDefaultPermissions } from './load.js';
import type { PermissionRules, RuleCatalog } from '../core/permissions.js';
import { compilePermissions } from './rules.js';
import { parseCommandPattern } from './bash/pattern.js';

/**
 * What permission rules are checked against: the served tools (and what each tool's rules speak
 * of, `ToolDef.rules`), and the namespaces of upstreams (`github__*`), whose tools may be listed
 * only later. Bash's command rules are read with the same parser its calls use.
 */
export function ruleCatalog(tools: readonly ToolDef[], namespaces: readonly string[]): RuleCatalog {
  const byName = new Map(tools.map((t) => [t.name, t]));
  const prefixes = namespaces.map((n) => (n.endsWith('*') ? n.slice(0, -1) : n));
  return {
    knows: (tool) => byName.has(tool) || prefixes.some((prefix) => tool.startsWith(prefix)),
    knowsGroup: (prefix) => tools.some((t) => t.name.startsWith(prefix)) || prefixes.some((p) => p.startsWith(prefix) || prefix.startsWith(p)),
    specifierOf: (tool) => byName.get(tool)?.rules?.specifier,
    checkCommand: (specifier) => void parseCommandPattern(specifier),
  };
}

/** The rules every caller inherits (`TOOLPORT_PERMISSIONS`, read and checked now) and the catalog keys' rules are checked against. */
export async function serverPermissions(
  config: { permissionsFile?: string | undefined },
  tools: readonly ToolDef[],
  namespaces: readonly string[],
): Promise<ServerPermissions> {
  const catalog = ruleCatalog(tools, namespaces);
  return serverRules(await loadDefaultPermissions(config.permissionsFile, catalog), catalog);
}

/** The default rules (`TOOLPORT_PERMISSIONS`, already read) and the catalog, with the compiler the core and the callers use. */
export function serverRules(defaults: PermissionRules | undefined, catalog: RuleCatalog): ServerPermissions {
  return { defaults, catalog, compile: (lists) => compilePermissions(lists, catalog) };
}
