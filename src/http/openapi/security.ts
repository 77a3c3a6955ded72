import type { FastifyDynamicSwaggerOptions } from '@fastify/swagger';
import type { IssuerMetadata } from '../../auth/issuer-metadata.js';

type SecuritySchemes = NonNullable<NonNullable<NonNullable<FastifyDynamicSwaggerOptions['openapi']>['components']>['securitySchemes']>;

/** The document's security schemes, and the requirement that any one of them (or none, on a server without keys) meets. */
export interface SecurityDeclaration {
  schemes: SecuritySchemes;
  requirements: Array<Record<string, string[]>>;
}

/**
 * The bearer key scheme, and with OAuth an `oauth2` scheme with the first issuer's endpoints: the
 * authorization code flow (PKCE) where it has an authorization endpoint, client credentials where
 * it names that grant. Swagger UI's "Authorize" and generated clients read them.
 */
export function securitySchemes(oauth: { issuer: IssuerMetadata; scopes: readonly string[] } | undefined): SecurityDeclaration {
  const bearerAuth = { type: 'http' as const, scheme: 'bearer', description: 'An API key, when the server is configured with keys.' };
  if (oauth === undefined) return { schemes: { bearerAuth }, requirements: [{}, { bearerAuth: [] }] };
  const { issuer, scopes } = oauth;
  const scopeTable = Object.fromEntries(scopes.map((scope) => [scope, scope === 'tools:*' ? 'Every tool.' : `The tools ${scope} names.`]));
  const flows: { authorizationCode?: { authorizationUrl: string; tokenUrl: string; scopes: Record<string, string> }; clientCredentials?: { tokenUrl: string; scopes: Record<string, string> } } = {};
  if (issuer.authorizationEndpoint !== undefined && issuer.tokenEndpoint !== undefined && issuer.grantTypes.includes('authorization_code')) {
    flows.authorizationCode = { authorizationUrl: issuer.authorizationEndpoint, tokenUrl: issuer.tokenEndpoint, scopes: scopeTable };
  }
  if (issuer.tokenEndpoint !== undefined && issuer.grantTypes.includes('client_credentials')) {
    flows.clientCredentials = { tokenUrl: issuer.tokenEndpoint, scopes: scopeTable };
  }
  return {
    schemes: {
      bearerAuth: { ...bearerAuth, description: 'An API key, or an access token of the authorization server (a JWT).' },
      oauth2: { type: 'oauth2' as const, description: `Access tokens of ${issuer.issuer}, with this server's URL as their audience (RFC 8707).`, flows },
    },
    requirements: [{ bearerAuth: [] }, { oauth2: [] }],
  };
}
