import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, test } from 'node:test';
import { parseMapping, readMapping } from '../../src/auth/mapping.js';
import { OAuthSetupError } from '../../src/auth/token-refusal.js';
import { temporaryDirectory } from '../support/workspace.js';

function assertRefused(document: unknown, message: string): void {
  assert.throws(
    () => parseMapping(document, 'oauth.json'),
    (err: unknown) =>
      err instanceof OAuthSetupError && err.variable === 'TOOLPORT_OAUTH_MAPPING' && err.message === `TOOLPORT_OAUTH_MAPPING: oauth.json: ${message}`,
  );
}

describe('the mapping file', () => {
  test('an empty object maps nothing, and groups are read from "groups" by default', () => {
    assert.deepEqual(parseMapping({}, 'oauth.json'), { scopes: {}, groupsClaim: 'groups', subjects: {}, groups: {} });
  });

  test('each malformed entry is refused, naming it', () => {
    assertRefused([], 'expected a JSON object');
    assertRefused({ users: {} }, 'unknown field "users" (expected scopes, groupsClaim, subjects, groups)');
    assertRefused({ scopes: { reader: 'Read' } }, 'scopes["reader"] must be an array of tool names');
    assertRefused({ groupsClaim: '' }, 'groupsClaim must be a non-empty string');
    assertRefused({ subjects: { alice: { workspace: 'relative/dir' } } }, 'subjects["alice"].workspace must be an absolute path');
    assertRefused({ groups: { ops: { tools: ['Bash'], role: 'x' } } }, 'groups["ops"] has an unknown field "role" (expected tools, workspace, permissions)');
    assertRefused({ groups: { ops: { permissions: { allow: 'Read' } } } }, 'groups["ops"].permissions must be {"allow": [...], "deny": [...]}');
  });

  test('a file that cannot be read or is not JSON is refused, naming the variable', async (t) => {
    const dir = await temporaryDirectory(t);
    await assert.rejects(readMapping(path.join(dir, 'missing.json')), {
      message: `TOOLPORT_OAUTH_MAPPING: cannot read ${path.join(dir, 'missing.json')}: ENOENT`,
    });
    await writeFile(path.join(dir, 'bad.json'), '{');
    await assert.rejects(readMapping(path.join(dir, 'bad.json')), (err: Error) =>
      err.message.startsWith(`TOOLPORT_OAUTH_MAPPING: ${path.join(dir, 'bad.json')} is not valid JSON`),
    );
  });
});
