import { OAuthSetupError } from './token-refusal.js';

/** What toolport needs of an authorization server's metadata (RFC 8414 / OpenID Connect Discovery). */
export interface IssuerMetadata {
  issuer: string;
  jwksUri: string | undefined;
  authorizationEndpoint: string | undefined;
  tokenEndpoint: string | undefined;
  introspectionEndpoint: string | undefined;
  /** Grant types the server names, for the OpenAPI flows. */
  grantTypes: readonly string[];
}

/** How long start-up waits for each metadata document. */
export const DISCOVERY_TIMEOUT_MS = 10_000;

/**
 * The metadata URLs of an issuer, in the order tried: RFC 8414's (`/.well-known/...` inserted
 * before the issuer's path), OpenID Discovery's (appended to it), and OpenID's inserted form,
 * which some servers with a path in their issuer serve instead.
 */
export function metadataUrls(issuer: string): string[] {
  const url = new URL(issuer);
  const path = url.pathname === '/' ? '' : url.pathname.replace(/\/$/, '');
  return [
    `${url.origin}/.well-known/oauth-authorization-server${path}`,
    `${url.origin}${path}/.well-known/openid-configuration`,
    ...(path === '' ? [] : [`${url.origin}/.well-known/openid-configuration${path}`]),
  ];
}

/**
 * Reads an issuer's metadata at start-up. Throws `OAuthSetupError` naming TOOLPORT_OAUTH_ISSUER
 * when no document answers, or one names another issuer (RFC 8414 section 3.3: a document that
 * names another issuer must not be used, or one server could speak for another).
 */
export async function discoverIssuer(issuer: string, fetchFn: typeof fetch = fetch, timeoutMs = DISCOVERY_TIMEOUT_MS): Promise<IssuerMetadata> {
  const tried: string[] = [];
  for (const url of metadataUrls(issuer)) {
    let document: unknown;
    try {
      const response = await fetchFn(url, { headers: { accept: 'application/json' }, signal: AbortSignal.timeout(timeoutMs), redirect: 'error' });
      if (!response.ok) {
        await response.body?.cancel();
        tried.push(`${url}: HTTP ${response.status}`);
        continue;
      }
      document = await response.json();
    } catch (err) {
      tried.push(`${url}: ${(err as Error).cause instanceof Error ? ((err as Error).cause as Error).message : (err as Error).message}`);
      continue;
    }
    return parseMetadata(issuer, url, document);
  }
  throw new OAuthSetupError('TOOLPORT_OAUTH_ISSUER', `the metadata of issuer ${issuer} could not be read (${tried.join('; ')})`);
}

function parseMetadata(issuer: string, url: string, document: unknown): IssuerMetadata {
  if (typeof document !== 'object' || document === null || Array.isArray(document)) {
    throw new OAuthSetupError('TOOLPORT_OAUTH_ISSUER', `${url} is not a JSON object`);
  }
  const fields = document as Record<string, unknown>;
  if (fields.issuer !== issuer) {
    throw new OAuthSetupError(
      'TOOLPORT_OAUTH_ISSUER',
      `${url} names the issuer ${JSON.stringify(fields.issuer)}, not ${JSON.stringify(issuer)}; set the issuer exactly as the server writes it`,
    );
  }
  const text = (name: string): string | undefined => (typeof fields[name] === 'string' ? (fields[name] as string) : undefined);
  const grants = Array.isArray(fields.grant_types_supported)
    ? fields.grant_types_supported.filter((g): g is string => typeof g === 'string')
    : ['authorization_code'];
  return {
    issuer,
    jwksUri: text('jwks_uri'),
    authorizationEndpoint: text('authorization_endpoint'),
    tokenEndpoint: text('token_endpoint'),
    introspectionEndpoint: text('introspection_endpoint'),
    grantTypes: grants,
  };
}
