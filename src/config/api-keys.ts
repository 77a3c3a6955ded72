import { type KeySpec } from '../auth/keyring.js';
import { type ServerPermissions, isToolPattern, scopeEntryMatches } from '../core/principal.js';
import { PermissionRuleError } from '../core/permissions.js';
import { PermissionRulesSchema } from '../permissions/load.js';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { ErrorObject, ValidateFunction } from 'ajv';
import { Type, type Static } from 'typebox';
import type { Config } from './config.js';
import { createAjv } from '../core/validator.js';

/** Raised at start-up for a bad key or keys file. The message names the source and the entry, never a key. */
export class ApiKeysError extends Error {
  override readonly name = 'ApiKeysError';
}

export const MIN_KEY_LENGTH = 16;
// RFC 6750 b64token: the characters a Bearer token may hold. A key outside it could never be sent.
const BEARER_TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/;
const BEARER_TOKEN_TEXT = 'letters, digits and - . _ ~ + / (then = padding): the characters of a Bearer token';

const KeyEntry = Type.Object(
  {
    label: Type.String({ minLength: 1, maxLength: 64 }),
    key: Type.String({ minLength: 1 }),
    tools: Type.Optional(Type.Array(Type.String(), { minItems: 1, uniqueItems: true })),
    workspace: Type.Optional(Type.String({ minLength: 1 })),
    permissions: Type.Optional(PermissionRulesSchema),
  },
  { additionalProperties: false },
);
const KeysFile = Type.Array(KeyEntry);
type KeyEntry = Static<typeof KeyEntry>;

// Compiled when a keys file is first read: most servers have none, and an Ajv costs start-up time.
let validateKeysFile: ValidateFunction<Static<typeof KeysFile>> | undefined;

/**
 * The keys a server accepts: `TOOLPORT_API_KEYS` (labelled `key-1`, `key-2`, ... in order, each
 * with access to every served tool) and the scoped keys of `TOOLPORT_API_KEYS_FILE`. Validates
 * strictly and throws `ApiKeysError`; no message ever holds a key's value.
 */
export async function loadApiKeys(
  config: Pick<Config, 'apiKeys' | 'apiKeysFile'>,
  servedTools: readonly string[],
  permissions?: ServerPermissions,
): Promise<KeySpec[]> {
  const keys: KeySpec[] = config.apiKeys.map((key, i) => ({ label: `key-${i + 1}`, key }));
  const envProblems = keys.flatMap((k, i) => {
    const twin = firstWithSameKey(keys, i);
    return [
      ...keyProblems(k.key).map((p) => `key ${i + 1} (${k.label}) ${p}`),
      ...(twin < i ? [`key ${i + 1} (${k.label}) is the same as key ${twin + 1} (${keys[twin]!.label})`] : []),
    ];
  });
  if (envProblems.length > 0) throw new ApiKeysError(`Invalid TOOLPORT_API_KEYS: ${envProblems.join('; ')}.`);
  if (config.apiKeysFile === undefined) return keys;

  const file = config.apiKeysFile;
  const entries = await readKeysFile(file, servedTools, permissions);
  const clashes = entries.flatMap((entry, i) => {
    const sameKey = keys.findIndex((k) => k.key === entry.key);
    const sameLabel = keys.findIndex((k) => k.label === entry.label);
    const envKey = (j: number): string => `TOOLPORT_API_KEYS key ${j + 1} (${keys[j]!.label})`;
    return [
      ...(sameKey >= 0 ? [`${describeEntry(entries, i)} has the same key as ${envKey(sameKey)}`] : []),
      ...(sameLabel >= 0 ? [`${describeEntry(entries, i)} uses the label of ${envKey(sameLabel)}`] : []),
    ];
  });
  if (clashes.length > 0) throw new ApiKeysError(`Invalid TOOLPORT_API_KEYS_FILE ${JSON.stringify(file)}: ${clashes.join('; ')}.`);
  return [
    ...keys,
    ...entries.map(({ label, key, tools, workspace, permissions: rules }) => ({
      label,
      key,
      ...(tools && { tools }),
      ...(workspace !== undefined && { workspace }),
      ...(rules !== undefined && { permissions: rules }),
    })),
  ];
}

async function readKeysFile(file: string, servedTools: readonly string[], permissions: ServerPermissions | undefined): Promise<KeyEntry[]> {
  const fail = (problem: string): never => {
    throw new ApiKeysError(`Invalid TOOLPORT_API_KEYS_FILE ${JSON.stringify(file)}: ${problem}.`);
  };
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'no such file' : code === 'EACCES' ? 'permission denied' : code === 'EISDIR' ? 'it is a directory' : String(code);
    throw new ApiKeysError(`Cannot read TOOLPORT_API_KEYS_FILE ${JSON.stringify(file)}: ${why}.`);
  }
  let data: unknown;
  try {
    data = JSON.parse(text.replace(/^\uFEFF/, ''));
  } catch (err) {
    // Newer V8 messages quote the text around the error, which may be a key: report only where it is.
    fail(`it is not valid JSON${jsonErrorLocation(text, (err as Error).message)}`);
  }
  validateKeysFile ??= createAjv().compile<Static<typeof KeysFile>>(KeysFile);
  if (!validateKeysFile(data)) {
    fail([...new Set((validateKeysFile.errors ?? []).map((e) => describeSchemaError(e, data)))].join('; '));
  }
  const entries = data as KeyEntry[];
  if (entries.length === 0) fail('it holds no keys; list at least one {"label": ..., "key": ...} entry');
  const problems = entries.flatMap((entry, i) => {
    const where = describeEntry(entries, i);
    const unserved = (entry.tools ?? []).filter((t) => !isServed(t, servedTools));
    const twin = firstWithSameKey(entries, i);
    return [
      ...keyProblems(entry.key).map((p) => `${where}: the key ${p}`),
      ...(unserved.length > 0
        ? [
            `${where}: "tools" names ${unserved.map((t) => JSON.stringify(t)).join(', ')}, which ${unserved.length === 1 ? 'is' : 'are'} not served (served tools: ${servedTools.join(', ') || 'none'})`,
          ]
        : []),
      ...(entry.workspace !== undefined && !isAbsolutePath(entry.workspace)
        ? [`${where}: "workspace" must be an absolute path (relative paths would depend on the directory the server starts in)`]
        : []),
      ...ruleProblems(entry, where, permissions),
      ...sameLabelAs(entries, i),
      ...(twin < i ? [`${where} has the same key as ${describeEntry(entries, twin)}`] : []),
    ];
  });
  if (problems.length > 0) fail(problems.join('; '));
  return entries;
}

