import type { Logger } from 'pino';
import { loadApiKeys } from '../config/api-keys.js';
import type { Config } from '../config/config.js';
import { assertSafeExposure } from '../config/exposure.js';
import type { KeySpec } from '../auth/keyring.js';
import type { ServerPermissions } from '../core/principal.js';
import type { ToolRegistry } from '../core/registry.js';
import type { ToolDef } from '../core/types.js';
import { assertKeysFileOutsideWorkspace, openKeyWorkspaces, type KeyWorkspaces } from '../assembly/key-workspaces.js';
import { readMapping } from '../auth/mapping.js';
import { openResourceServer, type ResourceServer } from '../auth/open.js';
import { tokenCallersAsKeys, withWorkspaces } from '../auth/workspaces.js';
import { Workspace } from '../os/fs/workspace.js';
import type { BackgroundTasks } from '../tools/tasks/background-tasks.js';

// The server's callers: what `openRuntime` opens for the HTTP server only, in a module of its own
// so that `toolport mcp` and the CLI never load it.

/** The server's workspace, open: the keys' workspaces are checked against it. */
export function openServerWorkspace(config: Pick<Config, 'workspace'>): Promise<Workspace> {
  return Workspace.open(config.workspace);
}

export interface PrincipalsOptions {
  config: Config;
  workspace: Workspace;
  /** The tools served in the server's workspace. */
  served: ToolRegistry;
  /** The names keys' `tools` may give: the served tools and the upstreams' namespaces. */
  servedNames: readonly string[];
  /** What the exposure check weighs: the served tools and the upstreams' namespaces. */
  exposed: readonly ToolDef[];
  permissions: ServerPermissions | undefined;
  logger: Logger;
  cwd: string;
  /** Bash's background tasks, shared by every workspace. */
  tasks: BackgroundTasks;
}

/** Who may call the server: its keys and OAuth's callers, with their workspaces open. */
export interface Principals {
  /** The API keys, each `workspace` made canonical. */
  keys: KeySpec[];
  /** The workspaces of keys and of the mapping's subjects and groups. */
  workspaces: KeyWorkspaces;
  oauth: ResourceServer | undefined;
  /** The tools that change things served without authentication on a non-loopback address (TOOLPORT_ALLOW_UNAUTHENTICATED). */
  unauthenticated: string[];
}

/**
 * Reads the keys, checks the keys file lies outside the workspace, opens the keys' and the
 * mapping's workspaces, refuses an unsafe exposure (tools that change things, on a non-loopback
 * address, without keys), and reaches the OAuth issuers. Closes the workspaces it opened when a
 * later step throws.
 */
export async function openPrincipals(options: PrincipalsOptions): Promise<Principals> {
  const { config, workspace, served, permissions, logger, cwd } = options;
  const loadedKeys = await loadApiKeys(config, options.servedNames, permissions);
  await assertKeysFileOutsideWorkspace(config, workspace);
  const mapping = config.oauth?.mappingFile === undefined ? undefined : await readMapping(config.oauth.mappingFile);
  // The subjects' and groups' workspaces are opened and checked as keys' are (see auth/workspaces.ts).
  const tokenCallers = config.oauth === undefined ? [] : tokenCallersAsKeys(mapping, loadedKeys);
  const workspaces = await openKeyWorkspaces({
    config,
    server: workspace,
    served,
    keys: [...loadedKeys, ...tokenCallers],
    log: logger,
    cwd,
    tasks: options.tasks,
  });
  try {
    const keys = workspaces.keys.slice(0, loadedKeys.length);
    // With OAuth every request is authenticated, as with keys.
    const unauthenticated =
      config.oauth === undefined
        ? assertSafeExposure({ host: config.host, apiKeys: keys, allowUnauthenticated: config.allowUnauthenticated }, options.exposed)
        : [];
    // Before any upstream starts: an issuer that cannot be reached stops start-up.
    const oauth =
      config.oauth === undefined
        ? undefined
        : await openResourceServer(config.oauth, { mapping: mapping && withWorkspaces(mapping, workspaces.keys.slice(loadedKeys.length)), permissions });
    return { keys, workspaces, oauth, unauthenticated };
  } catch (err) {
    await workspaces.close();
    throw err;
  }
}
