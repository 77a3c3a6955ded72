import { toolScope, type KeyIdentity, type ServerPermissions, type ToolScope } from '../core/keyring.js';
import { PermissionRuleError, Permissions, type PermissionRules } from '../core/permissions.js';
import { EMPTY_MAPPING, type GrantRule, type OAuthMapping } from './mapping.js';
import { TokenRefusal } from './token-refusal.js';

/** The scope prefix that names tools: `tools:*` (every tool), `tools:Read`, `tools:github__*`. */
export const TOOL_SCOPE_PREFIX = 'tools:';

/** A caller known by an access token: a `KeyIdentity` (what audit lines, rate limits and scopes use) and where it came from. */
export interface TokenIdentity extends KeyIdentity {
  /** `sub`, or the client's id for a token without one. */
  readonly subject: string;
  /** `client_id` or `azp`: the application the token was issued to. */
  readonly client: string | undefined;
  readonly issuer: string;
  /** When the token expires, epoch ms. */
  readonly expiresAt: number;
}

/** Whether a caller's identity came from an access token rather than a key. */
export function isTokenIdentity(identity: KeyIdentity | undefined): identity is TokenIdentity {
  return identity !== undefined && 'subject' in identity;
}

/** The claims of a verified token (a JWT's payload, or an introspection answer). */
export type Claims = Readonly<Record<string, unknown>>;

export interface IdentityOptions {
  mapping?: OAuthMapping;
  /** A claim (dotted path) whose values grant tools as scopes do. */
  toolsClaim?: string | undefined;
  /** Several issuers are accepted: labels name the issuer too, so equal subjects of two issuers stay apart. */
  severalIssuers?: boolean;
  /**
   * The default rules and what rules are checked against: a subject's or a group's `permissions`
   * are compiled at start-up (a bad rule stops it, naming the entry) and given to its tokens, the
   * default applying to every token as it does to every key.
   */
  permissions?: ServerPermissions;
}

// Distinct scopes made for tokens, kept so that tokens granting the same tools share one ToolScope,
// and with it the registry's lists made for it. Bounded: past it, a new set gets a new object.
const SCOPES_KEPT = 1024;

/**
 * Turns a verified token's claims into the caller: the label (`sub:<subject>`, plus `@<issuer>`
 * with several issuers), the tools its scopes grant (`tools:*`, `tools:<name>`, `tools:<prefix>*`,
 * the mapping's own scope names, and the values of `toolsClaim` read as scopes) together with what
 * the mapping gives its subject and groups, the first workspace and permission rules found (the
 * subject's, then the groups' in the file's order).
 */
export class IdentityMapper {
  readonly #mapping: OAuthMapping;
  readonly #toolsClaim: string | undefined;
  readonly #severalIssuers: boolean;
  readonly #scopes = new Map<string, ToolScope>();
  // Each mapping entry's rules, compiled once, over the default; `#defaults` for a token that no entry with rules names.
  readonly #permissions = new Map<GrantRule, Permissions | undefined>();
  readonly #defaults: Permissions | undefined;

