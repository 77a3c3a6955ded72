import { createHash, timingSafeEqual } from 'node:crypto';
import { GenerationCache } from '../core/generation-cache.js';
import type { Permissions, PermissionRules } from '../core/permissions.js';
import { toolScope, type Principal, type ServerPermissions, type ToolScope } from '../core/principal.js';

/** @deprecated The name of `Principal` before OAuth callers shared it. */
export type KeyIdentity = Principal;

/**
 * A key as configured (`TOOLPORT_API_KEYS`, the keys file): a label for logs, the secret, the tools
 * it may use (all when left out), and its workspace.
 */
export interface KeySpec {
  /** Names the key in logs, metrics and error messages; the key itself never appears there. */
  label: string;
  key: string;
  tools?: readonly string[];
  /**
   * The directory this key's file tools and Bash work in, an absolute path, which also names the
   * tools bound to it (see `Caller.workspace`); undefined: the server's workspace.
   */
  workspace?: string | undefined;
  /** Rules for what the key's calls may read, write and run, under the server's default (`ServerPermissions`). */
  permissions?: PermissionRules | undefined;
}

interface StoredKey {
  digest: Buffer;
  identity: Principal;
}

/** Tokens that matched a key, remembered so that a client sending one again is not hashed again. */
export const KNOWN_TOKENS_MAX = 4096;

/**
 * The configured API keys, held as digests, and the distinct scopes among them. Transport-neutral:
 * an adapter finds the token in its own protocol (HTTP's `Authorization: Bearer`) and asks here
 * whose it is. Each identity and each scope is made once, so answers cost no allocation.
 */
export class Keyring {
  #keys: StoredKey[] = [];
  // The tokens that matched lately. Failures are never kept.
  readonly #known = new GenerationCache<Principal>(KNOWN_TOKENS_MAX);
  #scopes: readonly ToolScope[] = [];
  readonly #permissions: ServerPermissions | undefined;

  /** Throws `PermissionRuleError` for a rule that cannot be read (checked earlier, where keys are loaded). */
  constructor(keys: readonly KeySpec[], permissions?: ServerPermissions) {
    this.#permissions = permissions;
    this.replace(keys);
  }

  /** Every distinct scope among the keys, so per-scope answers can be made once (at start-up, and after `replace`). */
  get scopes(): readonly ToolScope[] {
    return this.#scopes;
  }

  /**
   * Puts `keys` in place of the keys held, from the next `identify` on: a token of a key left out
   * matches nothing, a key whose tools changed answers with the new scope. Every remembered token
   * is forgotten, so none keeps a removed key (or an old scope) alive. A scope equal to one held
   * before is the same object again, so what was made for it (tool lists) stays valid.
   */
  replace(keys: readonly KeySpec[]): void {
    // Reused only in the same order, since a refusal lists the tools in the order of the scope.
    const previous = new Map(this.#scopes.map((scope) => [orderedId(scope), scope]));
    const scopes = new Map<string, ToolScope>();
    const scopeOf = (tools: readonly string[] | undefined, rules: PermissionRules | undefined, permissions: Permissions | undefined): ToolScope | undefined => {
      if (tools === undefined && permissions === undefined) return undefined;
      const id = `${scopeId(tools)}\0${JSON.stringify(rules ?? null)}`;
      const ordered = `${(tools ?? ['*']).join('\n')}\0${JSON.stringify(rules ?? null)}`;
      if (!scopes.has(id)) scopes.set(id, previous.get(ordered) ?? Object.assign(toolScope(tools, permissions), { [ORDERED_ID]: ordered }));
      return scopes.get(id);
    };
    this.#keys = keys.map((k) => {
      const permissions = this.#compile(k);
      const identity = Object.freeze({ label: k.label, tools: scopeOf(k.tools, k.permissions, permissions), workspace: k.workspace, permissions });
      return { digest: sha256(k.key), identity };
    });
    this.#scopes = [...scopes.values()];
    this.#known.clear();
  }

  /** The default rules, then the key's own, compiled; undefined when neither has a rule. */
  #compile(key: KeySpec): Permissions | undefined {
    if (this.#permissions === undefined) return undefined;
    const { defaults } = this.#permissions;
    return this.#permissions.compile([
      { where: 'TOOLPORT_PERMISSIONS', rules: defaults },
      { where: `key ${JSON.stringify(key.label)}`, rules: key.permissions },
    ]);
  }

  /** How many keys there are; none means no authentication. */
  get size(): number {
    return this.#keys.length;
  }

  /**
   * The identity of the key a token matches, in time that tells an attacker nothing. Both sides
   * are hashed first, so `timingSafeEqual` compares equal-length digests: the time depends neither
   * on the token's length nor on how much of a key it gets right. Every key is compared, with no
   * early exit, so the time does not say whether or which key matched either. (A Map from digest
   * to key would be sound too, since no one can choose the bytes of a SHA-256 digest, but its
   * string comparison needs that argument; the loop does not, and over a handful of keys it costs
   * well under a microsecond.)
   *
   * A token that matched is remembered (up to `KNOWN_TOKENS_MAX` of them), and found again by a
   * Map lookup: hashing it on every request took 6% of the CPU of a keyed tool call, 10% of a
   * list. The lookup compares the presented token with remembered ones only when their string
   * hashes are equal, which for a token that is not a key happens by chance alone (about one in
   * a billion), so it tells no more about a key than the constant-time check does. A token that
   * matched nothing is never remembered: sending many cannot grow the memory.
   */
  identify(token: string): Principal | undefined {
    const known = this.#known.get(token);
    if (known !== undefined) return known;
    const digest = sha256(token);
    let found: Principal | undefined;
    for (const k of this.#keys) {
      if (timingSafeEqual(digest, k.digest)) found = k.identity;
    }
    if (found !== undefined) this.#known.set(token, found);
    return found;
  }
}

/** Scopes with the same tools, in any order, are one. */
function scopeId(tools: readonly string[] | undefined): string {
  return tools === undefined ? '*' : [...tools].sort().join('\n');
}

// What a scope was made from, in its order, so a reload that keeps a key's tools and rules keeps its scope object.
const ORDERED_ID = Symbol('ordered id');

function orderedId(scope: ToolScope): string {
  return (scope as { [ORDERED_ID]?: string })[ORDERED_ID] ?? [...scope].join('\n');
}

function sha256(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}
