/** RFC 6750's error codes for a refused bearer token. */
export type BearerError = 'invalid_token' | 'insufficient_scope';

/**
 * Why an access token was refused, in RFC 6750's terms: `invalid_token` (401: not one this server
 * accepts) or `insufficient_scope` (403: valid, but it does not grant what was asked, and `scope`
 * says what would). Transport-neutral: the HTTP adapter turns it into a challenge. The message is
 * safe to show the token's holder; it never quotes the token.
 */
export class TokenRefusal extends Error {
  override readonly name = 'TokenRefusal';
  readonly error: BearerError;
  /** The scope that would grant the request, for `insufficient_scope`. */
  readonly scope: string | undefined;

  constructor(error: BearerError, message: string, scope?: string) {
    super(message);
    this.error = error;
    this.scope = scope;
  }
}

/** Raised at start-up for an OAuth setting that cannot work; the message names the variable. */
export class OAuthSetupError extends Error {
  override readonly name = 'OAuthSetupError';
  readonly variable: string;

  constructor(variable: string, message: string) {
    super(`${variable}: ${message}`);
    this.variable = variable;
  }
}
