import { checkedList, ConfigError, ISSUER_EXPECTED, list, raw, serverUrl, URL_EXPECTED, type Env } from '../parse.js';
import { booleanSetting, itemsSetting, optionalSetting, textSetting, type ConfigVariable } from '../variables.js';

const OAUTH_VARIABLES: readonly ConfigVariable[] = [
  {
    name: 'TOOLPORT_OAUTH_ISSUER',
    default: 'none',
    meaning:
      'comma-separated issuer URLs of the OAuth 2.1 / OpenID authorization servers whose access tokens toolport accepts (`https://`, or `http://` on loopback); with it, toolport is a resource server beside its keys',
    see: 'oauth.md',
  },
  {
    name: 'TOOLPORT_PUBLIC_URL',
    default: 'none',
    meaning:
      "the absolute URL clients reach toolport at (`https://tools.example.com`): the resource the protected-resource metadata names and tokens' audience must contain; required with `TOOLPORT_OAUTH_ISSUER`",
    see: 'oauth.md',
  },
  {
    name: 'TOOLPORT_OAUTH_AUDIENCE',
    default: '`TOOLPORT_PUBLIC_URL` and its `/mcp`',
    meaning: "comma-separated values of which a token's `aud` must hold one (for providers that cannot put the resource URL there)",
    see: 'oauth.md#audience',
  },
  {
    name: 'TOOLPORT_OAUTH_JWKS_URL',
    default: "the issuer's `jwks_uri`",
    meaning: "where the issuer's signing keys are, when its metadata does not say (one issuer only)",
    see: 'oauth.md',
  },
  {
    name: 'TOOLPORT_OAUTH_SCOPES',
    default: "`tools:*`, `tools:<name>` per tool, and the mapping's scope names",
    meaning: 'comma-separated scopes the protected-resource metadata advertises (clients ask for these)',
    see: 'oauth.md#scopes-and-permissions',
  },
  {
    name: 'TOOLPORT_OAUTH_TOOLS_CLAIM',
    default: 'none',
    meaning: 'a claim (dotted path, such as `realm_access.roles`) whose values grant tools as scopes do',
    see: 'oauth.md#scopes-and-permissions',
  },
  {
    name: 'TOOLPORT_OAUTH_MAPPING',
    default: 'none',
    meaning: 'a JSON file of scope names, subjects and groups mapped to tools, workspaces and permission rules',
    see: 'oauth.md#the-mapping-file',
  },
  {
    name: 'TOOLPORT_OAUTH_CLIENT_ID',
    default: 'none',
    meaning: "with `TOOLPORT_OAUTH_CLIENT_SECRET`: toolport's own client at the (first) issuer, to introspect opaque tokens (RFC 7662)",
    see: 'oauth.md#opaque-tokens',
  },
  { name: 'TOOLPORT_OAUTH_CLIENT_SECRET', default: 'none', meaning: 'the secret of `TOOLPORT_OAUTH_CLIENT_ID`', see: 'oauth.md#opaque-tokens' },
];

/** Who may call: API keys, the permission rules every caller inherits, OAuth access tokens. */
export const AUTH = {
  apiKeys: itemsSetting({
    name: 'TOOLPORT_API_KEYS',
    shown: 'none',
    secret: true,
    meaning: 'comma-separated API keys with access to every served tool',
    see: 'security.md#api-keys',
  }),
  apiKeysFile: textSetting({ name: 'TOOLPORT_API_KEYS_FILE', shown: 'none', meaning: 'a JSON file of scoped keys', see: 'security.md#api-keys' }),
  allowUnauthenticated: booleanSetting({
    name: 'TOOLPORT_ALLOW_UNAUTHENTICATED',
    fallback: false,
    meaning: 'serve tools that are not read-only on a non-loopback address without keys',
    see: 'security.md#safe-by-default',
  }),
  permissionsFile: optionalSetting(
    {
      name: 'TOOLPORT_PERMISSIONS',
      default: 'none',
      meaning: 'A JSON file of permission rules `{"allow": [...], "deny": [...]}` every key inherits and may narrow; see docs/security.md',
    },
    (env) => raw(env, 'TOOLPORT_PERMISSIONS'),
  ),
  oauth: optionalSetting(OAUTH_VARIABLES, (env) => oauth(env)),
} as const;

