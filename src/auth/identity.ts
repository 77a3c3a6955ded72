import { toolScope, type Principal, type ServerPermissions, type ToolScope } from '../core/principal.js';
import { PermissionRuleError, type Permissions, type PermissionRules } from '../core/permissions.js';
import { checkMappingIssuers, EMPTY_MAPPING, mappingRules, mappingSections, type GrantRule, type MappingSection, type OAuthMapping } from './mapping.js';
import { TokenRefusal } from './token-refusal.js';

/** The scope prefix that names tools: `tools:*` (every tool), `tools:Read`, `tools:github__*`. */
export const TOOL_SCOPE_PREFIX = 'tools:';

/** A caller known by an access token: a `Principal` (what audit lines, rate limits and scopes use) and where it came from. */
export interface TokenPrincipal extends Principal {
  /** `sub`, or the client's id for a token without one. */
  readonly subject: string;
  /** `client_id` or `azp`: the application the token was issued to. */
  readonly client: string | undefined;
  readonly issuer: string;
  /** When the token expires, epoch ms. */
  readonly expiresAt: number;
}

/** @deprecated The name of `TokenPrincipal` before every caller was a `Principal`. */
export type TokenIdentity = TokenPrincipal;

/** Whether a caller came from an access token rather than a key. */
export function isTokenPrincipal(identity: Principal | undefined): identity is TokenPrincipal {
  return identity !== undefined && 'subject' in identity;
}

/** The claims of a verified token (a JWT's payload, or an introspection answer). */
export type Claims = Readonly<Record<string, unknown>>;

export interface IdentityOptions {
  mapping?: OAuthMapping;
  /** A claim (dotted path) whose values grant tools as scopes do. */
  toolsClaim?: string | undefined;
  /**
   * The configured issuers. With several, labels name the issuer too (equal subjects of two
   * issuers stay apart), and the mapping must bind each entry to its issuer
   * (`checkMappingIssuers`, run here); left out, as one issuer.
   */
  issuers?: readonly string[];
  /**
   * The default rules and what rules are checked against: a subject's or a group's `permissions`
   * are compiled at start-up (a bad rule stops it, naming the entry) and given to its tokens, the
   * default applying to every token as it does to every key.
   */
  permissions?: ServerPermissions;
}

/** What the mapping gives the tokens of one issuer: the sections that apply to it, merged in the file's order. */
interface IssuerGrants {
  readonly scopes: ReadonlyMap<string, readonly string[]>;
  readonly subjects: ReadonlyMap<string, readonly GrantRule[]>;
  /** Each group with its rules, and the claim its members are listed in. */
  readonly groups: ReadonlyArray<{ readonly name: string; readonly rule: GrantRule; readonly claim: string }>;
  readonly groupClaims: readonly string[];
}

// Distinct scopes made for tokens, kept so that tokens granting the same tools share one ToolScope,
// and with it the registry's lists made for it. Bounded: past it, a new set gets a new object.
const SCOPES_KEPT = 1024;

/**
 * Turns a verified token's claims into the caller: the label (`sub:<subject>`, plus `@<issuer>`
 * with several issuers), the tools its scopes grant (`tools:*`, `tools:<name>`, `tools:<prefix>*`,
 * the mapping's own scope names, and the values of `toolsClaim` read as scopes) together with what
 * the mapping gives its subject and groups, the first workspace and permission rules found (the
 * subject's, then the groups' in the file's order). Only the mapping's entries of the token's own
 * issuer apply (the top's while one issuer is configured): an entry is keyed by (issuer, subject)
 * or (issuer, group), never by the name alone. A claim read here that has the wrong type is a
 * `TokenRefusal`, never a guess.
 */
export class IdentityMapper {
  readonly #toolsClaim: string | undefined;
  readonly #severalIssuers: boolean;
  readonly #grants = new Map<string | undefined, IssuerGrants>();
  readonly #scopes = new Map<string, ToolScope>();
  // Each mapping entry's rules, compiled once, over the default; `#defaults` for a token that no entry with rules names.
  readonly #permissions = new Map<GrantRule, Permissions | undefined>();
  readonly #defaults: Permissions | undefined;

  /**
   * Throws `OAuthSetupError` for a mapping that does not bind its entries to the configured issuers,
   * and `PermissionRuleError` naming the mapping entry and the rule for a rule that cannot be read.
   */
  constructor(options: IdentityOptions = {}) {
    const mapping = options.mapping ?? EMPTY_MAPPING;
    this.#toolsClaim = options.toolsClaim;
    this.#severalIssuers = (options.issuers?.length ?? 1) > 1;
    if (options.issuers !== undefined) checkMappingIssuers(mapping, options.issuers);
    const server = options.permissions;
    const compile = (where: string, rules: PermissionRules | undefined): Permissions | undefined =>
      server?.compile([
        { where: 'TOOLPORT_PERMISSIONS', rules: server.defaults },
        { where, rules },
      ]);
    this.#defaults = compile('', undefined);
    for (const { section, kind, name, rule } of mappingRules(mapping)) {
      if (rule.permissions === undefined) continue;
      const where = `TOOLPORT_OAUTH_MAPPING ${section.where}${kind}["${name}"]`;
      if (server === undefined) throw new PermissionRuleError(`${where}: "permissions" cannot be checked here`);
      this.#permissions.set(rule, compile(`${where}, "permissions"`, rule.permissions as PermissionRules));
    }
    const sections = mappingSections(mapping);
    // The top's entries are the only issuer's; with several issuers `checkMappingIssuers` left none there.
    const top = sections.filter((section) => section.issuer === undefined);
    this.#grants.set(undefined, grantsOf(top));
    for (const section of sections) {
      if (section.issuer !== undefined) this.#grants.set(section.issuer, grantsOf([section, ...(this.#severalIssuers ? [] : top)]));
    }
  }

