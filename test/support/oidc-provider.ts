import type { OAuthSettings } from '#src/auth/open.js';
import { createHash, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT, type JWK } from 'jose';

/** The scopes the test authorization server grants for toolport's resource (and any other resource indicator). */
export const RESOURCE_SCOPES = ['tools:*', 'tools:Echo', 'tools:NoArgs', 'tools:Read', 'tools:Write', 'tools:Glob', 'tools:github__*', 'reader'];

/** The confidential client that gets tokens through client credentials. */
export const SERVICE_CLIENT = { id: 'service', secret: 'service-secret-that-is-long-enough-for-hs256' };
/** A confidential client whose tokens carry 9000 bytes of padding. */
export const HUGE_CLIENT = { id: 'huge', secret: 'huge-secret-that-is-long-enough-for-hs256-signing' };
/** A confidential client whose access tokens, resource indicator or not, are opaque (introspected, RFC 7662) rather than JWTs. */
export const OPAQUE_CLIENT = { id: 'opaque', secret: 'opaque-secret-that-is-long-enough-for-hs256-signing' };
/** toolport's own confidential client, which gets no tokens but may introspect them. */
export const INTROSPECTION_CLIENT = { id: 'toolport', secret: 'toolport-secret-that-is-long-enough-for-hs256' };
/** The public client of the authorization code flow (PKCE, no secret). */
export const APP_CLIENT = { id: 'app', redirectUri: 'http://127.0.0.1:1/callback' };
/** The subject the test's "browser" logs in as. */
export const TEST_USER = 'alice';

// oidc-provider ships no types: the little of it used here.
interface Interaction {
  prompt: { name: string; details: { missingOIDCScope?: string[]; missingResourceScopes?: Record<string, string[]> } };
  params: Record<string, string>;
  session?: { accountId: string };
  grantId?: string;
}
interface GrantInstance {
  addOIDCScope(scope: string): void;
  addResourceScope(resource: string, scope: string): void;
  save(): Promise<string>;
}
interface ProviderInstance {
  callback(): (req: IncomingMessage, res: ServerResponse) => void;
  interactionDetails(req: IncomingMessage, res: ServerResponse): Promise<Interaction>;
  interactionFinished(req: IncomingMessage, res: ServerResponse, result: object, options?: object): Promise<void>;
  Grant: { new (init: { accountId: string; clientId: string }): GrantInstance; find(id: string): Promise<GrantInstance | undefined> };
}
type ProviderClass = new (issuer: string, configuration: object) => ProviderInstance;

/** A real OAuth 2.1 / OpenID authorization server (oidc-provider) on a loopback port, for the tests. */
export interface TestIssuer {
  /** `http://127.0.0.1:<port>`, as its metadata names it. */
  readonly issuer: string;
  /** The private key the access tokens are signed with now (`kid` included). */
  readonly signingKey: JWK;
  /**
   * An access token through client credentials, for `resource` (RFC 8707; without one, an opaque
   * token with no audience) with `scope`; with `dpop`, bound to a fresh key by a DPoP proof (RFC 9449).
   */
  clientCredentials(options: { resource: string | undefined; scope: string; client?: { id: string; secret: string }; dpop?: boolean }): Promise<string>;
  /** An access token through the authorization code flow with PKCE, the test playing the browser with automatic login and consent. */
  authorizationCode(options: { resource: string; scope: string }): Promise<string>;
  /** A new signing key with a new `kid` in place of the old one, which leaves the JWKS; the issuer stays the same. */
  rotateKeys(): Promise<void>;
  /** How many times the JWKS was fetched. */
  readonly jwksFetches: number;
  /** How many introspection requests (RFC 7662) the issuer answered. */
  readonly introspections: number;
  /** From now on the JWKS answers this status (a failing key endpoint); undefined: it answers again. */
  failJwks(status: number | undefined): void;
  /**
   * Holds every introspection request from now on until `release` is called (a slow provider,
   * with no clock in it); `held` is how many are waiting.
   */
  holdIntrospections(): { release(): void; readonly held: number };
  /** Revokes a token (RFC 7009) as the client it was issued to would. */
  revoke(token: string, client: { id: string; secret: string }): Promise<void>;
  close(): Promise<void>;
}

/**
 * Starts oidc-provider on a loopback port: client credentials, the authorization code flow
 * (PKCE required), dynamic client registration, introspection, revocation and resource indicators,
 * whose access tokens are JWTs (RFC 9068) with the resource as audience, except `OPAQUE_CLIENT`'s
 * (and any token asked for without a resource), which are opaque. Login and consent are granted
 * to whoever follows the redirects (`followAuthorization`).
 */
