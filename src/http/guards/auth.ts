import type { FastifyInstance, FastifyRequest, preHandlerHookHandler } from 'fastify';
import { ToolportError } from '../../core/errors.js';
import type { Keyring } from '../../auth/keyring.js';
import type { Principal, ToolScope } from '../../core/principal.js';
import type { AccessTokens } from '../../auth/access-tokens.js';
import { isTokenPrincipal } from '../../auth/identity.js';
import { TokenRefusal } from '../../auth/token-refusal.js';
import { hostAndOriginGuard } from './local-only.js';
import { TOOLS_DOCUMENT_URL } from '../openapi/tools-document.js';

export type { ToolScope } from '../../core/principal.js';

/** @deprecated The name of `Principal` on a request before OAuth callers shared it. */
export type AuthenticatedKey = Principal;

declare module 'fastify' {
  interface FastifyRequest {
    /** Who the request authenticated as (a key's or an access token's caller); undefined when no authentication is configured or the route is open. */
    principal?: Principal;
    /** @deprecated `principal`, by the name it had when only keys were callers (read-only). */
    readonly apiKey?: Principal;
  }
  interface FastifyInstance {
    /** Every distinct scope among the keys in use, so per-scope answers can be made once (at start-up, and after a reload). */
    toolScopes: readonly ToolScope[];
  }
}

/**
 * A refusal with the `WWW-Authenticate` challenge that goes with it: a 401 (no valid credentials)
 * or, for an access token that does not grant the tool, a 403 `insufficient_scope` (RFC 6750
 * section 3.1). The challenge is HTTP's, so it lives here, in the HTTP adapter, not in the core's catalog.
 */
export class UnauthorizedError extends ToolportError {
  readonly challenge: string;

  constructor(message: string, challenge: string, code: 'UNAUTHORIZED' | 'FORBIDDEN' = 'UNAUTHORIZED', details?: unknown) {
    super(code, message, details);
    this.challenge = challenge;
  }
}

/** toolport as an OAuth resource server, as the guard needs it. */
export interface TokenGuardOptions {
  tokens: AccessTokens;
  /** The protected-resource metadata URL of the whole server, for the challenges. */
  metadataUrl: string;
  /** The protected-resource metadata URL of `/mcp`, for the challenges of `/mcp`. */
  mcpMetadataUrl: string;
}

