import cors from '@fastify/cors';
import type { FastifyInstance } from 'fastify';

/** Request headers a page may send: the key, the body's type, its own request id, and MCP's Streamable HTTP headers. */
export const CORS_ALLOWED_HEADERS = [
  'Authorization',
  'Content-Type',
  'X-Request-Id',
  'Mcp-Protocol-Version',
  'Mcp-Method',
  'Mcp-Name',
  'Mcp-Session-Id',
  'Last-Event-ID',
] as const;

/** Response headers a page may read besides the safelisted ones. */
export const CORS_EXPOSED_HEADERS = [
  'X-Request-Id',
  'Retry-After',
  'X-RateLimit-Limit',
  'X-RateLimit-Remaining',
  'X-RateLimit-Reset',
  'WWW-Authenticate',
] as const;

/** How long a browser may reuse a preflight's answer, in seconds. */
export const CORS_MAX_AGE_S = 600;

/**
 * Opt-in CORS for pages served from exactly `origins` (Open WebUI's browser-side tool servers, a
 * web app of one's own); nothing when the list is empty. Install it after the request-id hook and
 * before the Host and Origin guard and authentication: its onRequest hook answers a preflight
 * from a listed origin at once (204 with the Access-Control-Allow-* headers), since a browser
 * sends no credentials on a preflight, and adds Access-Control-Allow-Origin to every other answer
 * to such a page, refusals included, so the page can read why. A request from any other origin
 * gets no CORS headers and goes on as before: the guard refuses it where it checks Origin, and
 * the browser keeps its answer from the page elsewhere. The guard must let these same origins
 * through (see `buildApp`), or the preflight would succeed and the call be refused.
 */
export async function installCors(app: FastifyInstance, origins: readonly string[]): Promise<void> {
  if (origins.length === 0) return;
  const allowed = new Set(origins.map((origin) => origin.toLowerCase()));
  await app.register(cors, {
    // true reflects the request's Origin; false leaves the request alone (no CORS headers).
    origin: (origin, callback) => callback(null, origin !== undefined && allowed.has(origin.toLowerCase())),
    methods: ['GET', 'POST', 'DELETE'],
    allowedHeaders: [...CORS_ALLOWED_HEADERS],
    exposedHeaders: [...CORS_EXPOSED_HEADERS],
    maxAge: CORS_MAX_AGE_S,
    // A listed page's OPTIONS without Access-Control-Request-Method gets the same 204, not the
    // plugin's plain-text 400, which would be the only answer not in the error-body shape.
    strictPreflight: false,
  });
}
