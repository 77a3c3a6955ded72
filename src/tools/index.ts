import type { Logger } from 'pino';
import { createBashTool } from './bash.js';
import type { BashSandboxSetting } from './bash-isolation.js';
import { Echo } from './echo.js';
import { createEditTool } from './edit.js';
import { createGlobTool } from './glob.js';
import { createGrepTool } from './grep.js';
import { removeLeftovers } from './leftovers.js';
import { createLsTool } from './ls.js';
import { createReadTool } from './read.js';
import { Workspace } from './workspace.js';
import { createWriteTool } from './write.js';
import type { ToolDef } from '../core/types.js';

export { Echo, Workspace, createBashTool, createEditTool, createGlobTool, createGrepTool, createLsTool, createReadTool, createWriteTool };

export interface BuiltinToolOptions {
  /** The only directory the file tools may touch; canonicalised once, here. */
  workspace: string;
  /** Run Bash inside the bubblewrap sandbox: `auto` (the default) when it works here, `true` always (or fail), `false` never. */
  bashSandbox?: BashSandboxSetting;
  /** Files the server reads secrets or configuration from (the API keys file); the Bash sandbox hides them. */
  secretFiles?: readonly string[];
  /** Where Bash says, once, which mode runs and why. */
  log?: Logger;
}

/** The tools toolport serves out of the box, in the order they are listed. */
export async function builtinTools(options: BuiltinToolOptions): Promise<ToolDef[]> {
  const ws = await Workspace.open(options.workspace);
  // In the background: a big workspace must not hold up start-up, and a sweep that fails changes nothing.
  void removeLeftovers(ws).catch(() => undefined);
  return [
    Echo,
    await createBashTool({ workspace: ws, sandbox: options.bashSandbox ?? 'auto', secretFiles: options.secretFiles, log: options.log }),
    createReadTool(ws),
    createWriteTool(ws),
    createEditTool(ws),
    createGlobTool(ws),
    createGrepTool(ws, { confine: 'auto' }),
    createLsTool(ws),
  ];
}
