import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { OAuthSetupError } from './token-refusal.js';
import { isRecord } from '../core/json.js';

/** What a subject or a group is given besides what its token's scopes grant. */
export interface GrantRule {
  /** Tools granted (names, `prefix*` patterns, or `*` for all), added to what the scopes grant. */
  readonly tools?: readonly string[];
  /** Its own workspace, an absolute path, as a key may have. */
  readonly workspace?: string;
  /** Permission rules in the keys file's form (`{"allow": [...], "deny": [...]}`), passed on as they are. */
  readonly permissions?: unknown;
}

/** Scope names, subjects and groups, as one issuer's tokens (or, at the top, the only issuer's) are read. */
export interface MappingEntries {
  readonly scopes: Readonly<Record<string, readonly string[]>>;
  readonly subjects: Readonly<Record<string, GrantRule>>;
  readonly groups: Readonly<Record<string, GrantRule>>;
}

/** One issuer's section: its entries, and the claim that lists its tokens' groups when it differs from the file's. */
export interface IssuerEntries extends MappingEntries {
  readonly groupsClaim?: string;
}

/**
 * The mapping file (TOOLPORT_OAUTH_MAPPING): scope names of the provider's own choosing mapped to
 * tools, and subjects (`sub`) and groups (the values of `groupsClaim`) given tools, a workspace
 * or permission rules. A name means something only at the issuer that wrote it: the entries at
 * the top apply while one issuer is configured, and `issuers` binds entries to the issuer they
 * are of (`checkMappingIssuers`), so that another issuer's `sub: "alice"` or group `admins` is
 * not this one's.
 */
export interface OAuthMapping extends MappingEntries {
  /** The claim (dotted path) that lists a token's groups (default `groups`). */
  readonly groupsClaim: string;
  /** Entries bound to an issuer, by its identifier exactly as `TOOLPORT_OAUTH_ISSUER` names it, in the file's order. */
  readonly issuers: Readonly<Record<string, IssuerEntries>>;
}

/** A section of the mapping with where it is, for the messages: the top (`issuer` undefined), or one issuer's. */
export interface MappingSection {
  readonly issuer: string | undefined;
  /** The section's path in the file, as a prefix of an entry's: `''` or `issuers["<issuer>"].`. */
  readonly where: string;
  readonly entries: MappingEntries;
  readonly groupsClaim: string;
}

/** One subject's or group's entry, with where it is in the file. */
export interface MappingRule {
  readonly section: MappingSection;
  readonly kind: 'subjects' | 'groups';
  readonly name: string;
  readonly rule: GrantRule;
}

export const EMPTY_MAPPING: OAuthMapping = Object.freeze({ scopes: {}, groupsClaim: 'groups', subjects: {}, groups: {}, issuers: {} });

const VARIABLE = 'TOOLPORT_OAUTH_MAPPING';
const ENTRY_FIELDS = ['scopes', 'subjects', 'groups'] as const;
const TOP_LEVEL = new Set(['scopes', 'groupsClaim', 'subjects', 'groups', 'issuers']);
const SECTION_FIELDS = new Set(['scopes', 'groupsClaim', 'subjects', 'groups']);
const RULE_FIELDS = new Set(['tools', 'workspace', 'permissions']);

/** Reads and checks the mapping file; `OAuthSetupError` naming TOOLPORT_OAUTH_MAPPING and the bad entry otherwise. */
export async function readMapping(file: string, cwd = process.cwd()): Promise<OAuthMapping> {
  let text: string;
  try {
    text = await readFile(path.resolve(cwd, file), 'utf8');
  } catch (err) {
    throw new OAuthSetupError(VARIABLE, `cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  let document: unknown;
  try {
    document = JSON.parse(text);
  } catch (err) {
    throw new OAuthSetupError(VARIABLE, `${file} is not valid JSON: ${(err as Error).message}`);
  }
  return parseMapping(document, file);
}

/** Checks a mapping document; `where` names it in errors. Which issuers it is for is `checkMappingIssuers`' to check. */
export function parseMapping(document: unknown, where: string): OAuthMapping {
  const fail = (what: string): never => {
    throw new OAuthSetupError(VARIABLE, `${where}: ${what}`);
  };
  if (!isRecord(document)) return fail('expected a JSON object');
  for (const field of Object.keys(document))
    if (!TOP_LEVEL.has(field)) fail(`unknown field "${field}" (expected scopes, groupsClaim, subjects, groups, issuers)`);
  const groupsClaim = document.groupsClaim ?? 'groups';
  if (typeof groupsClaim !== 'string' || groupsClaim === '') fail('groupsClaim must be a non-empty string');
  const issuers: Record<string, IssuerEntries> = {};
  for (const [issuer, section] of Object.entries(objectField(document, 'issuers', '', fail))) {
    const at = `issuers["${issuer}"]`;
    if (!isRecord(section)) fail(`${at} must be an object with scopes, groupsClaim, subjects or groups`);
    const fields = section as Record<string, unknown>;
    for (const field of Object.keys(fields))
      if (!SECTION_FIELDS.has(field)) fail(`${at} has an unknown field "${field}" (expected scopes, groupsClaim, subjects, groups)`);
    const claim = fields.groupsClaim;
    if (claim !== undefined && (typeof claim !== 'string' || claim === '')) fail(`${at}.groupsClaim must be a non-empty string`);
    issuers[issuer] = { ...entries(fields, `${at}.`, fail), ...(claim === undefined ? {} : { groupsClaim: claim as string }) };
  }
  return { ...entries(document, '', fail), groupsClaim: groupsClaim as string, issuers };
}

/**
 * Checks the mapping against the configured issuers (`OAuthSetupError` naming TOOLPORT_OAUTH_MAPPING
 * otherwise): each section of `issuers` names one of them, and with several issuers no entry stands
 * outside a section. An entry that names no issuer would be claimed by the tokens of every issuer:
 * another provider's `sub: "alice"` is not this one's alice, and anyone its administrators put in
 * a group called `admins` is not in yours.
 */
export function checkMappingIssuers(mapping: OAuthMapping, issuers: readonly string[], where = 'the mapping'): void {
  const fail = (what: string): never => {
    throw new OAuthSetupError(VARIABLE, `${where}: ${what}`);
  };
  for (const issuer of Object.keys(mapping.issuers)) {
    if (!issuers.includes(issuer))
      fail(
        `issuers["${issuer}"] is not a configured issuer (TOOLPORT_OAUTH_ISSUER: ${issuers.join(', ')}); write it exactly as the issuer's metadata names it`,
      );
  }
  if (issuers.length < 2) return;
  for (const field of ENTRY_FIELDS) {
    const name = Object.keys(mapping[field])[0];
    if (name === undefined) continue;
    fail(
      `${field}["${name}"] names no issuer, and ${issuers.length} issuers are configured (TOOLPORT_OAUTH_ISSUER), so a token of any of them could claim it; ` +
        `with several issuers, put every entry under "issuers": {"<issuer>": {"${field}": {...}}}`,
    );
  }
}

