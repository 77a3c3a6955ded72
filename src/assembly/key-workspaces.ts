import { realpath, stat } from 'node:fs/promises';
import { type KeySpec } from '../auth/keyring.js';
import { toolScope } from '../core/principal.js';
import path from 'node:path';
import type { Logger } from 'pino';
import { ApiKeysError } from '../config/api-keys.js';
import { ToolRegistry } from '../core/registry.js';
import { bashIsolationOf } from '../tools/bash.js';
import { builtinTools } from '../tools/index.js';
import { Workspace } from '../os/fs/workspace.js';
import type { BackgroundTasks } from '../tools/tasks/background-tasks.js';
import { secretFiles, type ToolsetConfig } from './toolset.js';

/** The tools each key works with: the server's, and the same tools bound to each workspace of a key's own. */
export interface KeyWorkspaces {
  /** The tools of the server's workspace: keys without one of their own use them, and lists and definitions show them. */
  registry: ToolRegistry;
  /** The same tools bound to each key's own workspace, by its canonical root (the keys' `workspace`). */
  toolsets: ReadonlyMap<string, ToolRegistry>;
  /** The keys, each `workspace` made canonical, and left out when it is the server's. */
  keys: KeySpec[];
  /** Closes every workspace opened here (not the server's, which the caller opened). */
  close(): Promise<void>;
  /**
   * The keys of a reload, checked against the workspaces open, each `workspace` made canonical
   * (left out when it is the server's). Opens and closes nothing. Throws `ApiKeysError`, naming
   * the key: for a workspace not opened at start-up; for the server's workspace when keys have
   * workspaces of their own and no key used the server's at start-up (the others' Bash would not
   * hide it, nor its Bash them); for a keys file now inside a workspace in use; and for a key
   * given Bash without the sandbox while keys work in two workspaces or more.
   */
  admit(keys: readonly KeySpec[]): Promise<KeySpec[]>;
}

export interface KeyWorkspacesOptions {
  config: ToolsetConfig;
  /** The server's workspace, open (TOOLPORT_WORKSPACE). */
  server: Workspace;
  /** The tools served in it (`createToolset`): the template of every workspace's tools. */
  served: ToolRegistry;
  keys: readonly KeySpec[];
  cwd?: string;
  /** A server's logger: each workspace is then swept of leftovers, and Bash says how it runs there. */
  log?: Logger;
  /** Bash's background tasks, shared by every workspace so their caps hold across them. */
  tasks?: BackgroundTasks;
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
  const cwd = options.cwd ?? process.cwd();
  const fail = failure(config);
  const start = await resolveKeys(options.keys, server, fail);
  const noneOpened = new Map<string, ToolRegistry>();
  if (start.roots.size === 0) {
    return {
      registry: served,
      toolsets: noneOpened,
      keys: start.keys,
      close: async () => {},
      admit: (keys) => admit(keys, { ...options, cwd, registry: served, toolsets: noneOpened, serverBound: true }),
    };
  }
  await assertKeysFileOutside(config, cwd, start, fail);
  const { inUse } = start;
  const name = (root: string): string =>
    root === server.root ? `TOOLPORT_WORKSPACE ${JSON.stringify(root)}` : `the workspace ${JSON.stringify(root)} of ${owners(start, root)}`;
  for (const a of inUse) {
    const b = inUse.find((other) => other !== a && isWithin(a, other));
    if (b !== undefined)
      fail(`${name(a)} is inside ${name(b)}, so one key could read another's files; give each key a directory of its own, none inside another`);
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
        bashNetwork: config.bashNetwork,
        bashLimits: config.bashLimits,
        secretFiles: secretFiles(config, cwd),
        hiddenDirectories: inUse.filter((root) => root !== ws.root),
        log: log?.child({ workspace: ws.root }),
        sweepLeftovers: sweepLeftovers && log !== undefined,
        workspaceQuota: config.workspaceQuota,
        tasks: options.tasks,
      });
      const registry = new ToolRegistry();
      for (const tool of served.list()) registry.register(builtins.find((t) => t.name === tool.name) ?? tool);
      return registry;
    };
    const toolsets = new Map<string, ToolRegistry>();
    for (const root of start.roots.keys()) {
      const ws = await Workspace.open(root);
      opened.push(ws);
      toolsets.set(root, await bind(ws, true));
    }
    // Swept already, by createToolset.
    const registry = start.serverInUse ? await bind(server, false) : served;
    if (inUse.length > 1) assertBashConfined(served, [...(start.serverInUse ? [registry] : []), ...toolsets.values()], start.keys, fail);
    const reloadWith = { ...options, cwd, registry, toolsets, serverBound: start.serverInUse };
    return { registry, toolsets, keys: start.keys, close, admit: (keys) => admit(keys, reloadWith) };
  } catch (err) {
    await close();
    throw err;
  }
}

/** The keys each workspace in use serves, and which are in use. */
interface Resolved {
  /** The keys, each `workspace` canonical, and left out when it is the server's. */
  keys: KeySpec[];
  /** The labels of the keys of each workspace of their own, by canonical root. */
  roots: Map<string, string[]>;
  /** Some key works in the server's workspace. */
  serverInUse: boolean;
  /** Every workspace in use: the keys' own, and the server's when some key works there. */
  inUse: string[];
}

