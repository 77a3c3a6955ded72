import type { PathAccess } from '../../core/permissions.js';
import type { ToolContext } from '../../core/types.js';
import type { Location } from '../../os/fs/workspace.js';

/**
 * Refuses `access` to the path a walk resolved, by the caller's rules, before anything there is
 * read or written: the rules see the canonical path inside the workspace (symlinks expanded, `..`
 * gone), never the client's spelling, though the refusal names the path as `given`, so it never
 * tells where a symlink leads. Throws the rules' `PermissionDenied`; nothing without rules.
 */
export function checkPathRules(context: Pick<ToolContext, 'permissions'>, tool: string, access: PathAccess, location: Location, given: string): void {
  const refusal = context.permissions?.pathRefusal(tool, access, location.relative, location.kind === 'directory', given);
  if (refusal !== undefined) throw refusal;
}

/**
 * Refuses to read a file with more than one name (hard links) under rules for reading: a rule
 * sees the name a call used, and another name of the same file could be one the rules deny.
 */
export function checkLinkCount(context: Pick<ToolContext, 'permissions'>, tool: string, given: string, links: number | bigint): void {
  if (links <= 1 || context.permissions?.governs('read') !== true) return;
  throw context.permissions.linkRefusal(tool, given, Number(links));
}
