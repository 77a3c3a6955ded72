import { pino } from 'pino';
import { type PermissionRules, type RuleCatalog, type Permissions } from '#src/core/permissions.js';
import { compilePermissions } from '#src/permissions/rules.js';
import type { ToolContext } from '#src/core/types.js';

/** What a tool context may carry besides its signal and request id. */
export interface ToolContextOptions {
  /** The caller's permission rules (see `rules`); undefined: none. */
  permissions?: Permissions | undefined;
}

/** A context for calling a tool's `execute` directly: silent logs, and `signal` (never aborted unless given). */
export function toolContext(signal: AbortSignal = new AbortController().signal, requestId = 'test', options: ToolContextOptions = {}): ToolContext {
  return { signal, log: pino({ level: 'silent' }), requestId, ...(options.permissions !== undefined && { permissions: options.permissions }) };
}

/** The built-in tools' rule forms, for compiling rules in tests: paths for the file tools, a command line for Bash, every tool known. */
export const TEST_RULE_CATALOG: RuleCatalog = {
  knows: () => true,
  knowsGroup: () => true,
  specifierOf: (tool) => (['Read', 'Edit', 'Write'].includes(tool) ? 'path' : tool === 'Bash' ? 'command' : undefined),
};

/** One key's rules, compiled as the keys file would have them (`key "k"`); throws what a bad rule would stop start-up with. */
export function rules(lists: PermissionRules): Permissions {
  const compiled = compilePermissions([{ where: 'key "k"', rules: lists }], TEST_RULE_CATALOG);
  if (compiled === undefined) throw new Error('rules() needs at least one rule');
  return compiled;
}

/** A context carrying `permissions` (see `rules`), otherwise as `toolContext()`. */
export function ruledContext(permissions: Permissions, signal?: AbortSignal): ToolContext {
  return toolContext(signal, 'test', { permissions });
}
