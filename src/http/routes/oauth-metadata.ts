import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ToolportError } from '../../core/errors.js';
import { sendError } from '../error-handler.js';

/** What the protected-resource metadata says; undefined in `OAuthRoutesOptions` means no OAuth. */
export interface ProtectedResource {
  /** The resource's canonical URL, without a trailing slash (TOOLPORT_PUBLIC_URL). */
  publicUrl: string;
  /** The issuers, as `authorization_servers`. */
  authorizationServers: readonly string[];
  /** The scopes toolport understands, made when the document is asked for (the tools may change). */
  scopes: () => readonly string[];
}

export interface OAuthRoutesOptions {
  resource: ProtectedResource | undefined;
  /** Keys are configured: a 404 without OAuth says a key is what to send. */
  keyed: boolean;
}

/** The protected-resource metadata URLs (RFC 9728 section 3.1: `/.well-known/oauth-protected-resource` inserted before the resource's path). */
export function metadataUrls(publicUrl: string): { metadataUrl: string; mcpMetadataUrl: string } {
  const url = new URL(publicUrl);
  const base = `${url.origin}/.well-known/oauth-protected-resource${url.pathname === '/' ? '' : url.pathname}`;
  return { metadataUrl: base, mcpMetadataUrl: `${base}/mcp` };
}

const JSON_TYPE = 'application/json; charset=utf-8';

/**
 * The OAuth discovery paths, open to anyone (a client looks here before it has credentials). With
 * OAuth, the protected-resource metadata (RFC 9728) of the server and of `/mcp`, naming the
 * authorization servers, the scopes and `bearer_methods_supported: ["header"]`. Every other
 * `/.well-known/` path, `/register` (dynamic client registration) among them, answers 404 with a
 * body that says what to do instead: toolport is no authorization server, and without OAuth a
 * client that finds no metadata stops looking for one and shows the key error.
 */
export function oauthRoutes(app: FastifyInstance, { resource, keyed }: OAuthRoutesOptions): void {
  const open = { schema: { hide: true }, config: { openRoute: true } };
  const notHere = (request: FastifyRequest, reply: FastifyReply): FastifyReply => {
    const path = request.url.split('?')[0]!.slice(0, 200);
    const instead =
      resource !== undefined
        ? `its authorization servers are named at ${metadataUrls(resource.publicUrl).metadataUrl}`
        : keyed
          ? 'it uses no OAuth: send an API key in the header "Authorization: Bearer <key>"'
          : 'it uses no OAuth and takes requests without credentials';
    return sendError(
      reply,
      new ToolportError('ROUTE_NOT_FOUND', `Route ${request.method} ${path} not found: this server is not an OAuth authorization server; ${instead}.`),
    );
  };
  if (resource !== undefined) {
    const { pathname } = new URL(resource.publicUrl);
    const base = `/.well-known/oauth-protected-resource${pathname === '/' ? '' : pathname}`;
    const document = (id: string) => async (_request: FastifyRequest, reply: FastifyReply) =>
      reply
        .type(JSON_TYPE)
        // Public, and read by browser-based clients from their own origin.
        .header('access-control-allow-origin', '*')
        .header('cache-control', 'max-age=300')
        .send({
          resource: id,
          authorization_servers: resource.authorizationServers,
          scopes_supported: resource.scopes(),
          bearer_methods_supported: ['header'],
          resource_name: 'toolport',
        });
    app.get(base, open, document(resource.publicUrl));
    app.get(`${base}/mcp`, open, document(`${resource.publicUrl}/mcp`));
  }
  app.get('/.well-known/*', open, async (request, reply) => notHere(request, reply));
  app.all('/register', open, async (request, reply) => notHere(request, reply));
}
