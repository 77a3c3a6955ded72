import type { IdentityMapper, TokenPrincipal } from './identity.js';
import type { Introspector } from './introspection.js';
import { IntrospectionAdmission } from './introspection-admission.js';
import { CLOCK_SKEW_SECONDS, looksLikeJwt, MAX_TOKEN_BYTES, type JwtVerifier } from './jwt-verifier.js';
import { TokenCache } from './token-cache.js';
import { TokenRefusal } from './token-refusal.js';

/** How long an opaque token the issuer called inactive is refused without asking it again. */
export const REFUSAL_CACHE_MS = 10_000;

export interface AccessTokensOptions {
  verifier: JwtVerifier;
  mapper: IdentityMapper;
  /** Asks the issuer about tokens that are not JWTs; without it, only JWTs are access tokens. */
  introspector?: Introspector | undefined;
  now?: () => number;
}

/**
 * The access tokens toolport accepts, transport-neutral: a verified token's caller is remembered
 * until the token expires (bounded), so a token costs a Map lookup after its first request. A
 * token verified by several requests at once is verified once. Adapters look for a token in their
 * protocol, ask `cached` and then, after their keys, `verify`.
 */
export class AccessTokens {
  readonly #verifier: JwtVerifier;
  readonly #mapper: IdentityMapper;
  readonly #introspector: Introspector | undefined;
  readonly #now: () => number;
  readonly #known = new TokenCache<TokenPrincipal>();
  readonly #refused = new TokenCache<TokenRefusal>();
  readonly #pending = new Map<string, Promise<TokenPrincipal>>();
  readonly #admission: IntrospectionAdmission;

  constructor(options: AccessTokensOptions) {
    this.#verifier = options.verifier;
    this.#mapper = options.mapper;
    this.#introspector = options.introspector;
    this.#now = options.now ?? Date.now;
    this.#admission = new IntrospectionAdmission(this.#now);
  }

  /** The caller of a token verified before and not expired since; undefined otherwise. */
  cached(token: string): TokenPrincipal | undefined {
    return this.#known.get(token, this.#now());
  }

  /**
   * Verifies a token and names its caller; rejects with `TokenRefusal` for a token that is not
   * valid here, with an Error when the issuer could not be asked, and with RATE_LIMITED or
   * QUEUE_FULL when `from` (the client's address) has used its budget or share of introspections
   * (see `IntrospectionAdmission`). Undefined for a token this does not handle (not a JWT, and no
   * introspection): the adapter's keys are all that is left.
   */
  verify(token: string, from?: string): Promise<TokenPrincipal> | undefined {
    const jwt = looksLikeJwt(token);
    if (!jwt && this.#introspector === undefined) return undefined;
    // Bounded as a JWT is, before anything is asked: the issuer is not sent whatever a client sends.
    if (!jwt && token.length > MAX_TOKEN_BYTES)
      return Promise.reject(new TokenRefusal('invalid_token', `The access token is larger than ${MAX_TOKEN_BYTES} bytes.`));
    const pending = this.#pending.get(token);
    if (pending !== undefined) return pending;
    const refused = this.#refused.get(token, this.#now());
    if (refused !== undefined) return Promise.reject(refused);
    const verified = (jwt ? this.#verifyJwt(token) : this.#admission.run(from, () => this.#introspect(token))).finally(() => this.#pending.delete(token));
    this.#pending.set(token, verified);
    return verified;
  }

  async #verifyJwt(token: string): Promise<TokenPrincipal> {
    const { claims, expiresAt } = await this.#verifier.verify(token);
    const identity = this.#mapper.identify(claims, expiresAt);
    // As long as verification would accept it again: a cached answer and a new one never differ.
    this.#known.set(token, identity, expiresAt + CLOCK_SKEW_SECONDS * 1000);
    return identity;
  }

  async #introspect(token: string): Promise<TokenPrincipal> {
    try {
      const { claims, expiresAt, reuseUntil } = await this.#introspector!.introspect(token);
      const identity = this.#mapper.identify(claims, expiresAt);
      this.#known.set(token, identity, reuseUntil);
      return identity;
    } catch (err) {
      if (err instanceof TokenRefusal) this.#refused.set(token, err, this.#now() + REFUSAL_CACHE_MS);
      throw err;
    }
  }
}