/**
 * Whether a key's `tools` entry names something served: a served tool, a tool of an upstream's
 * namespace (`github__*` among `servedTools`: its tools may be listed only later), or, for a
 * pattern (`github__*`, `git*`), a prefix some served tool or namespace has.
 */
function isServed(entry: string, servedTools: readonly string[]): boolean {
  if (!isToolPattern(entry)) return servedTools.some((served) => scopeEntryMatches(served, entry));
  if (!/^[a-zA-Z0-9_-]+\*$/.test(entry)) return false;
  const prefix = entry.slice(0, -1);
  return servedTools.some((served) =>
    isToolPattern(served) ? served.startsWith(prefix) || prefix.startsWith(served.slice(0, -1)) : served.startsWith(prefix),
  );
}

/** What is wrong with a key's permission rules, for the first rule that cannot be read; checked as the keyring will compile them. */
function ruleProblems(entry: KeyEntry, where: string, permissions: ServerPermissions | undefined): string[] {
  if (entry.permissions === undefined) return [];
  if (permissions === undefined) return [`${where}: "permissions" cannot be checked here`];
  try {
    permissions.compile([{ where: `${where}, "permissions"`, rules: entry.permissions }]);
    return [];
  } catch (err) {
    if (err instanceof PermissionRuleError) return [err.message];
    throw err;
  }
}

/** An absolute path without NUL bytes; whether it is a directory is checked when the workspaces open. */
function isAbsolutePath(p: string): boolean {
  return path.isAbsolute(p) && !p.includes('\0');
}

/** What is wrong with a key's value, said without showing it. */
function keyProblems(key: string): string[] {
  if (key.length < MIN_KEY_LENGTH) return [`is shorter than ${MIN_KEY_LENGTH} characters (use a long random secret, e.g. \`openssl rand -hex 32\`)`];
  if (!BEARER_TOKEN.test(key)) return [`must consist of ${BEARER_TOKEN_TEXT}`];
  return [];
}

/** The first key equal to key `i`; a duplicate is reported at the later one. Plain comparison is fine at start-up. */
function firstWithSameKey(keys: ReadonlyArray<{ key: string }>, i: number): number {
  return keys.findIndex((k) => k.key === keys[i]!.key);
}

function sameLabelAs(entries: readonly KeyEntry[], i: number): string[] {
  const j = entries.findIndex((e) => e.label === entries[i]!.label);
  return j < i ? [`entries ${j + 1} and ${i + 1} have the same label ${JSON.stringify(entries[i]!.label)}`] : [];
}

function describeEntry(entries: readonly unknown[], i: number): string {
  const label = (entries[i] as { label?: unknown } | null)?.label;
  return typeof label === 'string' && label !== '' ? `entry ${i + 1} (${JSON.stringify(label)})` : `entry ${i + 1}`;
}

/** Ajv's messages never include the data, but ours read better and name the entry. */
function describeSchemaError(e: ErrorObject, data: unknown): string {
  const [index, property] = e.instancePath.split('/').slice(1);
  if (index === undefined) return 'it must be a JSON array of {"label", "key", "tools"?, "workspace"?} objects';
  const where = describeEntry(data as unknown[], Number(index));
  if (property === undefined) {
    if (e.keyword === 'required') return `${where}: "${(e.params as { missingProperty: string }).missingProperty}" is required`;
    if (e.keyword === 'additionalProperties') {
      return `${where}: unknown property ${JSON.stringify((e.params as { additionalProperty: string }).additionalProperty)} (allowed: label, key, tools, workspace, permissions)`;
    }
    return `${where} must be an object with "label", "key" and optionally "tools" and "workspace"`;
  }
  const field = `"${property}"`;
  if (property === 'tools') {
    if (e.keyword === 'minItems') return `${where}: "tools" must name at least one tool (leave it out for every tool)`;
    if (e.keyword === 'uniqueItems') return `${where}: "tools" names a tool more than once`;
    return `${where}: "tools" must be an array of tool names`;
  }
  if (property === 'permissions') {
    return `${where}: "permissions" must be {"allow": [rules], "deny": [rules]}, each rule a string such as "Read(src/**)" or "Bash(npm test)"`;
  }
  if (e.keyword === 'type') return `${where}: ${field} must be a string`;
  if (e.keyword === 'minLength') return `${where}: ${field} must not be empty`;
  if (e.keyword === 'maxLength') return `${where}: ${field} must be at most ${(e.params as { limit: number }).limit} characters`;
  return `${where}: ${field} ${e.message ?? 'is invalid'}`;
}

function jsonErrorLocation(text: string, message: string): string {
  const position = /at position (\d+)/.exec(message)?.[1];
  if (position === undefined) return /end of JSON/.test(message) ? ' (it ends too early)' : '';
  const before = text.slice(0, Number(position)).split('\n');
  return ` (line ${before.length}, column ${before.at(-1)!.length + 1})`;
}
