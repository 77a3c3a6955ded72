import type { ServerPermissions } from '../core/principal.js';
import { IdentityMapper } from './identity.js';
import { Introspector } from './introspection.js';
import { discoverIssuer, type IssuerMetadata } from './issuer-metadata.js';
import { JwtVerifier } from './jwt-verifier.js';
import { remoteKeySet, type RemoteKeySet } from './key-set.js';
import { checkMappingIssuers, EMPTY_MAPPING, readMapping, type OAuthMapping } from './mapping.js';
import { AccessTokens } from './access-tokens.js';
import { OAuthSetupError } from './token-refusal.js';

/** The OAuth settings as configuration reads them (`OAuthConfig` of src/config/config.ts, which this layer does not import). */
export interface OAuthSettings {
  issuers: readonly string[];
  /** The resource's canonical URL, without a trailing slash. */
  publicUrl: string;
  audiences: readonly string[] | undefined;
  jwksUrl: string | undefined;
  scopes: readonly string[] | undefined;
  toolsClaim: string | undefined;
  mappingFile: string | undefined;
  introspectionClient: { id: string; secret: string } | undefined;
}

/** toolport as a resource server, ready: the tokens it accepts and what its metadata says. */
export interface ResourceServer {
  tokens: AccessTokens;
  /** The resource's canonical URL, without a trailing slash. */
  publicUrl: string;
  /** Each issuer's metadata, in the configured order. */
  issuers: readonly IssuerMetadata[];
  mapping: OAuthMapping;
  /** The scopes to advertise, when configured (else the adapter derives them from the tools). */
  scopes: readonly string[] | undefined;
}

export interface OpenOptions {
  /** The default permission rules and the catalog the mapping's rules are checked against (see `IdentityOptions.permissions`). */
  permissions?: ServerPermissions;
  /** The mapping with its workspaces made canonical (see `readMapping`); read from `mappingFile` when left out. */
  mapping?: OAuthMapping;
  now?: () => number;
  fetchFn?: typeof fetch;
  /** An issuer's keys are fetched at most once per this interval, whatever the answer (default `JWKS_COOLDOWN_MS`). */
  jwksCooldownMs?: number;
}

/**
 * The audiences a token for this server may carry, by default: the public URL and its `/mcp`
 * (the resources of the two protected-resource documents), each with and without a trailing
 * slash, since clients differ in how they write a URL's root.
 */
export function defaultAudiences(publicUrl: string): string[] {
  return [publicUrl, `${publicUrl}/mcp`].flatMap((url) => [url, `${url}/`]);
}

/**
 * Start-up: reads each issuer's metadata, fetches its keys once (so no request waits for them),
 * reads the mapping, and makes the verifier. Throws `OAuthSetupError` naming the variable for an
 * issuer that cannot be reached, metadata without a JWKS, keys that cannot be fetched or hold no
 * key, or an introspection client with no endpoint to use.
 */
export async function openResourceServer(settings: OAuthSettings, options: OpenOptions = {}): Promise<ResourceServer> {
  const mapping = options.mapping ?? (settings.mappingFile === undefined ? undefined : await readMapping(settings.mappingFile));
  // Before any issuer is asked: entries that name no issuer, with several issuers, stop start-up.
  if (mapping !== undefined) checkMappingIssuers(mapping, settings.issuers, settings.mappingFile);
  const issuers = await Promise.all(settings.issuers.map((issuer) => discoverIssuer(issuer, options.fetchFn)));
  const keySets = new Map<string, RemoteKeySet>();
  for (const metadata of issuers) {
    const variable = settings.jwksUrl === undefined ? 'TOOLPORT_OAUTH_ISSUER' : 'TOOLPORT_OAUTH_JWKS_URL';
    const uri = settings.jwksUrl ?? metadata.jwksUri;
    if (uri === undefined)
      throw new OAuthSetupError('TOOLPORT_OAUTH_ISSUER', `the metadata of issuer ${metadata.issuer} names no jwks_uri; set TOOLPORT_OAUTH_JWKS_URL`);
    const keys = remoteKeySet(uri, { cooldownMs: options.jwksCooldownMs, now: options.now, fetchFn: options.fetchFn });
    try {
      await keys.reload();
    } catch (err) {
      throw new OAuthSetupError(variable, `the keys of issuer ${metadata.issuer} could not be fetched from ${uri}: ${(err as Error).message}`);
    }
    if ((keys.jwks()?.keys.length ?? 0) === 0) throw new OAuthSetupError(variable, `${uri} holds no keys`);
    keySets.set(uri, keys);
  }
  const audiences = settings.audiences ?? defaultAudiences(settings.publicUrl);
  const verifier = new JwtVerifier({
    issuers: new Map(issuers.map((m) => [m.issuer, settings.jwksUrl ?? m.jwksUri!])),
    audiences,
    now: options.now,
    keySets: (uri) => keySets.get(uri)!.getKey,
  });
  const mapper = new IdentityMapper({ mapping, toolsClaim: settings.toolsClaim, issuers: settings.issuers, permissions: options.permissions });
  const introspector = introspectorFor(settings, issuers[0]!, audiences, options);
  return {
    tokens: new AccessTokens({ verifier, mapper, introspector, now: options.now }),
    publicUrl: settings.publicUrl,
    issuers,
    mapping: mapping ?? EMPTY_MAPPING,
    scopes: settings.scopes,
  };
}

function introspectorFor(settings: OAuthSettings, first: IssuerMetadata, audiences: readonly string[], options: OpenOptions): Introspector | undefined {
  const client = settings.introspectionClient;
  if (client === undefined) return undefined;
  if (first.introspectionEndpoint === undefined) {
    throw new OAuthSetupError(
      'TOOLPORT_OAUTH_CLIENT_ID',
      `the metadata of issuer ${first.issuer} names no introspection_endpoint, so opaque tokens cannot be checked`,
    );
  }
  return new Introspector({ endpoint: first.introspectionEndpoint, client, issuer: first.issuer, audiences, now: options.now, fetchFn: options.fetchFn });
}