/** The OAuth resource server's settings, checked for form only: the issuers are reached at start-up. */
export interface OAuthConfig {
  /** The issuers whose tokens are accepted, exactly as their `iss` claim writes them. */
  issuers: string[];
  /** The resource's canonical URL (TOOLPORT_PUBLIC_URL), without a trailing slash. */
  publicUrl: string;
  /** Values of which a token's `aud` must hold one; undefined: the public URL and its `/mcp`. */
  audiences: string[] | undefined;
  /** The issuer's JWKS, when its metadata does not name it (one issuer only). */
  jwksUrl: string | undefined;
  /** The scopes the protected-resource metadata advertises; undefined: derived from the tools. */
  scopes: string[] | undefined;
  /** A claim (dotted path) whose values grant tools as scopes do. */
  toolsClaim: string | undefined;
  /** The mapping file (TOOLPORT_OAUTH_MAPPING). */
  mappingFile: string | undefined;
  /** toolport's own client at the first issuer, to introspect opaque tokens; undefined: JWTs only. */
  introspectionClient: { id: string; secret: string } | undefined;
}

const OAUTH_COMPANIONS = [
  'TOOLPORT_PUBLIC_URL',
  'TOOLPORT_OAUTH_AUDIENCE',
  'TOOLPORT_OAUTH_JWKS_URL',
  'TOOLPORT_OAUTH_SCOPES',
  'TOOLPORT_OAUTH_TOOLS_CLAIM',
  'TOOLPORT_OAUTH_MAPPING',
  'TOOLPORT_OAUTH_CLIENT_ID',
  'TOOLPORT_OAUTH_CLIENT_SECRET',
] as const;

/** The OAuth settings, when TOOLPORT_OAUTH_ISSUER is set; a companion set without it is a mistake, not ignored. */
function oauth(env: Env): OAuthConfig | undefined {
  const issuers = checkedList(env, 'TOOLPORT_OAUTH_ISSUER', (item) => (serverUrl(item) === undefined ? undefined : item), ISSUER_EXPECTED);
  if (issuers.length === 0) {
    const stray = OAUTH_COMPANIONS.find((name) => raw(env, name) !== undefined && name !== 'TOOLPORT_PUBLIC_URL');
    if (stray !== undefined) throw new ConfigError(stray, '', '', `${stray} is set but TOOLPORT_OAUTH_ISSUER is not: set the issuer too, or unset ${stray}`);
    return undefined;
  }
  const publicUrl = raw(env, 'TOOLPORT_PUBLIC_URL');
  if (publicUrl === undefined)
    throw new ConfigError(
      'TOOLPORT_PUBLIC_URL',
      '',
      '',
      'TOOLPORT_PUBLIC_URL is required with TOOLPORT_OAUTH_ISSUER: the absolute URL clients reach toolport at',
    );
  const canonical = serverUrl(publicUrl);
  if (canonical === undefined) throw new ConfigError('TOOLPORT_PUBLIC_URL', URL_EXPECTED, publicUrl);
  const jwksUrl = raw(env, 'TOOLPORT_OAUTH_JWKS_URL');
  if (jwksUrl !== undefined) {
    if (serverUrl(jwksUrl) === undefined) throw new ConfigError('TOOLPORT_OAUTH_JWKS_URL', URL_EXPECTED, jwksUrl);
    if (issuers.length > 1)
      throw new ConfigError('TOOLPORT_OAUTH_JWKS_URL', 'one issuer in TOOLPORT_OAUTH_ISSUER (each of several issuers names its own keys)', jwksUrl);
  }
  const clientId = raw(env, 'TOOLPORT_OAUTH_CLIENT_ID');
  const clientSecret = raw(env, 'TOOLPORT_OAUTH_CLIENT_SECRET');
  if ((clientId === undefined) !== (clientSecret === undefined)) {
    const missing = clientId === undefined ? 'TOOLPORT_OAUTH_CLIENT_ID' : 'TOOLPORT_OAUTH_CLIENT_SECRET';
    throw new ConfigError(
      missing,
      '',
      '',
      `${missing} is required with ${missing === 'TOOLPORT_OAUTH_CLIENT_ID' ? 'TOOLPORT_OAUTH_CLIENT_SECRET' : 'TOOLPORT_OAUTH_CLIENT_ID'}`,
    );
  }
  return {
    issuers,
    publicUrl: canonical,
    audiences: list(env, 'TOOLPORT_OAUTH_AUDIENCE'),
    jwksUrl,
    scopes: list(env, 'TOOLPORT_OAUTH_SCOPES'),
    toolsClaim: raw(env, 'TOOLPORT_OAUTH_TOOLS_CLAIM'),
    mappingFile: raw(env, 'TOOLPORT_OAUTH_MAPPING'),
    introspectionClient: clientId === undefined || clientSecret === undefined ? undefined : { id: clientId, secret: clientSecret },
  };
}
