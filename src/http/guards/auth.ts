import type { FastifyInstance } from 'fastify';
import { ToolportError } from '../../core/errors.js';
import type { KeyIdentity, Keyring, ToolScope } from '../../core/keyring.js';
import { hostAndOriginGuard } from './local-only.js';
import { TOOLS_DOCUMENT_URL } from '../openapi/tools-document.js';

export type { ToolScope } from '../../core/keyring.js';

/** The key a request authenticated with: its label and scope, never the secret, so it is safe to log. */
export type AuthenticatedKey = KeyIdentity;

declare module 'fastify' {
  interface FastifyRequest {
    /** The key the request authenticated with; undefined when no keys are configured or the route is open. */
    apiKey?: AuthenticatedKey;
  }
  interface FastifyInstance {
    /** Every distinct scope among the keys in use, so per-scope answers can be made once (at start-up, and after a reload). */
    toolScopes: readonly ToolScope[];
  }
}

/**
 * A 401 with the `WWW-Authenticate` challenge that goes with it. The challenge is HTTP's, so it
 * lives here, in the HTTP adapter, not in the core's catalog.
 */
export class UnauthorizedError extends ToolportError {
  readonly challenge: string;

  constructor(message: string, challenge: string) {
    super('UNAUTHORIZED', message);
    this.challenge = challenge;
  }
}

export interface AccessControlOptions {
  /** The configured keys; none: no authentication. */
  keyring: Keyring;
  /** With keys configured, leave /docs and /openapi.json open. */
  publicDocs: boolean;
  /** The server listens on a loopback address: refuse Host and Origin headers that are not local (or allowed). */
  localOnly: boolean;
  /** Host names answered to besides local ones; when given, any other Host is refused, wherever the server listens. */
  allowedHosts?: readonly string[];
  /** Web origins allowed besides local ones, where Origin is checked (on loopback, or without keys). */
  allowedOrigins?: readonly string[];
}

const CHALLENGE = 'Bearer realm="toolport"';
// RFC 6750 section 3.1: a token was sent but is not valid.
const INVALID_TOKEN_CHALLENGE = 'Bearer realm="toolport", error="invalid_token"';
const BEARER = /^Bearer +(\S+) *$/i;
// Orchestrators probe these without credentials; they reveal nothing.
const OPEN_ROUTES = new Set(['/healthz', '/readyz']);

/**
 * The Host and Origin guard (see `hostAndOriginGuard`), then authentication (who the caller is;
 * what it may use is the gateway's to check), as onRequest hooks in that order: a request with a foreign Host is refused before its credentials
 * are looked at. Without keys, a request from a foreign web origin is refused wherever the server
 * listens: nothing else would stop a page from running tools through a rebinding name. Open without a key:
 * /healthz, /readyz and, with `publicDocs`, /docs, /openapi.json and /openapi.tools.json. Routes are matched by their
 * registered pattern, never the raw URL, so `/healthz?x` or `//tools` cannot slip through; a URL
 * with no route needs a key too, so an anonymous caller cannot map the API.
 */
export function installAccessControl(app: FastifyInstance, options: AccessControlOptions): void {
  const { keyring, publicDocs } = options;
  // A getter: a reload of the keys (`Keyring.replace`) changes the scopes.
  app.decorate('toolScopes', { getter: () => keyring.scopes });
  app.decorateRequest('apiKey', undefined);

  const guard = hostAndOriginGuard({
    loopback: options.localOnly,
    authenticated: keyring.size > 0,
    allowedHosts: options.allowedHosts ?? [],
    allowedOrigins: options.allowedOrigins ?? [],
  });
  if (guard) app.addHook('onRequest', guard);
  if (keyring.size === 0) return;
  // A callback hook: no promise per request on the hot path.
  app.addHook('onRequest', (request, _reply, done) => {
    const route = request.routeOptions.url;
    if (route !== undefined && (OPEN_ROUTES.has(route) || (publicDocs && isDocsRoute(route)))) return done();
    try {
      request.apiKey = authenticate(request.headers.authorization, keyring);
    } catch (err) {
      return done(err as UnauthorizedError);
    }
    done();
  });
}

function isDocsRoute(route: string): boolean {
  return route === '/openapi.json' || route === TOOLS_DOCUMENT_URL || route === '/docs' || route.startsWith('/docs/');
}

function authenticate(header: string | undefined, keyring: Keyring): AuthenticatedKey {
  if (header === undefined || header === '') {
    throw new UnauthorizedError('Authentication required: send an API key in the header "Authorization: Bearer <key>".', CHALLENGE);
  }
  const token = BEARER.exec(header)?.[1];
  if (token === undefined) throw new UnauthorizedError('The Authorization header must have the form "Bearer <key>".', CHALLENGE);
  const key = keyring.identify(token);
  // Says nothing about which keys exist, or how close the token came.
  if (key === undefined) throw new UnauthorizedError('The API key is not valid.', INVALID_TOKEN_CHALLENGE);
  return key;
}