export async function startTestIssuer(): Promise<TestIssuer> {
  const { default: Provider } = (await import('oidc-provider' as string)) as { default: ProviderClass };
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  let signingKey = await newSigningKey();
  let provider = new Provider(issuer, providerConfiguration(signingKey));
  let jwksFetches = 0;
  let introspections = 0;
  let jwksStatus: number | undefined;
  let hold: { waiting: Array<() => void>; released: boolean } | undefined;
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    if (req.url?.startsWith('/jwks')) {
      jwksFetches += 1;
      if (jwksStatus !== undefined) {
        res.statusCode = jwksStatus;
        res.end('{"error":"temporarily_unavailable"}');
        return;
      }
    }
    if (req.url?.startsWith(INTROSPECTION_PATH)) {
      introspections += 1;
      if (hold !== undefined && !hold.released) {
        hold.waiting.push(() => provider.callback()(req, res));
        return;
      }
    }
    if (req.url?.startsWith('/interaction/')) {
      grantEverything(provider, req, res).catch((err: unknown) => {
        res.statusCode = 500;
        res.end(String(err));
      });
      return;
    }
    provider.callback()(req, res);
  });
  const tokenAt = async (body: URLSearchParams, client?: { id: string; secret: string }, dpop = false): Promise<string> => {
    const headers = formHeaders(client);
    if (dpop) headers.dpop = await dpopProof('POST', `${issuer}/token`);
    const response = await fetch(`${issuer}/token`, { method: 'POST', headers, body });
    const answer = (await response.json()) as { access_token?: string };
    if (answer.access_token === undefined) throw new Error(`token request failed: ${response.status} ${JSON.stringify(answer)}`);
    return answer.access_token;
  };
  return {
    issuer,
    get signingKey() {
      return signingKey;
    },
    get jwksFetches() {
      return jwksFetches;
    },
    get introspections() {
      return introspections;
    },
    failJwks(status) {
      jwksStatus = status;
    },
    holdIntrospections() {
      const current: { waiting: Array<() => void>; released: boolean } = { waiting: [], released: false };
      hold = current;
      return {
        release() {
          current.released = true;
          for (const handle of current.waiting.splice(0)) handle();
        },
        get held() {
          return current.waiting.length;
        },
      };
    },
    async revoke(token, client) {
      const response = await fetch(`${issuer}/token/revocation`, { method: 'POST', headers: formHeaders(client), body: new URLSearchParams({ token }) });
      if (!response.ok) throw new Error(`revocation failed: ${response.status} ${await response.text()}`);
      await response.arrayBuffer();
    },
    clientCredentials: ({ resource, scope, client = SERVICE_CLIENT, dpop }) =>
      tokenAt(new URLSearchParams({ grant_type: 'client_credentials', scope, ...(resource === undefined ? {} : { resource }) }), client, dpop),
    async authorizationCode({ resource, scope }) {
      const verifier = randomBytes(32).toString('base64url');
      const url = new URL(`${issuer}/auth`);
      url.search = new URLSearchParams({
        client_id: APP_CLIENT.id,
        redirect_uri: APP_CLIENT.redirectUri,
        response_type: 'code',
        scope,
        resource,
        state: randomBytes(8).toString('hex'),
        code_challenge: createHash('sha256').update(verifier).digest('base64url'),
        code_challenge_method: 'S256',
      }).toString();
      const code = await followAuthorization(url, APP_CLIENT.redirectUri);
      return tokenAt(
        new URLSearchParams({
          grant_type: 'authorization_code',
          code,
          redirect_uri: APP_CLIENT.redirectUri,
          code_verifier: verifier,
          client_id: APP_CLIENT.id,
          resource,
        }),
      );
    },
    async rotateKeys() {
      signingKey = await newSigningKey();
      provider = new Provider(issuer, providerConfiguration(signingKey));
    },
    close: () => closeServer(server),
  };
}

/** oidc-provider's introspection endpoint, as its metadata names it. */
const INTROSPECTION_PATH = '/token/introspection';

function formHeaders(client: { id: string; secret: string } | undefined): Record<string, string> {
  const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded' };
  if (client !== undefined) headers.authorization = `Basic ${Buffer.from(`${client.id}:${client.secret}`).toString('base64')}`;
  return headers;
}

/** A DPoP proof (RFC 9449) for one request, by a key made for it: the token it gets is bound to that key. */
async function dpopProof(method: string, url: string): Promise<string> {
  const { publicKey, privateKey } = await generateKeyPair('ES256');
  return new SignJWT({ htm: method, htu: url, jti: randomBytes(16).toString('hex') })
    .setProtectedHeader({ alg: 'ES256', typ: 'dpop+jwt', jwk: await exportJWK(publicKey) })
    .setIssuedAt()
    .sign(privateKey);
}

/**
 * Plays the browser: follows the redirects from an authorization URL, through the provider's
 * login and consent (granted at once), carrying its cookies, up to the client's redirect URI, and
 * returns the authorization code found there.
 */
export async function followAuthorization(authorizationUrl: URL, redirectUri: string): Promise<string> {
  const cookies = new Map<string, string>();
  let url = authorizationUrl.href;
  for (let hop = 0; hop < 20; hop += 1) {
    if (url.startsWith(redirectUri)) {
      const redirected = new URL(url);
      const code = redirected.searchParams.get('code');
      if (code === null) throw new Error(`the authorization server refused: ${redirected.search}`);
      return code;
    }
    const response = await fetch(url, { redirect: 'manual', headers: { cookie: [...cookies].map(([k, v]) => `${k}=${v}`).join('; ') } });
    for (const line of response.headers.getSetCookie()) {
      const [pair = ''] = line.split(';');
      const eq = pair.indexOf('=');
      cookies.set(pair.slice(0, eq), pair.slice(eq + 1));
    }
    const location = response.headers.get('location');
    await response.arrayBuffer();
    if (location === null) throw new Error(`no redirect from ${url}: ${response.status}`);
    url = new URL(location, url).href;
  }
  throw new Error('too many redirects');
}

