import { readFile } from 'node:fs/promises';
import type { ValidateFunction } from 'ajv';
import { Type, type Static } from 'typebox';
import { PermissionRuleError, type PermissionRules, type RuleCatalog } from '../core/permissions.js';
import { compilePermissions } from './rules.js';
import { createAjv } from '../core/validator.js';

/** The shape of a rule list, in the keys file (`"permissions"`) and in TOOLPORT_PERMISSIONS's file. */
export const PermissionRulesSchema = Type.Object(
  {
    allow: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 4096 }), { maxItems: 1000 })),
    deny: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 4096 }), { maxItems: 1000 })),
  },
  { additionalProperties: false },
);

/** Raised at start-up for a permissions file that cannot be read or holds a bad rule; the message names the file and the rule. */
export class PermissionsFileError extends Error {
  override readonly name = 'PermissionsFileError';
}

let validate: ValidateFunction<Static<typeof PermissionRulesSchema>> | undefined;

/**
 * The server's default rules (`TOOLPORT_PERMISSIONS`), checked against the served tools: every
 * key inherits them and may narrow them. Undefined when the variable is not set.
 */
export async function loadDefaultPermissions(file: string | undefined, catalog: RuleCatalog): Promise<PermissionRules | undefined> {
  if (file === undefined) return undefined;
  const fail = (problem: string): never => {
    throw new PermissionsFileError(`Invalid TOOLPORT_PERMISSIONS ${JSON.stringify(file)}: ${problem}.`);
  };
  let text = '';
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    fail(code === 'ENOENT' ? 'no such file' : code === 'EACCES' ? 'permission denied' : code === 'EISDIR' ? 'it is a directory' : `cannot be read (${code})`);
  }
  let data: unknown;
  try {
    data = JSON.parse(text.replace(/^\uFEFF/, ''));
  } catch (err) {
    fail(`it is not valid JSON (${(err as Error).message})`);
  }
  validate ??= createAjv().compile(PermissionRulesSchema);
  if (!validate(data)) {
    const first = validate.errors?.[0];
    fail(
      `${first?.instancePath === '' ? 'the file' : (first?.instancePath ?? 'the file')} ${first?.message ?? 'is not valid'}; it must be {"allow": [rules], "deny": [rules]}`,
    );
  }
  const rules = data as PermissionRules;
  try {
    compilePermissions([{ where: 'the default', rules }], catalog);
  } catch (err) {
    if (err instanceof PermissionRuleError) fail(err.message.replace(/^the default: /, ''));
    throw err;
  }
  return rules;
}
