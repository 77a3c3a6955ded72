import type { Logger } from 'pino';
import { createBashTool } from './bash.js';
import type { BashSandboxSetting } from '../os/sandbox/isolation.js';
import type { BashLimits } from '../os/sandbox/limits.js';
import { Echo } from './echo.js';
import { createEditTool } from './edit.js';
import { createGlobTool } from './glob/glob.js';
import { createGrepTool } from './grep/grep.js';
import { flockUnavailableReason } from '../os/fs/flock.js';
import { removeLeftovers } from '../os/fs/leftovers.js';
import { createLsTool } from './ls.js';
import { createReadTool } from './read.js';
import { Workspace } from '../os/fs/workspace.js';
import { workspaceUsage } from '../os/fs/workspace-usage.js';
import { createWriteTool } from './write.js';
import type { ToolDef } from '../core/types.js';
import { BackgroundTasks } from './tasks/background-tasks.js';
import { createTaskOutputTool } from './tasks/task-output.js';
import { createTaskStopTool } from './tasks/task-stop.js';
import { usePrecompiledValidators } from '../core/validator.js';
import { PRECOMPILED_VALIDATORS } from './validators.generated.js';

// On import, so every way to a built-in tool (builtinTools, or Echo and the factories one by one)
// registers it without compiling its schemas.
usePrecompiledValidators(PRECOMPILED_VALIDATORS);

export {
  BackgroundTasks,
  Echo,
  Workspace,
  createBashTool,
  createEditTool,
  createGlobTool,
  createGrepTool,
  createLsTool,
  createReadTool,
  createTaskOutputTool,
  createTaskStopTool,
  createWriteTool,
};

export interface BuiltinToolOptions {
  /** The only directory the file tools may touch: a path, canonicalised and opened once, here, or a workspace already open (the caller closes it). */
  workspace: string | Workspace;
  /** Run Bash in a sandbox: `auto` (the default), the first that works here; `true`, one always (or fail); `bubblewrap` or `landlock`; `false`, never. */
  bashSandbox?: BashSandboxSetting;
  /** Sandboxed Bash commands may use the network (default: no network). */
  bashNetwork?: boolean;
  /** Bounds on each Bash call (default: `DEFAULT_BASH_LIMITS`). */
  bashLimits?: BashLimits;
  /** Files the server reads secrets or configuration from (the API keys file); the Bash sandbox hides them. */
  secretFiles?: readonly string[];
  /** Directories the Bash sandbox hides whole: the other keys' workspaces. */
  hiddenDirectories?: readonly string[];
  /** Where Bash says, once, which mode runs and why. */
  log?: Logger;
  /**
   * Remove, in the background, what a server that died mid-write left in the workspace (see
   * `removeLeftovers`), and log what was removed to `log`. For servers, not for one-off commands.
   */
  sweepLeftovers?: boolean;
  /** Bytes the workspace may use for Write and Edit to go on writing in it (see `WorkspaceUsage`); 0 or none: no quota. */
  workspaceQuota?: number;
  /**
   * Bash's background tasks, shared by every workspace a server serves so its caps hold across
   * them; without, this workspace gets its own, ended when it closes.
   */
  tasks?: BackgroundTasks;
}

/** The tools toolport serves out of the box, in the order they are listed. */
export async function builtinTools(options: BuiltinToolOptions): Promise<ToolDef[]> {
  const ws = typeof options.workspace === 'string' ? await Workspace.open(options.workspace) : options.workspace;
  if (options.sweepLeftovers === true) {
    // In the background: a big workspace must not hold up start-up.
    removeLeftovers(ws).then(
      (report) => options.log?.info({ ...report, workspace: ws.root }, 'removed what a crash left in the workspace'),
      (err: unknown) => options.log?.warn({ err, workspace: ws.root }, 'could not sweep the workspace for what a crash left'),
    );
  }
  // Measured from now, in the background; Write and Edit wait for it only if it is not done by their first call.
  const usage = workspaceUsage(ws, options.workspaceQuota);
  if (options.log !== undefined) warnWithoutFlock(ws, options.log);
  let tasks = options.tasks;
  if (tasks === undefined) {
    const own = (tasks = new BackgroundTasks());
    ws.onClose(() => void own.close());
  }
  return [
    Echo,
    await createBashTool({
      workspace: ws,
      sandbox: options.bashSandbox ?? 'auto',
      network: options.bashNetwork,
      limits: options.bashLimits,
      secretFiles: options.secretFiles,
      hiddenDirectories: options.hiddenDirectories,
      log: options.log,
      tasks,
    }),
    createTaskOutputTool(tasks),
    createTaskStopTool(tasks),
    createReadTool(ws),
    createWriteTool(ws, { usage }),
    createEditTool(ws, { usage }),
    createGlobTool(ws),
    createGrepTool(ws, { confine: 'auto' }),
    createLsTool(ws),
  ];
}

/** Says once, as a warning, when Edits and Writes cannot be ordered across processes here (no perl for the lock helper). */
function warnWithoutFlock(ws: Workspace, log: Logger): void {
  void flockUnavailableReason(ws.rootDir).then((reason) => {
    if (reason !== undefined) {
      log.warn(
        { workspace: ws.root, reason },
        'file locks cannot be taken here: Edits and Writes of one file are ordered within this process only, not across replicas',
      );
    }
  });
}
