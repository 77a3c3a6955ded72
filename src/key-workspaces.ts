import { realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from 'pino';
import { ApiKeysError, type ApiKey } from './api-keys.js';
import { ToolRegistry } from './core/registry.js';
import { bashIsolationOf } from './tools/bash.js';
import { builtinTools } from './tools/index.js';
import { Workspace } from './tools/workspace.js';
import { secretFiles, type ToolsetConfig } from './toolset.js';

/** The tools each key works with: the server's, and the same tools bound to each workspace of a key's own. */
export interface KeyWorkspaces {
  /** The tools of the server's workspace: keys without one of their own use them, and lists and definitions show them. */
  registry: ToolRegistry;
  /** The same tools bound to each key's own workspace, by its canonical root (the keys' `workspace`). */
  toolsets: ReadonlyMap<string, ToolRegistry>;
  /** The keys, each `workspace` made canonical, and left out when it is the server's. */
  keys: ApiKey[];
  /** Closes every workspace opened here (not the server's, which the caller opened). */
  close(): Promise<void>;
}

export interface KeyWorkspacesOptions {
  config: ToolsetConfig;
  /** The server's workspace, open (TOOLPORT_WORKSPACE). */
  server: Workspace;
  /** The tools served in it (`createToolset`): the template of every workspace's tools. */
  served: ToolRegistry;
  keys: readonly ApiKey[];
  cwd?: string;
  /** A server's logger: each workspace is then swept of leftovers, and Bash says how it runs there. */
  log?: Logger;
}

/**
 * Opens the workspaces the keys file names and binds a copy of the served tools to each: the
 * built-in tools that touch files (and Bash) are made anew for the workspace, plug-in tools are
 * shared. Refuses, naming the key: a workspace that does not exist or is not a directory, one that
 * holds the keys file, workspaces in use that nest (a key would see into another's), and Bash
 * without the sandbox while keys have workspaces of their own (a command could read every other
 * key's files). In the sandbox, each workspace's Bash has the other workspaces in use hidden; when
 * keys without a workspace of their own share the server's with them, its tools are made anew too,
 * so that its Bash hides theirs.
 */
export async function openKeyWorkspaces(options: KeyWorkspacesOptions): Promise<KeyWorkspaces> {
  const { config, server, served, log } = options;
  const fail = (problem: string): never => {
    throw new ApiKeysError(`Invalid TOOLPORT_API_KEYS_FILE ${JSON.stringify(config.apiKeysFile ?? '')}: ${problem}.`);
  };
  const roots = new Map<string, string[]>();
  const keys: ApiKey[] = [];
  for (const key of options.keys) {
    const { workspace, ...rest } = key;
    const root = workspace === undefined ? server.root : await directory(workspace, (why) => fail(`the workspace ${JSON.stringify(workspace)} of key "${key.label}" ${why}`));
    if (root === server.root) {
      keys.push(rest);
      continue;
    }
    roots.set(root, [...(roots.get(root) ?? []), key.label]);
    keys.push({ ...rest, workspace: root });
  }
  if (roots.size === 0) return { registry: served, toolsets: new Map(), keys, close: async () => {} };

  const keysFile = config.apiKeysFile === undefined ? undefined : await realpath(path.resolve(options.cwd ?? process.cwd(), config.apiKeysFile));
  const owners = (root: string): string => `key${roots.get(root)!.length > 1 ? 's' : ''} ${roots.get(root)!.map((l) => JSON.stringify(l)).join(', ')}`;
  for (const root of roots.keys()) {
    if (keysFile !== undefined && isWithin(keysFile, root)) fail(`the workspace ${JSON.stringify(root)} of ${owners(root)} holds the keys file, where the file tools can read it; keep it outside`);
  }
  const serverInUse = keys.some((k) => k.workspace === undefined);
  const inUse = [...roots.keys(), ...(serverInUse ? [server.root] : [])];
  const name = (root: string): string => (root === server.root ? `TOOLPORT_WORKSPACE ${JSON.stringify(root)}` : `the workspace ${JSON.stringify(root)} of ${owners(root)}`);
  for (const a of inUse) {
    const b = inUse.find((other) => other !== a && isWithin(a, other));
    if (b !== undefined) fail(`${name(a)} is inside ${name(b)}, so one key could read another's files; give each key a directory of its own, none inside another`);
  }

  const opened: Workspace[] = [];
  const close = async (): Promise<void> => {
    await Promise.all(opened.splice(0).map((ws) => ws.close()));
  };
  try {
    const bind = async (ws: Workspace, sweepLeftovers: boolean): Promise<ToolRegistry> => {
      const builtins = await builtinTools({
        workspace: ws,
        bashSandbox: config.bashSandbox,
        secretFiles: secretFiles(config, options.cwd ?? process.cwd()),
        hiddenDirectories: inUse.filter((root) => root !== ws.root),
        log: log?.child({ workspace: ws.root }),
        sweepLeftovers: sweepLeftovers && log !== undefined,
      });
      const registry = new ToolRegistry();
      for (const tool of served.list()) registry.register(builtins.find((t) => t.name === tool.name) ?? tool);
      return registry;
    };
    const toolsets = new Map<string, ToolRegistry>();
    for (const root of roots.keys()) {
      const ws = await Workspace.open(root);
      opened.push(ws);
      toolsets.set(root, await bind(ws, true));
    }
    // Swept already, by createToolset.
    const registry = serverInUse ? await bind(server, false) : served;
    if (inUse.length > 1) assertBashConfined(served, [...(serverInUse ? [registry] : []), ...toolsets.values()], keys, fail);
    return { registry, toolsets, keys, close };
  } catch (err) {
    await close();
    throw err;
  }
}

/**
 * Without the sandbox, Bash reads whatever the server's user can: with keys in more than one
 * workspace, a key that may use it could read the others' files. Refuse rather than pretend.
 */
function assertBashConfined(served: ToolRegistry, registries: readonly ToolRegistry[], keys: readonly ApiKey[], fail: (problem: string) => never): void {
  if (served.get('Bash') === undefined || !keys.some((k) => k.tools === undefined || k.tools.includes('Bash'))) return;
  for (const registry of registries) {
    const isolation = bashIsolationOf(registry.get('Bash')!);
    if (isolation !== undefined && isolation.mode !== 'sandbox') {
      fail(
        `keys have workspaces of their own, but Bash runs without the sandbox (${isolation.reason}), so a key's commands could read every other key's files; ` +
          'make the sandbox work (TOOLPORT_BASH_SANDBOX, bubblewrap), or leave Bash out of TOOLPORT_TOOLS or out of the "tools" of every key',
      );
    }
  }
}

/** The canonical path of an existing directory; `fail` says why it is not one. */
async function directory(given: string, fail: (why: string) => never): Promise<string> {
  let canonical: string;
  try {
    canonical = await realpath(given);
  } catch {
    return fail('does not exist');
  }
  if (!(await stat(canonical)).isDirectory()) fail('is not a directory');
  return canonical;
}

/** True when `p` is `dir` or below it (both canonical). */
function isWithin(p: string, dir: string): boolean {
  return p === dir || p.startsWith(dir.endsWith(path.sep) ? dir : dir + path.sep);
}
