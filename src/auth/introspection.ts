import type { Claims } from './identity.js';
import { audienceMessage } from './jwt-verifier.js';
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
    const now = this.#now();
    const expiresAt = typeof answer.exp === 'number' ? answer.exp * 1000 : now + INTROSPECTION_CACHE_MS;
    if (expiresAt <= now) throw new TokenRefusal('invalid_token', 'The access token has expired.');
    return { claims: { ...answer, iss: issuer }, expiresAt, reuseUntil: Math.min(expiresAt, now + INTROSPECTION_CACHE_MS) };
  }
}
