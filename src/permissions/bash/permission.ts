import path from 'node:path';
import { PermissionDenied, type Permissions } from '../../core/permissions.js';
import type { ToolContext } from '../../core/types.js';
import { checkCommandLine, parseCommandPattern, type CommandRules, type RedirectCheck } from './check.js';

const NOT_ALLOWED = ' is not allowed by any rule for Bash';
// What a redirection may always open: nothing in the workspace.
const DEVICES = new Set(['/dev/null', '/dev/stdin', '/dev/stdout', '/dev/stderr', '/dev/tty']);

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
 * Judges what a redirection opens by the caller's file rules: Read's for `<`, Edit's for `>` and
 * the like (deny wins). Under such rules a path must be relative to the workspace (the shell starts
 * there) and stay inside it; after a `cd` a relative path may be anywhere, so it is refused.
 */
function redirectCheck(permissions: Permissions): RedirectCheck {
  return (access, target, afterCd) => {
    if (DEVICES.has(target) || !permissions.governs(access)) return undefined;
    const verb = access === 'read' ? 'reading' : 'writing';
    if (path.posix.isAbsolute(target))
      return `${verb} ${target} is refused: under rules for ${access === 'read' ? 'Read' : 'Edit'} a redirection names a path relative to the workspace`;
    if (afterCd)
      return `${verb} ${target} after cd is refused: under file rules a redirection's relative path must be read from the workspace, so redirect before cd`;
    const relative = path.posix.normalize(target);
    if (relative === '..' || relative.startsWith('../')) return `${verb} ${target} is refused: it is outside the workspace`;
    const denial = permissions.pathRefusal('Bash', access, relative.replace(/\/$/, ''), false, target);
    return denial?.message;
  };
}

/**
 * Refuses a command line the caller's Bash rules do not allow, before it runs: the line must be
 * made of what the rules model, and every simple command it would run must pass every layer of
 * rules; what its redirections open must pass the file rules. Throws `PermissionDenied` naming the
 * rule (`denied by Bash(curl:*)`) or saying why; nothing without command rules.
 */
export async function checkBashRules(context: Pick<ToolContext, 'permissions' | 'caller'>, line: string): Promise<void> {
  if (context.permissions === undefined) return;
  const layers = commandRules(context.permissions);
  if (layers.length === 0) return;
  const options = { caller: context.caller, redirects: redirectCheck(context.permissions) };
  for (const rules of layers) {
    const verdict = await checkCommandLine(line, rules, options);
    if (verdict.allowed) continue;
    if (verdict.rule !== undefined) {
      const rule = `Bash(${verdict.rule.text})`;
      throw new PermissionDenied(`Command \`${verdict.command}\` is denied by ${rule}.`, rule, 'Bash');
    }
    const unmatched = verdict.command !== undefined && verdict.reason.endsWith(NOT_ALLOWED);
    const message = unmatched ? `Command \`${verdict.command}\`${NOT_ALLOWED}.` : `The command line${NOT_ALLOWED}: ${verdict.reason.replace(/\.$/, '')}.`;
    throw new PermissionDenied(message, undefined, 'Bash');
  }
}
