import { CheckPool } from './pool.js';
import { refused, type CommandRules, type CommandVerdict } from './line-check.js';

export { MAX_COMMANDS, MAX_LINE_BYTES, MAX_NESTING, type CommandRules, type CommandVerdict } from './line-check.js';
export { parseCommandPattern, type CommandPattern } from './pattern.js';

/**
 * Judges a path a redirection opens (relative to the workspace when it does not start with `/`):
 * a reason to refuse it, or undefined. `afterCd`: a `cd` earlier in the line may have moved the
 * shell, so a relative path may not be where it says.
 */
export type RedirectCheck = (access: 'read' | 'write', path: string, afterCd: boolean) => string | undefined;

/** Who asks, and what else to judge. */
export interface CheckOptions {
  /** The caller, as admission tells callers apart: checks take turns between callers. */
  readonly caller?: string | undefined;
  /** The file rules for what redirections open; none: redirections are not judged. */
  readonly redirects?: RedirectCheck | undefined;
}

const ALLOWED: CommandVerdict = { allowed: true };
const pool = new CheckPool();

/**
 * Decides a whole line under a caller's Bash rules (see `judgeLine`), then what its redirections
 * open under the file rules (`redirects`). Lines are read on worker threads, taking turns between
 * callers (`caller`): one caller's lines never hold up another's, nor the event loop.
 */
export async function checkCommandLine(line: string, rules: CommandRules, options: CheckOptions = {}): Promise<CommandVerdict> {
  if (rules.allow === undefined && rules.deny.length === 0) return ALLOWED;
  const { verdict, opened } = await pool.judge(options.caller ?? '', line, rules);
  if (options.redirects !== undefined) {
    for (const { access, path, afterCd, command } of opened) {
      const refusal = options.redirects(access, path, afterCd);
      if (refusal !== undefined) return { ...refused(refusal), command };
    }
  }
  return verdict;
}
