import { PermissionDenied, type Permissions } from '../core/permissions.js';
import type { ToolContext } from '../core/types.js';
import { checkCommandLine, parseCommandPattern, type CommandRules } from './bash-rules.js';

const NOT_ALLOWED = ' is not allowed by any rule for Bash';

// Each caller's command rules, parsed once: a key's Permissions lives as long as the key.
const PARSED = new WeakMap<Permissions, readonly CommandRules[]>();

function commandRules(permissions: Permissions): readonly CommandRules[] {
  let parsed = PARSED.get(permissions);
  if (parsed === undefined) {
    parsed = permissions.commandRules('Bash').map(({ allow, deny }) => ({
      ...(allow !== undefined && { allow: allow.map(parseCommandPattern) }),
      deny: deny.map(parseCommandPattern),
    }));
    PARSED.set(permissions, parsed);
  }
  return parsed;
}

/**
 * Refuses a command line the caller's Bash rules do not allow, before it runs: every simple
 * command it would run must pass every layer of rules. Throws `PermissionDenied` naming the rule
 * (`denied by Bash(curl:*)`) or saying that none allows it; nothing without command rules.
 */
export async function checkBashRules(context: Pick<ToolContext, 'permissions'>, line: string): Promise<void> {
  if (context.permissions === undefined) return;
  for (const rules of commandRules(context.permissions)) {
    const verdict = await checkCommandLine(line, rules);
    if (verdict.allowed) continue;
    if (verdict.rule !== undefined) {
      const rule = `Bash(${verdict.rule.text})`;
      throw new PermissionDenied(`Command \`${verdict.command}\` is denied by ${rule}.`, rule, 'Bash');
    }
    const unmatched = verdict.command !== undefined && verdict.reason.endsWith(NOT_ALLOWED);
    const message = unmatched ? `Command \`${verdict.command}\`${NOT_ALLOWED}.` : `The command line${NOT_ALLOWED}: ${verdict.reason}.`;
    throw new PermissionDenied(message, undefined, 'Bash');
  }
}