async function resolveKeys(given: readonly KeySpec[], server: Workspace, fail: (problem: string) => never): Promise<Resolved> {
  const roots = new Map<string, string[]>();
  const keys: KeySpec[] = [];
  for (const key of given) {
    const { workspace, ...rest } = key;
    const root =
      workspace === undefined
        ? server.root
        : await directory(workspace, (why) => fail(`the workspace ${JSON.stringify(workspace)} of key "${key.label}" ${why}`));
    if (root === server.root) {
      keys.push(rest);
      continue;
    }
    roots.set(root, [...(roots.get(root) ?? []), key.label]);
    keys.push({ ...rest, workspace: root });
  }
  const serverInUse = keys.some((k) => k.workspace === undefined);
  return { keys, roots, serverInUse, inUse: [...roots.keys(), ...(serverInUse ? [server.root] : [])] };
}

interface AdmitOptions extends KeyWorkspacesOptions {
  cwd: string;
  /** The tools of keys without a workspace of their own. */
  registry: ToolRegistry;
  toolsets: ReadonlyMap<string, ToolRegistry>;
  /** At start-up the server's workspace was in use, so the other workspaces' Bash hides it. */
  serverBound: boolean;
}

async function admit(given: readonly KeySpec[], options: AdmitOptions): Promise<KeySpec[]> {
  const { config, server, toolsets } = options;
  const fail = failure(config);
  const next = await resolveKeys(given, server, fail);
  for (const root of next.roots.keys()) {
    if (!toolsets.has(root))
      fail(
        `the workspace ${JSON.stringify(root)} of ${owners(next, root)} was not open at start-up, and a reload opens no workspace; restart the server to add it`,
      );
  }
  if (next.serverInUse && toolsets.size > 0 && !options.serverBound) {
    const labels = next.keys.filter((k) => k.workspace === undefined).map((k) => JSON.stringify(k.label));
    fail(
      `key${labels.length > 1 ? 's' : ''} ${labels.join(', ')} would work in the server's workspace (TOOLPORT_WORKSPACE), which no key used at start-up, ` +
        "so the Bash of the keys' own workspaces does not hide it; restart the server to add such a key",
    );
  }
  await assertKeysFileOutsideWorkspace(config, server, options.cwd);
  await assertKeysFileOutside(config, options.cwd, next, fail);
  if (next.inUse.length > 1) {
    const registries = [...(next.serverInUse ? [options.registry] : []), ...[...next.roots.keys()].map((root) => toolsets.get(root)!)];
    assertBashConfined(options.served, registries, next.keys, fail);
  }
  return next.keys;
}

/**
 * A keys file inside the server's workspace could be read with the file tools, and a key scoped
 * to Read would then hold every other key: refused at start-up and on a reload.
 */
export async function assertKeysFileOutsideWorkspace(config: Pick<ToolsetConfig, 'apiKeysFile'>, ws: Workspace, cwd = process.cwd()): Promise<void> {
  if (config.apiKeysFile === undefined) return;
  if (ws.contains(await realpath(path.resolve(cwd, config.apiKeysFile)))) {
    throw new ApiKeysError(
      `Invalid TOOLPORT_API_KEYS_FILE: ${JSON.stringify(config.apiKeysFile)} is inside the workspace (TOOLPORT_WORKSPACE), where the file tools can read it; keep it outside`,
    );
  }
}

/** The keys file must lie outside every workspace of a key's own. */
async function assertKeysFileOutside(config: ToolsetConfig, cwd: string, resolved: Resolved, fail: (problem: string) => never): Promise<void> {
  if (config.apiKeysFile === undefined || resolved.roots.size === 0) return;
  const keysFile = await realpath(path.resolve(cwd, config.apiKeysFile));
  for (const root of resolved.roots.keys()) {
    if (isWithin(keysFile, root))
      fail(`the workspace ${JSON.stringify(root)} of ${owners(resolved, root)} holds the keys file, where the file tools can read it; keep it outside`);
  }
}

function failure(config: ToolsetConfig): (problem: string) => never {
  return (problem) => {
    throw new ApiKeysError(`Invalid TOOLPORT_API_KEYS_FILE ${JSON.stringify(config.apiKeysFile ?? '')}: ${problem}.`);
  };
}

function owners(resolved: Resolved, root: string): string {
  const labels = resolved.roots.get(root)!;
  return `key${labels.length > 1 ? 's' : ''} ${labels.map((l) => JSON.stringify(l)).join(', ')}`;
}

/**
 * Without the sandbox, Bash reads whatever the server's user can: with keys in more than one
 * workspace, a key that may use it could read the others' files. Refuse rather than pretend.
 */
function assertBashConfined(served: ToolRegistry, registries: readonly ToolRegistry[], keys: readonly KeySpec[], fail: (problem: string) => never): void {
  if (served.get('Bash') === undefined || !keys.some((k) => k.tools === undefined || toolScope(k.tools).has('Bash'))) return;
  for (const registry of registries) {
    const isolation = bashIsolationOf(registry.get('Bash')!);
    if (isolation !== undefined && isolation.mode !== 'sandbox') {
      fail(
        `keys have workspaces of their own, but Bash runs without the sandbox (${isolation.reason}), so a key's commands could read every other key's files; ` +
          'make a sandbox work (TOOLPORT_BASH_SANDBOX: bubblewrap, or Landlock on Linux 6.12 or later), or leave Bash out of TOOLPORT_TOOLS or out of the "tools" of every key',
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
