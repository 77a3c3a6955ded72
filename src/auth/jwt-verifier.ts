import { decodeJwt, decodeProtectedHeader, errors, jwtVerify, type JWTPayload, type JWTVerifyGetKey } from 'jose';
import { remoteKeySet } from './key-set.js';
import { TokenRefusal } from './token-refusal.js';

/**
 * The signature algorithms accepted: asymmetric ones only. `none` would accept any token, and an
 * HMAC algorithm would let anyone who holds the issuer's public key (everyone) sign with it.
 */
export const ACCEPTED_ALGORITHMS: readonly string[] = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'];
/** The largest token looked at; a bigger one is refused before it is parsed. */
export const MAX_TOKEN_BYTES = 8192;
/** How far apart toolport's clock and the issuer's may be for `exp`, `nbf` and `iat`. */
export const CLOCK_SKEW_SECONDS = 30;
const JWT_SHAPE = /^[\w-]+\.[\w-]+\.[\w-]*$/;

/** Whether a bearer token has the form of a JWT (three base64url parts), as opposed to a key or an opaque token. */
export function looksLikeJwt(token: string): boolean {
  return JWT_SHAPE.test(token) && token.startsWith('eyJ');
}

export interface JwtVerifierOptions {
  /** Each accepted issuer (exactly as its `iss` claim writes it) and where its keys are. */
  issuers: ReadonlyMap<string, string>;
  /** Values of which `aud` must hold one. */
  audiences: readonly string[];
  /** The clock, epoch ms (tests move it). */
  now?: () => number;
  /** The key set of a JWKS URL (`remoteKeySet(jwksUri).getKey` by default). */
  keySets?: (jwksUri: string) => JWTVerifyGetKey;
}

/** The verified claims, and when the token expires (epoch ms). */
export interface VerifiedJwt {
  claims: JWTPayload;
  /** `exp`, epoch ms; the token is accepted up to `CLOCK_SKEW_SECONDS` past it. */
  expiresAt: number;
}

/**
 * Verifies JWT access tokens (RFC 9068) against their issuers' published keys: the size, an
 * algorithm from `ACCEPTED_ALGORITHMS`, `iss` exactly one of the issuers, the signature by a key
 * of that issuer's JWKS, `aud` holding one of the audiences (RFC 8707: a token the same provider
 * minted for a sibling application is refused), `exp` present and not past, `nbf` and `iat` not
 * ahead, each with `CLOCK_SKEW_SECONDS`. Every refusal is a `TokenRefusal` that says which check
 * failed and never quotes the token.
 */
export class JwtVerifier {
  readonly #keys: ReadonlyMap<string, JWTVerifyGetKey>;
  readonly #audiences: string[];
  readonly #now: () => number;

  constructor(options: JwtVerifierOptions) {
    const keySets = options.keySets ?? ((jwksUri: string) => remoteKeySet(jwksUri, { now: options.now }).getKey);
    this.#keys = new Map([...options.issuers].map(([issuer, jwksUri]) => [issuer, keySets(jwksUri)]));
    this.#audiences = [...options.audiences];
    this.#now = options.now ?? Date.now;
  }