  /** Throws `PermissionRuleError` naming the mapping entry and the rule for a rule that cannot be read. */
  constructor(options: IdentityOptions = {}) {
    this.#mapping = options.mapping ?? EMPTY_MAPPING;
    this.#toolsClaim = options.toolsClaim;
    this.#severalIssuers = options.severalIssuers ?? false;
    const server = options.permissions;
    const compile = (where: string, rules: PermissionRules | undefined): Permissions | undefined =>
      server &&
      Permissions.compile(
        [
          { where: 'TOOLPORT_PERMISSIONS', rules: server.defaults },
          { where, rules },
        ],
        server.catalog,
      );
    this.#defaults = compile('', undefined);
    for (const field of ['subjects', 'groups'] as const) {
      for (const [name, rule] of Object.entries(this.#mapping[field])) {
        if (rule.permissions === undefined) continue;
        if (server === undefined) throw new PermissionRuleError(`TOOLPORT_OAUTH_MAPPING ${field}["${name}"]: "permissions" cannot be checked here`);
        this.#permissions.set(rule, compile(`TOOLPORT_OAUTH_MAPPING ${field}["${name}"], "permissions"`, rule.permissions as PermissionRules));
      }
    }
  }

  /** The caller a token's claims name; `TokenRefusal` for a token that names no subject. */
  identify(claims: Claims, expiresAt: number): TokenIdentity {
    const issuer = String(claims.iss);
    const client = stringClaim(claims.client_id) ?? stringClaim(claims.azp);
    const subject = stringClaim(claims.sub) ?? client;
    if (subject === undefined) throw new TokenRefusal('invalid_token', 'The access token names no subject (sub) and no client (client_id, azp).');
    const rules = this.#rulesOf(subject, claims);
    const granted = [...scopeValues(claims), ...valuesAt(claims, this.#toolsClaim)].flatMap((scope) => this.#toolsOf(scope));
    for (const rule of rules) granted.push(...(rule.tools ?? []));
    const workspace = rules.find((rule) => rule.workspace !== undefined)?.workspace;
    const ruled = rules.find((rule) => rule.permissions !== undefined);
    const permissions = ruled === undefined ? this.#defaults : this.#permissions.get(ruled);
    return Object.freeze({
      label: this.#severalIssuers ? `sub:${subject}@${issuer}` : `sub:${subject}`,
      tools: this.#scopeOf(granted.includes('*') ? undefined : granted, permissions),
      workspace,
      permissions,
      subject,
      client,
      issuer,
      expiresAt,
    });
  }

  /** The tools a scope (or a claim value) names; none for a scope toolport does not know (`openid`, `email`). */
  #toolsOf(scope: string): readonly string[] {
    // An own property only: a scope named `constructor` must not find Object's.
    if (Object.hasOwn(this.#mapping.scopes, scope)) return this.#mapping.scopes[scope]!;
    if (!scope.startsWith(TOOL_SCOPE_PREFIX) || scope.length === TOOL_SCOPE_PREFIX.length) return [];
    return [scope.slice(TOOL_SCOPE_PREFIX.length)];
  }

  #rulesOf(subject: string, claims: Claims): GrantRule[] {
    const { subjects, groups, groupsClaim } = this.#mapping;
    const own = Object.hasOwn(subjects, subject) ? [subjects[subject]!] : [];
    const member = new Set(valuesAt(claims, groupsClaim));
    return [...own, ...Object.entries(groups).flatMap(([group, rule]) => (member.has(group) ? [rule] : []))];
  }

  #scopeOf(tools: readonly string[] | undefined, permissions: Permissions | undefined): ToolScope | undefined {
    if (tools === undefined && permissions === undefined) return undefined;
    const entries = tools === undefined ? undefined : [...new Set(tools)];
    // Tokens with the same tools and the same rules share one scope, and the lists made for it.
    const id = `${entries === undefined ? '*' : [...entries].sort().join('\n')}\0${this.#ruleId(permissions)}`;
    const known = this.#scopes.get(id);
    if (known !== undefined) return known;
    const scope = toolScope(entries, permissions);
    if (this.#scopes.size < SCOPES_KEPT) this.#scopes.set(id, scope);
    return scope;
  }

  /** Which compiled rules these are, as part of a scope's id: the default's, or a mapping entry's. */
  #ruleId(permissions: Permissions | undefined): string {
    if (permissions === undefined) return '';
    if (permissions === this.#defaults) return 'default';
    return String([...this.#permissions.values()].indexOf(permissions));
  }
}

function stringClaim(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

/** The token's scopes: `scope` (RFC 9068, space-separated), or `scp` (a string or an array, as Entra ID and Okta write it). */
function scopeValues(claims: Claims): string[] {
  const scope = claims.scope ?? claims.scp;
  if (typeof scope === 'string') return scope.split(' ').filter((s) => s !== '');
  return Array.isArray(scope) ? scope.filter((s): s is string => typeof s === 'string') : [];
}

/** The string values at a dotted path of the claims (`realm_access.roles`): an array's strings, or a space-separated string. */
function valuesAt(claims: Claims, dotted: string | undefined): string[] {
  if (dotted === undefined) return [];
  let value: unknown = claims;
  for (const part of dotted.split('.')) {
    if (typeof value !== 'object' || value === null || !Object.hasOwn(value, part)) return [];
    value = (value as Record<string, unknown>)[part];
  }
  if (typeof value === 'string') return value.split(' ').filter((s) => s !== '');
  return Array.isArray(value) ? value.filter((s): s is string => typeof s === 'string') : [];
}
