import type { Claims } from './identity.js';
import { audienceMessage, CLOCK_SKEW_SECONDS } from './jwt-verifier.js';
import { TokenRefusal } from './token-refusal.js';

/** The longest an introspection answer is trusted without asking again: a revoked token stops working within it. */
export const INTROSPECTION_CACHE_MS = 60_000;

export interface IntrospectionOptions {
  /** The issuer's introspection endpoint (RFC 7662). */
  endpoint: string;
  /** toolport's own client at the issuer. */
  client: { id: string; secret: string };
  issuer: string;
  /** Values of which `aud` must hold one. */
  audiences: readonly string[];
  now?: () => number;
  fetchFn?: typeof fetch;
}

/**
 * The `token_type` values (lower case) of an access token's answer: RFC 6749's `Bearer`, and the
 * kind of token as some servers write it (`access_token`, RFC 8693's URI). Any other (`refresh_token`,
 * `N_A`, `DPoP`) is refused; an answer without one is taken as the access token it was asked about.
 */
export const ACCESS_TOKEN_TYPES: ReadonlySet<string> = new Set(['bearer', 'access_token', 'urn:ietf:params:oauth:token-type:access_token']);

/** An active token's claims, and until when its answer may be reused (epoch ms). */
export interface IntrospectedToken {
  claims: Claims;
  expiresAt: number;
  /** The answer is reused until then: the earlier of its expiry and `INTROSPECTION_CACHE_MS` from now. */
  reuseUntil: number;
}

/**
 * Asks the issuer about an opaque token (RFC 7662), with toolport's own client credentials. An
 * inactive token, one of another issuer or for another audience, one bound to a key (`cnf`), or
 * one already expired is a `TokenRefusal`; an introspection endpoint that does not answer, or
 * answers something other than a JSON object, is an Error (not the token's fault).
 */
export class Introspector {
  readonly #options: IntrospectionOptions;
  readonly #now: () => number;

  constructor(options: IntrospectionOptions) {
    this.#options = options;
    this.#now = options.now ?? Date.now;
  }

  async introspect(token: string): Promise<IntrospectedToken> {
    const { endpoint, client, fetchFn = fetch } = this.#options;
    const response = await fetchFn(endpoint, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        accept: 'application/json',
        authorization: `Basic ${Buffer.from(`${encodeURIComponent(client.id)}:${encodeURIComponent(client.secret)}`).toString('base64')}`,
      },
      body: new URLSearchParams({ token, token_type_hint: 'access_token' }),
      signal: AbortSignal.timeout(5_000),
      redirect: 'error',
    });
    if (!response.ok) {
      await response.body?.cancel();
      throw new Error(`the introspection endpoint answered HTTP ${response.status}`);
    }
    const answer: unknown = await response.json();
    if (typeof answer !== 'object' || answer === null || Array.isArray(answer))
      throw new Error('the introspection endpoint answered something other than a JSON object');
    return this.#checked(answer as Record<string, unknown>);
  }

  #checked(answer: Record<string, unknown>): IntrospectedToken {
    const { issuer, audiences } = this.#options;
    if (answer.active !== true) throw new TokenRefusal('invalid_token', 'The access token is not active: it expired, was revoked, or was never issued.');
    if (answer.iss !== undefined && answer.iss !== issuer)
      throw new TokenRefusal('invalid_token', 'The access token was issued by an issuer this server does not accept.');
    const aud = typeof answer.aud === 'string' ? [answer.aud] : Array.isArray(answer.aud) ? answer.aud : [];
    if (!aud.some((a) => audiences.includes(a as string))) {
      throw new TokenRefusal('invalid_token', audienceMessage(audiences));
    }
    // A sender-constrained token (DPoP, RFC 9449; mTLS, RFC 8705) is worth nothing to a thief only
    // if its proof is checked, which a bearer resource server cannot do: taken as a bearer token,
    // a stolen one would work.
    if (answer.cnf !== undefined) {
      throw new TokenRefusal('invalid_token', 'The access token is bound to a key (cnf) and cannot be used as a bearer token here.');
    }
    // RFC 7662 section 2.2: `token_type` is OAuth's (RFC 6749 section 7.1), a bearer's `Bearer`; some
    // servers write the kind of token instead. A refresh token is never an access token here.
    const type = answer.token_type;
    if (type !== undefined && (typeof type !== 'string' || !ACCESS_TOKEN_TYPES.has(type.toLowerCase()))) {
      throw new TokenRefusal('invalid_token', `The token's type (token_type) is ${JSON.stringify(type)}, not an access token's (Bearer).`);
    }
    const now = this.#now();
    const [exp, nbf, iat] = (['exp', 'nbf', 'iat'] as const).map((claim) => numericDate(answer, claim));
    const expiresAt = exp === undefined ? now + INTROSPECTION_CACHE_MS : exp * 1000;
    if (expiresAt <= now) throw new TokenRefusal('invalid_token', 'The access token has expired.');
    // As a JWT's: not before its nbf or iat, with the clock skew.
    const ahead = (date: number | undefined): boolean => date !== undefined && date > now / 1000 + CLOCK_SKEW_SECONDS;
    if (ahead(nbf) || ahead(iat)) {
      throw new TokenRefusal('invalid_token', 'The access token is not valid yet.');
    }
    return { claims: { ...answer, iss: issuer }, expiresAt, reuseUntil: Math.min(expiresAt, now + INTROSPECTION_CACHE_MS) };
  }
}

/** A NumericDate of the answer (seconds since the epoch), when it has one; `TokenRefusal` for one that is not a number. */
function numericDate(answer: Record<string, unknown>, claim: 'exp' | 'nbf' | 'iat'): number | undefined {
  const value = answer[claim];
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isFinite(value)) throw new TokenRefusal('invalid_token', `The access token's ${claim} claim is not a number.`);
  return value;
}