  async verify(token: string): Promise<VerifiedJwt> {
    if (token.length > MAX_TOKEN_BYTES) throw new TokenRefusal('invalid_token', `The access token is larger than ${MAX_TOKEN_BYTES} bytes.`);
    let alg: unknown;
    let issuer: unknown;
    try {
      alg = decodeProtectedHeader(token).alg;
      issuer = decodeJwt(token).iss;
    } catch {
      throw new TokenRefusal('invalid_token', 'The access token is not a well-formed JWT.');
    }
    if (typeof alg !== 'string' || !ACCEPTED_ALGORITHMS.includes(alg)) {
      throw new TokenRefusal('invalid_token', `The access token is signed with the algorithm ${JSON.stringify(String(alg))}, which is not accepted.`);
    }
    const keys = typeof issuer === 'string' ? this.#keys.get(issuer) : undefined;
    if (keys === undefined) throw new TokenRefusal('invalid_token', 'The access token was issued by an issuer this server does not accept.');
    try {
      const { payload, protectedHeader } = await jwtVerify(token, keys, {
        issuer: issuer as string,
        audience: this.#audiences,
        algorithms: [...ACCEPTED_ALGORITHMS],
        clockTolerance: CLOCK_SKEW_SECONDS,
        currentDate: new Date(this.#now()),
        requiredClaims: ['exp'],
      });
      // jose checks iat only with a maximum age; a token issued ahead of the clock is not valid yet.
      if (typeof payload.iat === 'number' && payload.iat > this.#now() / 1000 + CLOCK_SKEW_SECONDS) {
        throw new TokenRefusal('invalid_token', 'The access token is not valid yet.');
      }
      // The header is the sender's to write: a `typ` that is not a string is refused, not called a method on.
      const typ: unknown = protectedHeader.typ;
      if (typ !== undefined && typeof typ !== 'string') throw new TokenRefusal('invalid_token', "The token's type (typ) is not a string.");
      if (typ !== undefined && !ACCEPTED_TYPES.has(typ.toLowerCase().replace(/^application\//, ''))) {
        throw new TokenRefusal('invalid_token', `The token's type (typ) is ${JSON.stringify(typ)}, not an access token's (at+jwt).`);
      }
      // An ID token is for the client that asked for it, not for a resource server (RFC 9068 section 4; OpenID Connect).
      if (payload.nonce !== undefined || payload.at_hash !== undefined || payload.typ === 'ID') {
        throw new TokenRefusal('invalid_token', 'The token is an ID token, not an access token.');
      }
      // A token bound to a key (DPoP, mTLS: RFC 9449, RFC 8705) is worth nothing without its key, which a bearer header does not prove.
      if (payload.cnf !== undefined) {
        throw new TokenRefusal('invalid_token', 'The access token is bound to a key (cnf) and cannot be used as a bearer token here.');
      }
      return { claims: payload, expiresAt: (payload.exp as number) * 1000 };
    } catch (err) {
      if (err instanceof TokenRefusal) throw err;
      throw refusalFor(err, this.#audiences);
    }
  }
}

// RFC 9068's `at+jwt`; `JWT` (or none) is what Keycloak, Entra ID and others write on access tokens.
const ACCEPTED_TYPES = new Set(['at+jwt', 'jwt']);

function refusalFor(err: unknown, audiences: readonly string[]): TokenRefusal | Error {
  const invalid = (message: string): TokenRefusal => new TokenRefusal('invalid_token', message);
  if (err instanceof errors.JWTExpired) return invalid('The access token has expired.');
  if (err instanceof errors.JWTClaimValidationFailed) {
    // A claim of the wrong type (`"exp": "soon"`, `"aud": 7`): the token's fault, said as such.
    if (err.reason === 'invalid') return invalid(`The access token's ${err.claim} claim is not of the type it must have.`);
    switch (err.claim) {
      case 'aud':
        return invalid(audienceMessage(audiences));
      case 'nbf':
      case 'iat':
        return invalid('The access token is not valid yet.');
      case 'exp':
        return invalid('The access token has no expiry (exp).');
      default:
        return invalid(`The access token's ${err.claim} claim is not valid.`);
    }
  }
  if (err instanceof errors.JWKSNoMatchingKey) return invalid("The access token is signed with a key that is not among the issuer's published keys.");
  if (err instanceof errors.JWSSignatureVerificationFailed) return invalid("The access token's signature does not verify.");
  if (err instanceof errors.JWTInvalid || err instanceof errors.JWSInvalid || err instanceof errors.JOSEAlgNotAllowed)
    return invalid('The access token is not a well-formed JWT.');
  // A header this server cannot honour (an unknown `crit` extension, an unsupported key or algorithm): the token's doing.
  if (err instanceof errors.JOSENotSupported) return invalid('The access token uses a JOSE feature this server does not support.');
  // The issuer's keys could not be fetched (down, slow, not JSON): not the token's fault.
  return err instanceof Error ? err : new Error(String(err));
}

/** The refusal of a token for another audience, naming what it must hold (each URL once, not again with a trailing slash). */
export function audienceMessage(audiences: readonly string[]): string {
  const named = audiences.filter((a) => !(a.endsWith('/') && audiences.includes(a.slice(0, -1))));
  return `The access token was not issued for this server: its audience (aud) must include ${named.join(' or ')}.`;
}
