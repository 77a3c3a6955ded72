import type { Logger } from 'pino';
import type { KeySpec } from '../auth/keyring.js';
import type { ServerPermissions } from '../core/principal.js';
import { loadApiKeys } from '../config/api-keys.js';
import type { Config } from '../config/config.js';
import type { KeyWorkspaces } from '../assembly/key-workspaces.js';

/** What a reload did: put the file's keys in place, kept the keys in use (the file was refused), or found no file to read. */
export type ReloadOutcome = 'reloaded' | 'kept' | 'no keys file';

export interface KeyReloadOptions {
  config: Pick<Config, 'apiKeys' | 'apiKeysFile'>;
  /** The names of the served tools: a key's `tools` may name only these. */
  servedTools: readonly string[];
  /** Checks start-up makes on the keys beyond the file's own (a label that would pass for an access token's caller); throws to refuse them. */
  checkKeys?: (keys: readonly KeySpec[]) => void;
  /** The default rules and what keys' rules are checked against; undefined: rules are refused (none are expected). */
  permissions?: ServerPermissions;
  /** The keys in use now, as `openKeyWorkspaces` gave them; the log of a reload says what changed since. */
  keys: readonly KeySpec[];
  /** Checks the reloaded keys against the workspaces open (`KeyWorkspaces.admit`). */
  workspaces: Pick<KeyWorkspaces, 'admit'>;
  /** Puts the keys in place (`Toolport.replaceKeys`). */
  replaceKeys(keys: readonly KeySpec[]): void;
  log: Logger;
}

/**
 * Reloads the keys (`TOOLPORT_API_KEYS` and the file of `TOOLPORT_API_KEYS_FILE`) on each call,
 * with every check of start-up: the file's keys are put in place, or, when any check fails, the
 * keys in use are kept and one warning says why (naming entries by label, never showing a key).
 * Reloads run one after another, each reading the file afresh, so the file as it is last wins.
 * The returned function never rejects.
 */
export function keysReloader(options: KeyReloadOptions): () => Promise<ReloadOutcome> {
  const { config, log } = options;
  let inUse = options.keys;
  const once = async (): Promise<ReloadOutcome> => {
    if (config.apiKeysFile === undefined) {
      log.warn('nothing to reload: no keys file is configured (TOOLPORT_API_KEYS_FILE)');
      return 'no keys file';
    }
    let keys: KeySpec[];
    try {
      const loaded = await loadApiKeys(config, options.servedTools, options.permissions);
      options.checkKeys?.(loaded);
      keys = await options.workspaces.admit(loaded);
      options.replaceKeys(keys);
    } catch (err) {
      log.warn({ reason: (err as Error).message }, 'API keys not reloaded; the keys in use are kept');
      return 'kept';
    }
    log.info({ keyLabels: keys.map((k) => k.label), ...changes(inUse, keys) }, 'API keys reloaded');
    inUse = keys;
    return 'reloaded';
  };
  let last: Promise<ReloadOutcome> = Promise.resolve('reloaded');
  return () => (last = last.then(once, once));
}

/** The labels of the keys added, removed, and kept with another key, tools or workspace. */
function changes(before: readonly KeySpec[], after: readonly KeySpec[]): { added: string[]; removed: string[]; changed: string[] } {
  const old = new Map(before.map((k) => [k.label, k]));
  const now = new Set(after.map((k) => k.label));
  const same = (a: KeySpec, b: KeySpec): boolean =>
    a.key === b.key && a.workspace === b.workspace && String(a.tools) === String(b.tools) && JSON.stringify(a.permissions) === JSON.stringify(b.permissions);
  return {
    added: after.filter((k) => !old.has(k.label)).map((k) => k.label),
    removed: before.filter((k) => !now.has(k.label)).map((k) => k.label),
    changed: after.filter((k) => old.has(k.label) && !same(old.get(k.label)!, k)).map((k) => k.label),
  };
}
