import path from 'node:path';
import { ConfigError, raw, type Env } from '../parse.js';
import { byteSizeSetting, code, itemsSetting, listSetting, setting } from '../variables.js';

// Ten times a large checkout with its dependencies and build output: stops a client filling a
// volume through Write, not normal work. A workspace that needs more sets TOOLPORT_WORKSPACE_QUOTA.
const DEFAULT_WORKSPACE_QUOTA = 10 * 1024 ** 3;

/** Which tools are served, and the directory they work in. */
export const TOOLS = {
  tools: listSetting({ name: 'TOOLPORT_TOOLS', shown: 'all', meaning: 'comma-separated names of the registered tools to serve, in that order' }),
  plugins: itemsSetting({ name: 'TOOLPORT_PLUGINS', shown: 'none', meaning: 'comma-separated modules that add tools', see: 'extending.md#plug-ins' }),
  workspace: setting(
    [
      {
        name: 'TOOLPORT_WORKSPACE',
        default: 'the current directory (`/workspace` in the image)',
        meaning: 'the only directory the file tools may touch; unset, the current directory is refused when it is `/` or the home directory',
        see: 'security.md#the-workspace',
      },
      {
        name: 'HOME',
        default: "the user's home directory",
        meaning: 'read to refuse the home directory as the workspace when `TOOLPORT_WORKSPACE` is not set; given, with `PATH`, to stdio upstreams',
        see: 'mcp.md#connecting-clients',
      },
    ],
    (env, cwd) => raw(env, 'TOOLPORT_WORKSPACE') ?? implicitWorkspace(env, cwd),
  ),
  workspaceQuota: byteSizeSetting({
    name: 'TOOLPORT_WORKSPACE_QUOTA',
    fallback: DEFAULT_WORKSPACE_QUOTA,
    shown: code('10G'),
    meaning:
      "disk each workspace (the server's, and each key's own) may use for Write and Edit to go on writing in it: bytes, or with `K`, `M`, `G`, `T` (powers of 1024); `0`: no quota",
    see: 'operations.md#disk',
  }),
} as const;

/**
 * The workspace when TOOLPORT_WORKSPACE is unset: the working directory, unless that is `/` or
 * the home directory itself. Desktop clients start `toolport mcp` from a directory the user did
 * not choose (often `/`), which would quietly make the whole file system, or every file of the
 * user, the file tools' and Bash's workspace.
 */
function implicitWorkspace(env: Env, cwd: string): string {
  const dir = path.resolve(cwd);
  const home = raw(env, 'HOME');
  const what =
    dir === path.parse(dir).root ? 'the root of the file system' : home !== undefined && dir === path.resolve(home) ? 'the home directory' : undefined;
  if (what === undefined) return cwd;
  throw new ConfigError(
    'TOOLPORT_WORKSPACE',
    '',
    '',
    `TOOLPORT_WORKSPACE is not set, and the working directory ${dir} is ${what}, which toolport does not take as its workspace by default: ` +
      'set TOOLPORT_WORKSPACE (or pass --workspace) to the directory the tools may work in.',
  );
}