export interface AccessControlOptions {
  /** The configured keys; none and no `oauth`: no authentication. */
  keyring: Keyring;
  /** Access tokens of the configured issuers, beside the keys; undefined: keys only. */
  oauth?: TokenGuardOptions | undefined;
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
 * /healthz, /readyz, routes marked `openRoute` (the OAuth discovery documents) and, with `publicDocs`, /docs, /openapi.json and /openapi.tools.json. Routes are matched by their
 * registered pattern, never the raw URL, so `/healthz?x` or `//tools` cannot slip through; a URL
 * with no route needs a key too, so an anonymous caller cannot map the API.
 *
 * With `oauth`, a bearer token is an access token or a key: a token verified before (until it
 * expires) or a key is found by a Map lookup; else a JWT is verified against its issuer's keys
 * (see `AccessTokens`). A 401 then names the protected-resource metadata (`resource_metadata`),
 * and a token that does not grant the tool a route calls gets a 403 `insufficient_scope` naming
 * the scope that would (for `/mcp`, once its body is read).
 */
export function installAccessControl(app: FastifyInstance, options: AccessControlOptions): void {
  const { keyring, publicDocs, oauth } = options;
  // A getter: a reload of the keys (`Keyring.replace`) changes the scopes.
  app.decorate('toolScopes', { getter: () => keyring.scopes });
  app.decorateRequest('principal', undefined);
  app.decorateRequest('apiKey', {
    getter(this: FastifyRequest) {
      return this.principal;
    },
  });

  const guard = hostAndOriginGuard({
    loopback: options.localOnly,
    authenticated: keyring.size > 0 || oauth !== undefined,
    allowedHosts: options.allowedHosts ?? [],
    allowedOrigins: options.allowedOrigins ?? [],
  });
  if (guard) app.addHook('onRequest', guard);
  if (keyring.size === 0 && oauth === undefined) return;
  const challenges = oauth === undefined ? keyChallenges() : tokenChallenges(oauth, keyring.size > 0);
  const tokens = oauth?.tokens;
  // A callback hook: no promise per request on the hot path (a token checked before is a Map lookup).
  app.addHook('onRequest', (request, _reply, done) => {
    const route = request.routeOptions.url;
    if (request.routeOptions.config.openRoute === true) return done();
    if (route !== undefined && (OPEN_ROUTES.has(route) || (publicDocs && isDocsRoute(route)))) return done();
    const header = request.headers.authorization;
    if (header === undefined || header === '') return refuse(request, challenges.missing(route), done);
    const token = BEARER.exec(header)?.[1];
    if (token === undefined) return refuse(request, challenges.malformed(route), done);
    const known = tokens?.cached(token) ?? (keyring.size > 0 ? keyring.identify(token) : undefined);
    if (known !== undefined) {
      request.principal = known;
      return done(oauth === undefined ? undefined : toolRefusal(request, known, oauth));
    }
    if (tokens === undefined) return refuse(request, challenges.notValid(route), done);
    // Neither a key nor a token seen before: counted against the client address's budget before
    // anything is asked of the issuer (a JWKS fetch, an introspection), or refused if it is spent.
    countAddress(request, (spent) => {
      if (spent !== undefined) return done(spent);
      const verifying = tokens.verify(token, request.ip);
      if (verifying === undefined) return done(challenges.notValid(route));
      verifying.then(
        (identity) => {
          request.principal = identity;
          done(toolRefusal(request, identity, oauth!));
        },
        (err: unknown) => done(err instanceof TokenRefusal ? challenges.refused(route, err) : (err as Error)),
      );
    });
  });
  // A tool call over MCP names its tool in the body: checked once the body is read, on /mcp only
  // (a route-level hook, so no other route pays for it).
  if (oauth !== undefined) {
    const checkMcpTool = (request: FastifyRequest, _reply: unknown, done: (err?: Error) => void): void => {
      if (!isTokenPrincipal(request.principal)) return done();
      const tool = mcpToolCalled(request.body);
      done(tool === undefined ? undefined : insufficientScope(request.principal, tool, oauth.mcpMetadataUrl));
    };
    app.addHook('onRoute', (route) => {
      if (route.url !== '/mcp' || route.method !== 'POST') return;
      const own = route.preHandler;
      route.preHandler = own === undefined ? [checkMcpTool] : [...(Array.isArray(own) ? own : [own]), checkMcpTool as preHandlerHookHandler];
    });
  }
}

/**
 * Counts a request that no key or known token vouches for against its client address's rate limit
 * (the same count as every request without a key: `countRateLimited`), and answers the refusal
 * when the address's budget is spent. Refused requests are counted too, so a client cannot send
 * 401s, or made-up tokens, without bound; without a rate limit, nothing is counted.
 */
function countAddress(request: FastifyRequest, then: (spent: Error | undefined) => void): void {
  const count = request.server.countRateLimited;
  if (count === undefined) return then(undefined);
  count(request).then(then, () => then(undefined));
}

/** A 401, counted against the address first: past its budget, the 429 instead. */
function refuse(request: FastifyRequest, refusal: Error, done: (err?: Error) => void): void {
  countAddress(request, (spent) => done(spent ?? refusal));
}

function isDocsRoute(route: string): boolean {
  return route === '/openapi.json' || route === TOOLS_DOCUMENT_URL || route === '/docs' || route === '/docs/' || route.startsWith('/docs/');
}

interface Challenges {
  missing(route: string | undefined): UnauthorizedError;
  malformed(route: string | undefined): UnauthorizedError;
  /** Neither a key nor a token this server can check. */
  notValid(route: string | undefined): UnauthorizedError;
  refused(route: string | undefined, refusal: TokenRefusal): UnauthorizedError;
}

/** Keys only: the answers as before OAuth. */
function keyChallenges(): Challenges {
  return {
    missing: () => new UnauthorizedError('Authentication required: send an API key in the header "Authorization: Bearer <key>".', CHALLENGE),
    malformed: () => new UnauthorizedError('The Authorization header must have the form "Bearer <key>".', CHALLENGE),
    // Says nothing about which keys exist, or how close the token came.
    notValid: () => new UnauthorizedError('The API key is not valid.', INVALID_TOKEN_CHALLENGE),
    refused: (_route, refusal) => new UnauthorizedError(refusal.message, INVALID_TOKEN_CHALLENGE),
  };
}

/** With OAuth: each 401 names the protected-resource metadata, where a client finds the authorization servers (RFC 9728 section 5.1). */
function tokenChallenges(oauth: TokenGuardOptions, keyed: boolean): Challenges {
  const metadataOf = (route: string | undefined): string => (route === '/mcp' ? oauth.mcpMetadataUrl : oauth.metadataUrl);
  const credential = keyed ? 'an OAuth access token or an API key' : 'an OAuth access token';
  return {
    missing: (route) =>
      new UnauthorizedError(
        `Authentication required: send ${credential} in the header "Authorization: Bearer <token>"; the authorization servers are named at ${metadataOf(route)}.`,
        `Bearer realm="toolport", resource_metadata="${metadataOf(route)}"`,
      ),
    malformed: (route) =>
      new UnauthorizedError(
        'The Authorization header must have the form "Bearer <token>".',
        `Bearer realm="toolport", resource_metadata="${metadataOf(route)}"`,
      ),
    notValid: (route) => invalidToken(keyed ? 'The API key is not valid.' : 'The access token is not valid: it is not a JWT.', metadataOf(route)),
    refused: (route, refusal) => invalidToken(refusal.message, metadataOf(route)),
  };
}

function invalidToken(message: string, metadataUrl: string): UnauthorizedError {
  return new UnauthorizedError(
    message,
    `Bearer realm="toolport", error="invalid_token", error_description="${quotable(message)}", resource_metadata="${metadataUrl}"`,
  );
}

/** For a token's caller, the 403 for a tool the route calls that its token does not grant; undefined otherwise (a key's scope is the gateway's to check). */
function toolRefusal(request: FastifyRequest, identity: Principal, oauth: TokenGuardOptions): UnauthorizedError | undefined {
  if (!isTokenPrincipal(identity) || identity.tools === undefined) return undefined;
  const tool = request.routeOptions.url === '/tools/:name' ? (request.params as { name?: string }).name : undefined;
  return tool === undefined ? undefined : insufficientScope(identity, tool, request.routeOptions.url === '/mcp' ? oauth.mcpMetadataUrl : oauth.metadataUrl);
}

function insufficientScope(identity: Principal, tool: string, metadataUrl: string): UnauthorizedError | undefined {
  if (identity.tools === undefined || identity.tools.has(tool)) return undefined;
  const scope = `tools:${tool}`;
  const message = `The access token does not grant the tool ${JSON.stringify(tool)}: it needs the scope "${scope}" (or "tools:*").`;
  return new UnauthorizedError(
    message,
    `Bearer realm="toolport", error="insufficient_scope", scope="${quotable(scope)}", error_description="${quotable(message)}", resource_metadata="${metadataUrl}"`,
    'FORBIDDEN',
    { tool, scope },
  );
}

/** The tool a JSON-RPC tools/call names, or undefined for anything else. */
function mcpToolCalled(body: unknown): string | undefined {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return undefined;
  const { method, params } = body as { method?: unknown; params?: unknown };
  if (method !== 'tools/call' || typeof params !== 'object' || params === null) return undefined;
  const name = (params as { name?: unknown }).name;
  return typeof name === 'string' ? name : undefined;
}

/** A quoted-string's content for a challenge: no quote or backslash, printable ASCII only (RFC 6750 section 3). */
function quotable(text: string): string {
  return text.replace(/["\\]/g, "'").replace(/[^\x20-\x7e]/g, '?');
}