async function grantEverything(provider: ProviderInstance, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const details = await provider.interactionDetails(req, res);
  if (details.prompt.name === 'login') {
    await provider.interactionFinished(req, res, { login: { accountId: TEST_USER } }, { mergeWithLastSubmission: false });
    return;
  }
  const accountId = details.session?.accountId ?? TEST_USER;
  const grant =
    (details.grantId === undefined ? undefined : await provider.Grant.find(details.grantId)) ??
    new provider.Grant({ accountId, clientId: details.params.client_id ?? '' });
  const missing = details.prompt.details;
  if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
  for (const [resource, scopes] of Object.entries(missing.missingResourceScopes ?? {})) grant.addResourceScope(resource, scopes.join(' '));
  const grantId = await grant.save();
  await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
}

async function newSigningKey(): Promise<JWK> {
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  return { ...(await exportJWK(privateKey)), kid: randomBytes(6).toString('hex'), alg: 'RS256', use: 'sig' };
}

function providerConfiguration(signingKey: JWK): object {
  return {
    clients: [
      { client_id: SERVICE_CLIENT.id, client_secret: SERVICE_CLIENT.secret, grant_types: ['client_credentials'], redirect_uris: [], response_types: [] },
      { client_id: HUGE_CLIENT.id, client_secret: HUGE_CLIENT.secret, grant_types: ['client_credentials'], redirect_uris: [], response_types: [] },
      { client_id: OPAQUE_CLIENT.id, client_secret: OPAQUE_CLIENT.secret, grant_types: ['client_credentials'], redirect_uris: [], response_types: [] },
      { client_id: INTROSPECTION_CLIENT.id, client_secret: INTROSPECTION_CLIENT.secret, grant_types: [], redirect_uris: [], response_types: [] },
      {
        client_id: APP_CLIENT.id,
        token_endpoint_auth_method: 'none',
        grant_types: ['authorization_code'],
        redirect_uris: [APP_CLIENT.redirectUri],
        response_types: ['code'],
      },
    ],
    jwks: { keys: [signingKey] },
    // Known to the provider too, so a client may register with them (the MCP SDK registers with the scopes it will ask for).
    scopes: ['openid', 'offline_access', ...RESOURCE_SCOPES],
    cookies: { keys: ['test-cookie-key'] },
    // Set, so the provider does not warn about each default.
    ttl: { AccessToken: 3600, AuthorizationCode: 60, ClientCredentials: 3600, Grant: 3600, IdToken: 3600, Interaction: 600, RefreshToken: 3600, Session: 3600 },
    findAccount: (_ctx: unknown, id: string) => ({ accountId: id, claims: () => ({ sub: id }) }),
    interactions: { url: (_ctx: unknown, interaction: { uid: string }) => `/interaction/${interaction.uid}` },
    extraTokenClaims: (_ctx: unknown, token: { clientId?: string }) => (token.clientId === HUGE_CLIENT.id ? { padding: 'x'.repeat(9000) } : undefined),
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      // Set, so the provider does not warn about the defaults: confidential clients may introspect any token, a client revokes its own.
      introspection: {
        enabled: true,
        allowedPolicy: (_ctx: unknown, client: { clientAuthMethod: string; clientId: string }, token: { clientId: string }) =>
          client.clientAuthMethod !== 'none' || token.clientId === client.clientId,
      },
      revocation: {
        enabled: true,
        allowedPolicy: (_ctx: unknown, client: { clientId: string }, token: { clientId: string }) => token.clientId === client.clientId,
      },
      registration: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: (_ctx: unknown, _client: unknown, oneOf?: string | string[]) => oneOf,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx: unknown, resource: string, client: { clientId: string }) =>
          client.clientId === OPAQUE_CLIENT.id
            ? { scope: RESOURCE_SCOPES.join(' '), audience: resource, accessTokenTTL: 3600, accessTokenFormat: 'opaque' }
            : { scope: RESOURCE_SCOPES.join(' '), audience: resource, accessTokenTTL: 3600, accessTokenFormat: 'jwt', jwt: { sign: { alg: 'RS256' } } },
      },
    },
  };
}

function closeServer(server: Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((resolve, reject) => server.close((err) => (err ? reject(err) : resolve())));
}

/** toolport's OAuth settings for one test issuer, every optional one left out unless `overrides` gives it. */
export function resourceServerSettings(issuer: string, publicUrl: string, overrides: Partial<OAuthSettings> = {}): OAuthSettings {
  return {
    issuers: [issuer],
    publicUrl,
    audiences: undefined,
    jwksUrl: undefined,
    scopes: undefined,
    toolsClaim: undefined,
    mappingFile: undefined,
    introspectionClient: undefined,
    ...overrides,
  };
}