/** The mapping's sections in the file's order: the top, then each issuer's. */
export function mappingSections(mapping: OAuthMapping): MappingSection[] {
  return [
    { issuer: undefined, where: '', entries: mapping, groupsClaim: mapping.groupsClaim },
    ...Object.entries(mapping.issuers).map(([issuer, section]) => ({
      issuer,
      where: `issuers["${issuer}"].`,
      entries: section,
      groupsClaim: section.groupsClaim ?? mapping.groupsClaim,
    })),
  ];
}

/** Every subject's and group's entry, in one fixed order: each section's subjects, then its groups. */
export function mappingRules(mapping: OAuthMapping): MappingRule[] {
  return mappingSections(mapping).flatMap((section) =>
    (['subjects', 'groups'] as const).flatMap((kind) => Object.entries(section.entries[kind]).map(([name, rule]) => ({ section, kind, name, rule }))),
  );
}

/** The mapping with each rule replaced by `replace(rule, i)`, `i` its place in `mappingRules`' order. */
export function mapRules(mapping: OAuthMapping, replace: (rule: GrantRule, index: number) => GrantRule): OAuthMapping {
  let next = 0;
  const rules = (entries: Readonly<Record<string, GrantRule>>): Record<string, GrantRule> =>
    Object.fromEntries(Object.entries(entries).map(([name, rule]) => [name, replace(rule, next++)]));
  const top = { subjects: rules(mapping.subjects), groups: rules(mapping.groups) };
  const issuers = Object.fromEntries(
    Object.entries(mapping.issuers).map(([issuer, section]) => [issuer, { ...section, subjects: rules(section.subjects), groups: rules(section.groups) }]),
  );
  return { ...mapping, ...top, issuers };
}

/** Every scope name the mapping defines, at the top and in each issuer's section, each once. */
export function mappingScopeNames(mapping: OAuthMapping): string[] {
  return [...new Set(mappingSections(mapping).flatMap((section) => Object.keys(section.entries.scopes)))];
}

function entries(document: Record<string, unknown>, at: string, fail: (what: string) => never): MappingEntries {
  const scopes = objectField(document, 'scopes', at, fail);
  for (const [name, tools] of Object.entries(scopes)) toolList(tools, `${at}scopes["${name}"]`, fail);
  const rules = (field: 'subjects' | 'groups'): Record<string, GrantRule> => {
    const found = objectField(document, field, at, fail);
    for (const [name, rule] of Object.entries(found)) checkRule(rule, `${at}${field}["${name}"]`, fail);
    return found as Record<string, GrantRule>;
  };
  return { scopes: scopes as Record<string, string[]>, subjects: rules('subjects'), groups: rules('groups') };
}

function checkRule(rule: unknown, where: string, fail: (what: string) => never): void {
  if (!isRecord(rule)) fail(`${where} must be an object with tools, workspace or permissions`);
  const fields = rule as Record<string, unknown>;
  for (const field of Object.keys(fields))
    if (!RULE_FIELDS.has(field)) fail(`${where} has an unknown field "${field}" (expected tools, workspace, permissions)`);
  if (fields.tools !== undefined) toolList(fields.tools, `${where}.tools`, fail);
  if (fields.workspace !== undefined && (typeof fields.workspace !== 'string' || !path.isAbsolute(fields.workspace))) {
    fail(`${where}.workspace must be an absolute path`);
  }
  if (fields.permissions !== undefined) {
    const permissions = fields.permissions;
    const valid =
      isRecord(permissions) &&
      Object.keys(permissions).every((k) => k === 'allow' || k === 'deny') &&
      Object.values(permissions).every((list) => Array.isArray(list));
    if (!valid) fail(`${where}.permissions must be {"allow": [...], "deny": [...]}`);
  }
}

function toolList(value: unknown, where: string, fail: (what: string) => never): void {
  if (!Array.isArray(value) || !value.every((t) => typeof t === 'string' && t !== '')) fail(`${where} must be an array of tool names`);
}

function objectField(document: Record<string, unknown>, field: string, at: string, fail: (what: string) => never): Record<string, unknown> {
  const value = document[field] ?? {};
  if (!isRecord(value)) fail(`${at}${field} must be an object`);
  return value as Record<string, unknown>;
}
