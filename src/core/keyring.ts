import { createHash, timingSafeEqual } from 'node:crypto';

/** The tools a scoped key may use, in the key's order. Keys with the same tools share one set. */
export type ToolScope = ReadonlySet<string>;

/** A key as configured: a label for logs, the secret, the tools it may use (all when left out), and its workspace. */
export interface KeySpec {
  label: string;
  key: string;
  tools?: readonly string[];
  /** Names the set of tools bound to the key's own workspace (see `Caller.workspace`); undefined: the server's. */
  workspace?: string | undefined;
}

/** Who a key belongs to: its label and scope, never the secret, so it is safe to log. */
export interface KeyIdentity {
  readonly label: string;
  /** Undefined: every served tool. */
  readonly tools: ToolScope | undefined;
  /** The key's own workspace; undefined: the server's. */
  readonly workspace: string | undefined;
}

interface StoredKey {
  digest: Buffer;
  identity: KeyIdentity;
}

/**
 * The configured API keys, held as digests, and the distinct scopes among them. Transport-neutral:
 * an adapter finds the token in its own protocol (HTTP's `Authorization: Bearer`) and asks here
 * whose it is. Each identity and each scope is made once, so answers cost no allocation.
 */
export class Keyring {
  readonly #keys: StoredKey[];
  /** Every distinct scope among the keys, so per-scope answers can be made once at start-up. */
  readonly scopes: readonly ToolScope[];

  constructor(keys: readonly KeySpec[]) {
    const scopes = new Map<string, ToolScope>();
    const scopeOf = (tools: readonly string[] | undefined): ToolScope | undefined => {
      if (tools === undefined) return undefined;
      const id = [...tools].sort().join('\n');
      if (!scopes.has(id)) scopes.set(id, new Set(tools));
      return scopes.get(id);
    };
    this.#keys = keys.map((k) => ({ digest: sha256(k.key), identity: Object.freeze({ label: k.label, tools: scopeOf(k.tools), workspace: k.workspace }) }));
    this.scopes = [...scopes.values()];
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
   */
  identify(token: string): KeyIdentity | undefined {
    const digest = sha256(token);
    let found: KeyIdentity | undefined;
    for (const k of this.#keys) {
      if (timingSafeEqual(digest, k.digest)) found = k.identity;
    }
    return found;
  }
}

function sha256(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}
