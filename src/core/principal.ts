import type { Permissions, PermissionRules, RuleCatalog } from './permissions.js';

/**
 * The tools a scoped key may use, in the key's order. Keys with the same tools share one set. An
 * entry ending in `*` names every tool whose name starts with what comes before it (`github__*`,
 * the tools of one upstream): `has` answers for the patterns too, iteration gives the entries.
 */
export interface ToolScope extends ReadonlySet<string> {
  /** The permission rules of the callers with this scope, which their tool lists state (`Permissions.summary`). */
  readonly permissions?: Permissions | undefined;
}

/** Whether a scope entry is a prefix pattern (`github__*`) rather than one tool's name. */
export function isToolPattern(entry: string): boolean {
  return entry.length > 1 && entry.endsWith('*');
}

/** Whether a tool name is one a scope entry names: itself, or a name the pattern's prefix starts. */
export function scopeEntryMatches(entry: string, tool: string): boolean {
  return isToolPattern(entry) ? tool.startsWith(entry.slice(0, -1)) : entry === tool;
}

/**
 * A ToolScope of these entries (every tool when undefined, which only rules make worth a scope):
 * a plain Set, unless a pattern asks `has` to look further or rules go with it.
 */
export function toolScope(entries: readonly string[] | undefined, permissions?: Permissions): ToolScope {
  const prefixes = entries === undefined ? [''] : entries.filter(isToolPattern).map((entry) => entry.slice(0, -1));
  if (prefixes.length === 0 && permissions === undefined) return new Set(entries);
  return new PatternScope(entries ?? [], prefixes, permissions);
}

class PatternScope extends Set<string> implements ToolScope {
  readonly #prefixes: readonly string[];
  readonly permissions: Permissions | undefined;

  constructor(entries: readonly string[], prefixes: readonly string[], permissions: Permissions | undefined) {
    super(entries);
    this.#prefixes = prefixes;
    this.permissions = permissions;
  }

  override has(tool: string): boolean {
    return super.has(tool) || this.#prefixes.some((prefix) => tool.startsWith(prefix));
  }
}

/**
 * The rules every caller inherits (`TOOLPORT_PERMISSIONS`), and what rules are checked against.
 * A key's own rules narrow the default: a call must pass both.
 */
export interface ServerPermissions {
  readonly defaults: PermissionRules | undefined;
  readonly catalog: RuleCatalog;
  /**
   * Compiles rule lists, in order, against `catalog` (`src/permissions/rules.ts`: the rule language
   * lives above the core, which only asks the result). Throws `PermissionRuleError` naming the
   * list and the rule; undefined when no list has a rule.
   */
  compile(lists: ReadonlyArray<{ where: string; rules: PermissionRules | undefined }>): Permissions | undefined;
}

/**
 * Who calls: an API key's or an access token's caller (`TokenPrincipal` adds what the token says),
 * by its label and scope, never the secret, so it is safe to log. Transports name it, the gateway
 * and the registry read its scope, workspace and rules.
 */
export interface Principal {
  readonly label: string;
  /** Undefined: every served tool. */
  readonly tools: ToolScope | undefined;
  /** The key's own workspace; undefined: the server's. */
  readonly workspace: string | undefined;
  /** The rules its calls must pass, the server's default included; undefined: none. */
  readonly permissions?: Permissions | undefined;
}