  /** The caller a token's claims name; `TokenRefusal` for a token that names no subject, or a claim of the wrong type. */
  identify(claims: Claims, expiresAt: number): TokenPrincipal {
    const issuer = typedClaim(claims, 'iss') ?? '';
    const client = typedClaim(claims, 'client_id') ?? typedClaim(claims, 'azp');
    const subject = typedClaim(claims, 'sub') ?? client;
    if (subject === undefined) throw new TokenRefusal('invalid_token', 'The access token names no subject (sub) and no client (client_id, azp).');
    // Another issuer's section never applies; the top's does only while one issuer is configured.
    const grants = this.#grants.get(issuer) ?? (this.#severalIssuers ? NO_GRANTS : this.#grants.get(undefined)!);
    const rules = rulesOf(grants, subject, claims);
    const granted = [...scopeValues(claims), ...valuesAt(claims, this.#toolsClaim)].flatMap((scope) => toolsOf(grants, scope));
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

const NO_GRANTS: IssuerGrants = { scopes: new Map(), subjects: new Map(), groups: [], groupClaims: [] };

/** What `sections` give, merged in order: a subject named in two of them gets both entries, the first one's first. */
function grantsOf(sections: readonly MappingSection[]): IssuerGrants {
  const scopes = new Map<string, readonly string[]>();
  const subjects = new Map<string, GrantRule[]>();
  const groups: Array<{ name: string; rule: GrantRule; claim: string }> = [];
  for (const { entries, groupsClaim } of sections) {
    for (const [name, tools] of Object.entries(entries.scopes)) scopes.set(name, [...(scopes.get(name) ?? []), ...tools]);
    for (const [name, rule] of Object.entries(entries.subjects)) subjects.set(name, [...(subjects.get(name) ?? []), rule]);
    for (const [name, rule] of Object.entries(entries.groups)) groups.push({ name, rule, claim: groupsClaim });
  }
  return { scopes, subjects, groups, groupClaims: [...new Set(groups.map((group) => group.claim))] };
}

/** The entries of a token's subject, then of its groups in the file's order. */
function rulesOf(grants: IssuerGrants, subject: string, claims: Claims): GrantRule[] {
  const own = grants.subjects.get(subject) ?? [];
  if (grants.groups.length === 0) return [...own];
  const members = new Map(grants.groupClaims.map((claim) => [claim, new Set(valuesAt(claims, claim))]));
  return [...own, ...grants.groups.flatMap((group) => (members.get(group.claim)!.has(group.name) ? [group.rule] : []))];
}

/** The tools a scope (or a claim value) names; none for a scope toolport does not know (`openid`, `email`). */
function toolsOf(grants: IssuerGrants, scope: string): readonly string[] {
  const named = grants.scopes.get(scope);
  if (named !== undefined) return named;
  if (!scope.startsWith(TOOL_SCOPE_PREFIX) || scope.length === TOOL_SCOPE_PREFIX.length) return [];
  return [scope.slice(TOOL_SCOPE_PREFIX.length)];
}

/** A claim that must be a non-empty string when present; `TokenRefusal` when it is anything else. */
function typedClaim(claims: Claims, name: string): string | undefined {
  const value = claims[name];
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value === '') throw wrongType(name, 'a non-empty string');
  return value;
}

function wrongType(claim: string, expected: string): TokenRefusal {
  return new TokenRefusal('invalid_token', `The access token's ${claim} claim is not ${expected}.`);
}

/** The token's scopes: `scope` (RFC 9068, space-separated), or `scp` (a string or an array, as Entra ID and Okta write it). */
function scopeValues(claims: Claims): string[] {
  if (claims.scope !== undefined) {
    if (typeof claims.scope !== 'string') throw wrongType('scope', 'a string of space-separated scopes');
    return words(claims.scope);
  }
  return claims.scp === undefined ? [] : stringsOf(claims.scp, 'scp');
}

/** The string values at a dotted path of the claims (`realm_access.roles`): an array of strings, or a space-separated string. */
function valuesAt(claims: Claims, dotted: string | undefined): string[] {
  if (dotted === undefined) return [];
  let value: unknown = claims;
  for (const part of dotted.split('.')) {
    if (typeof value !== 'object' || value === null || Array.isArray(value) || !Object.hasOwn(value, part)) return [];
    value = (value as Record<string, unknown>)[part];
  }
  return value === undefined ? [] : stringsOf(value, dotted);
}

/** A claim that lists names: a space-separated string or an array of strings; `TokenRefusal` otherwise. */
function stringsOf(value: unknown, claim: string): string[] {
  if (typeof value === 'string') return words(value);
  if (Array.isArray(value) && value.every((item) => typeof item === 'string')) return value as string[];
  throw wrongType(claim, 'a string or an array of strings');
}

function words(text: string): string[] {
  return text.split(' ').filter((s) => s !== '');
}
