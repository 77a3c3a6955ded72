import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ApiKey } from '../api-keys.js';
import { ToolportError } from '../core/errors.js';
import { hostAndOriginGuard } from './local-only.js';

export type { ApiKey } from '../api-keys.js';

/** The tools a scoped key may use, in the key's order. Keys with the same tools share one set. */
export type ToolScope = ReadonlySet<string>;

/** The key a request authenticated with: its label and scope, never the secret, so it is safe to log. */
export interface AuthenticatedKey {
  readonly label: string;
  /** Undefined: every served tool. */
  readonly tools: ToolScope | undefined;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The key the request authenticated with; undefined when no keys are configured or the route is open. */
    apiKey?: AuthenticatedKey;
  }
  interface FastifyInstance {
    /** Every distinct scope among the configured keys, so per-scope answers can be made once at start-up. */
    toolScopes: readonly ToolScope[];
  }
}

export interface AccessControlOptions {
  /** No keys: no authentication. */
  apiKeys: readonly ApiKey[];
  /** With keys configured, leave /docs and /openapi.json open. */
  publicDocs: boolean;
  /** The server listens on a loopback address: refuse Host and Origin headers that are not local (or allowed). */
  localOnly: boolean;
  /** Host names answered to besides local ones; when given, any other Host is refused, wherever the server listens. */
  allowedHosts?: readonly string[];
  /** Web origins allowed besides local ones, where Origin is checked (on loopback, or without keys). */
  allowedOrigins?: readonly string[];
}

const CHALLENGE = { 'www-authenticate': 'Bearer realm="toolport"' };
// RFC 6750 section 3.1: a token was sent but is not valid.
const INVALID_TOKEN_CHALLENGE = { 'www-authenticate': 'Bearer realm="toolport", error="invalid_token"' };
const BEARER = /^Bearer +(\S+) *$/i;
// Orchestrators probe these without credentials; they reveal nothing.
const OPEN_ROUTES = new Set(['/healthz', '/readyz']);

interface StoredKey {
  digest: Buffer;
  identity: AuthenticatedKey;
}

/**
 * The Host and Origin guard (see `hostAndOriginGuard`), then authentication and tool scopes, as
 * onRequest hooks in that order: a request with a foreign Host is refused before its credentials
 * are looked at. Without keys, a request from a foreign web origin is refused wherever the server
 * listens: nothing else would stop a page from running tools through a rebinding name. Open without a key:
 * /healthz, /readyz and, with `publicDocs`, /docs and /openapi.json. Routes are matched by their
 * registered pattern, never the raw URL, so `/healthz?x` or `//tools` cannot slip through; a URL
 * with no route needs a key too, so an anonymous caller cannot map the API.
 */
export function installAccessControl(app: FastifyInstance, options: AccessControlOptions): void {
  const { apiKeys, publicDocs } = options;
  const scopes = new Map<string, ToolScope>();
  const scopeOf = (tools: readonly string[] | undefined): ToolScope | undefined => {
    if (tools === undefined) return undefined;
    const id = [...tools].sort().join('\n');
    if (!scopes.has(id)) scopes.set(id, new Set(tools));
    return scopes.get(id);
  };
  const stored: StoredKey[] = apiKeys.map((k) => ({ digest: sha256(k.key), identity: Object.freeze({ label: k.label, tools: scopeOf(k.tools) }) }));
  app.decorate('toolScopes', [...scopes.values()]);
  app.decorateRequest('apiKey', undefined);

  const guard = hostAndOriginGuard({
    loopback: options.localOnly,
    authenticated: apiKeys.length > 0,
    allowedHosts: options.allowedHosts ?? [],
    allowedOrigins: options.allowedOrigins ?? [],
  });
  if (guard) app.addHook('onRequest', guard);
  if (stored.length === 0) return;
  app.addHook('onRequest', async (request) => {
    const route = request.routeOptions.url;
    if (route !== undefined && (OPEN_ROUTES.has(route) || (publicDocs && isDocsRoute(route)))) return;
    request.apiKey = authenticate(request.headers.authorization, stored);
  });
}

/**
 * Throws 403 FORBIDDEN unless the request's key may use the tool. A scoped key gets this same
 * answer for a tool that does not exist at all, so it cannot probe which tools exist beyond its scope.
 */
export function assertMayUse(request: FastifyRequest, tool: string): void {
  const key = request.apiKey;
  if (key?.tools === undefined || key.tools.has(tool)) return;
  const allowed = [...key.tools];
  throw new ToolportError('FORBIDDEN', `API key "${key.label}" may not use tool ${JSON.stringify(tool)}; it may use ${allowed.join(', ')}.`, {
    tool,
    available: allowed,
  });
}

function isDocsRoute(route: string): boolean {
  return route === '/openapi.json' || route === '/docs' || route.startsWith('/docs/');
}

function authenticate(header: string | undefined, keys: readonly StoredKey[]): AuthenticatedKey {
  if (header === undefined || header === '') {
    throw new ToolportError('UNAUTHORIZED', 'Authentication required: send an API key in the header "Authorization: Bearer <key>".', undefined, CHALLENGE);
  }
  const token = BEARER.exec(header)?.[1];
  if (token === undefined) {
    throw new ToolportError('UNAUTHORIZED', 'The Authorization header must have the form "Bearer <key>".', undefined, CHALLENGE);
  }
  const key = findKey(keys, token);
  // Says nothing about which keys exist, or how close the token came.
  if (key === undefined) throw new ToolportError('UNAUTHORIZED', 'The API key is not valid.', undefined, INVALID_TOKEN_CHALLENGE);
  return key;
}

/**
 * The key a token matches, in time that tells an attacker nothing. Both sides are hashed first, so
 * `timingSafeEqual` compares equal-length digests: the time depends neither on the token's length
 * nor on how much of a key it gets right. Every key is compared, with no early exit, so the time
 * does not say whether or which key matched either. (A Map from digest to key would be sound too,
 * since no one can choose the bytes of a SHA-256 digest, but its string comparison needs that
 * argument; the loop does not, and over a handful of keys it costs well under a microsecond.)
 */
function findKey(keys: readonly StoredKey[], token: string): AuthenticatedKey | undefined {
  const digest = sha256(token);
  let found: AuthenticatedKey | undefined;
  for (const k of keys) {
    if (timingSafeEqual(digest, k.digest)) found = k.identity;
  }
  return found;
}

function sha256(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}
