import { readdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { confineFields, DEVICES, FS_ALL, FS_READ_EXEC, grantExcept } from './landlock.js';
import { seccompFilter } from './seccomp.js';

/**
 * Where orchestrators put secrets (Docker and Kubernetes mount them at /run/secrets and
 * /var/run/secrets), hidden from every upstream.
 */
const SECRET_DIRECTORIES = ['/run/secrets', '/var/run/secrets'];
/** How `PrivateDirectories` names its directories in the system's temporary directory. */
const PRIVATE_PREFIX = 'toolport-calls-';

/** Where one confined upstream runs: what it may write, and whether it may use the network. */
export interface UpstreamPlace {
  /** The working directory its entry gives it, which it may write (never `/`); without one it runs in the server's, read-only. */
  cwd: string | undefined;
  /** Its HOME, which it may write (never `/`), when it has one. */
  home: string | undefined;
  /** Its private temporary directory (TMPDIR), which it may write. */
  tmp: string;
  /** It may open sockets (the default: servers such as GitHub's reach an API). */
  network: boolean;
}

/**
 * What a Landlock-confined stdio upstream MCP server may touch. Unlike a Bash call it runs
 * programs the operator chose, so it may read and run everything the server's user can, except
 * the `hidden` paths (the server's keys, configuration and plug-in files, the keys' workspaces,
 * /run/secrets) and the private directories of Bash calls and of other upstreams in the system's
 * temporary directory. It writes only its working directory, its HOME and a private directory of
 * its own (TMPDIR); never the server's working directory unless its entry names it (`cwd`). Landlock's scopes keep it from signalling or tracing the server, from reading
 * the server's /proc files (`environ` holds TOOLPORT_API_KEYS) and from its abstract sockets (the
 * reaper's); seccomp refuses namespaces, io_uring, keyrings, System V IPC and, with
 * `network: false`, every socket.
 *
 * The rules are made at each start, since Landlock binds a rule to the file it finds then: a
 * directory that holds a hidden path is replaced by rules on its entries of that moment, so an
 * entry made there later is not readable until the upstream starts again.
 */
export class UpstreamProfile {
  readonly #hidden: readonly string[];
  readonly #readOnly: readonly string[];
  readonly #temporary: string;

  /**
   * The profile hiding `hidden` (files or directories; missing ones are skipped) from every
   * upstream, and keeping `readOnly` (the server's directory, its code) from being written even
   * below a HOME it may write.
   */
  constructor(hidden: readonly string[], readOnly: readonly string[] = [], temporary = tmpdir()) {
    this.#hidden = [...new Set([...hidden, ...SECRET_DIRECTORIES])];
    this.#readOnly = readOnly;
    this.#temporary = temporary;
  }

  /** The paths this profile hides, besides the private directories. */
  get hidden(): readonly string[] {
    return this.#hidden;
  }

  /** The reaper's confinement fields for an upstream at `place`. */
  async fieldsFor(place: UpstreamPlace): Promise<string[]> {
    const hidden = [...this.#hidden, ...(await privateDirectories(this.#temporary))];
    const writable = [place.cwd, place.home].filter((dir): dir is string => dir !== undefined && dir !== '/');
    const rules = [
      ...(await grantExcept(['/'], FS_READ_EXEC, hidden)),
      ...DEVICES,
      // A read-only path inside a writable one is left out here and readable by the rules above.
      ...(await grantExcept(writable, FS_ALL, [...hidden, ...this.#readOnly.filter((dir) => !writable.includes(dir))])),
      { path: place.tmp, access: FS_ALL },
    ];
    return confineFields(rules, seccompFilter({ network: place.network }), place.network);
  }
}

/** The directories of calls' and upstreams' private directories (see `PrivateDirectories`), of every server. */
async function privateDirectories(temporary: string): Promise<string[]> {
  try {
    return (await readdir(temporary)).filter((name) => name.startsWith(PRIVATE_PREFIX)).map((name) => path.join(temporary, name));
  } catch {
    return [];
  }
}
