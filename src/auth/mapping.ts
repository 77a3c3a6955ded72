import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { OAuthSetupError } from './token-refusal.js';

/** What a subject or a group is given besides what its token's scopes grant. */
export interface GrantRule {
  /** Tools granted (names, `prefix*` patterns, or `*` for all), added to what the scopes grant. */
  readonly tools?: readonly string[];
  /** Its own workspace, an absolute path, as a key may have. */
  readonly workspace?: string;
  /** Permission rules in the keys file's form (`{"allow": [...], "deny": [...]}`), passed on as they are. */
  readonly permissions?: unknown;
}

/**
 * The mapping file (TOOLPORT_OAUTH_MAPPING): scope names of the provider's own choosing mapped to
 * tools, and subjects (`sub`) and groups (the values of `groupsClaim`) given tools, a workspace
 * or permission rules.
 */
export interface OAuthMapping {
  readonly scopes: Readonly<Record<string, readonly string[]>>;
  /** The claim (dotted path) that lists a token's groups (default `groups`). */
  readonly groupsClaim: string;
  readonly subjects: Readonly<Record<string, GrantRule>>;
  readonly groups: Readonly<Record<string, GrantRule>>;
}

export const EMPTY_MAPPING: OAuthMapping = Object.freeze({ scopes: {}, groupsClaim: 'groups', subjects: {}, groups: {} });

const VARIABLE = 'TOOLPORT_OAUTH_MAPPING';
const TOP_LEVEL = new Set(['scopes', 'groupsClaim', 'subjects', 'groups']);
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

/** Checks a mapping document; `where` names it in errors. */
export function parseMapping(document: unknown, where: string): OAuthMapping {
  const fail = (what: string): never => {
    throw new OAuthSetupError(VARIABLE, `${where}: ${what}`);
  };
  if (!isObject(document)) return fail('expected a JSON object');
  for (const field of Object.keys(document)) if (!TOP_LEVEL.has(field)) fail(`unknown field "${field}" (expected scopes, groupsClaim, subjects, groups)`);
  const scopes = objectField(document, 'scopes', fail);
  for (const [name, tools] of Object.entries(scopes)) toolList(tools, `scopes["${name}"]`, fail);
  const groupsClaim = document.groupsClaim ?? 'groups';
  if (typeof groupsClaim !== 'string' || groupsClaim === '') fail('groupsClaim must be a non-empty string');
  const rules = (field: 'subjects' | 'groups'): Record<string, GrantRule> => {
    const entries = objectField(document, field, fail);
    for (const [name, rule] of Object.entries(entries)) checkRule(rule, `${field}["${name}"]`, fail);
    return entries as Record<string, GrantRule>;
  };
  return { scopes: scopes as Record<string, string[]>, groupsClaim: groupsClaim as string, subjects: rules('subjects'), groups: rules('groups') };
}

function checkRule(rule: unknown, where: string, fail: (what: string) => never): void {
  if (!isObject(rule)) fail(`${where} must be an object with tools, workspace or permissions`);
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
      isObject(permissions) &&
      Object.keys(permissions).every((k) => k === 'allow' || k === 'deny') &&
      Object.values(permissions).every((list) => Array.isArray(list));
    if (!valid) fail(`${where}.permissions must be {"allow": [...], "deny": [...]}`);
  }
}

function toolList(value: unknown, where: string, fail: (what: string) => never): void {
  if (!Array.isArray(value) || !value.every((t) => typeof t === 'string' && t !== '')) fail(`${where} must be an array of tool names`);
}

function objectField(document: Record<string, unknown>, field: string, fail: (what: string) => never): Record<string, unknown> {
  const value = document[field] ?? {};
  if (!isObject(value)) fail(`${field} must be an object`);
  return value as Record<string, unknown>;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
