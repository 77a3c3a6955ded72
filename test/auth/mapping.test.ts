import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, test } from 'node:test';
import { checkMappingIssuers, parseMapping, readMapping } from '#src/auth/mapping.js';
import { OAuthSetupError } from '#src/auth/token-refusal.js';
import { temporaryDirectory } from '../support/workspace.js';

const ISS = 'https://idp.example.com';
const OTHER = 'https://partner.example.org';

function assertRefused(document: unknown, message: string): void {
  assert.throws(
    () => parseMapping(document, 'oauth.json'),
    (err: unknown) =>
      err instanceof OAuthSetupError && err.variable === 'TOOLPORT_OAUTH_MAPPING' && err.message === `TOOLPORT_OAUTH_MAPPING: oauth.json: ${message}`,
  );
}

describe('the mapping file', () => {
  test('an empty object maps nothing, and groups are read from "groups" by default', () => {
    assert.deepEqual(parseMapping({}, 'oauth.json'), { scopes: {}, groupsClaim: 'groups', subjects: {}, groups: {}, issuers: {} });
  });

  test('each malformed entry is refused, naming it', () => {
    assertRefused([], 'expected a JSON object');
    assertRefused({ users: {} }, 'unknown field "users" (expected scopes, groupsClaim, subjects, groups, issuers)');
    assertRefused({ scopes: { reader: 'Read' } }, 'scopes["reader"] must be an array of tool names');
    assertRefused({ groupsClaim: '' }, 'groupsClaim must be a non-empty string');
    assertRefused({ subjects: { alice: { workspace: 'relative/dir' } } }, 'subjects["alice"].workspace must be an absolute path');
    assertRefused({ groups: { ops: { tools: ['Bash'], role: 'x' } } }, 'groups["ops"] has an unknown field "role" (expected tools, workspace, permissions)');
    assertRefused({ groups: { ops: { permissions: { allow: 'Read' } } } }, 'groups["ops"].permissions must be {"allow": [...], "deny": [...]}');
    assertRefused({ issuers: [] }, 'issuers must be an object');
    assertRefused({ issuers: { [ISS]: [] } }, `issuers["${ISS}"] must be an object with scopes, groupsClaim, subjects or groups`);
    assertRefused({ issuers: { [ISS]: { issuers: {} } } }, `issuers["${ISS}"] has an unknown field "issuers" (expected scopes, groupsClaim, subjects, groups)`);
    assertRefused({ issuers: { [ISS]: { groupsClaim: 3 } } }, `issuers["${ISS}"].groupsClaim must be a non-empty string`);
    assertRefused(
      { issuers: { [ISS]: { subjects: { alice: { workspace: 'x' } } } } },
      `issuers["${ISS}"].subjects["alice"].workspace must be an absolute path`,
    );
    assertRefused({ issuers: { [ISS]: { scopes: { reader: [1] } } } }, `issuers["${ISS}"].scopes["reader"] must be an array of tool names`);
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
  test('entries bound to their issuer are read, each section keeping its own groups claim', () => {
    const document = {
      groupsClaim: 'roles',
      issuers: { [ISS]: { subjects: { alice: { tools: ['Read'] } } }, [OTHER]: { groupsClaim: 'groups', groups: { ops: {} } } },
    };
    assert.deepEqual(parseMapping(document, 'oauth.json'), {
      scopes: {},
      groupsClaim: 'roles',
      subjects: {},
      groups: {},
      issuers: {
        [ISS]: { scopes: {}, subjects: { alice: { tools: ['Read'] } }, groups: {} },
        [OTHER]: { scopes: {}, subjects: {}, groups: { ops: {} }, groupsClaim: 'groups' },
      },
    });
  });

  test('start-up refuses a mapping whose entries are not bound to the configured issuers, saying why', () => {
    const refused = (document: unknown, issuers: string[], message: string) =>
      assert.throws(
        () => checkMappingIssuers(parseMapping(document, 'oauth.json'), issuers, 'oauth.json'),
        (err: unknown) => err instanceof OAuthSetupError && err.message === `TOOLPORT_OAUTH_MAPPING: oauth.json: ${message}`,
      );
    const ambiguous = (field: string, name: string) =>
      `${field}["${name}"] names no issuer, and 2 issuers are configured (TOOLPORT_OAUTH_ISSUER), so a token of any of them could claim it; ` +
      `with several issuers, put every entry under "issuers": {"<issuer>": {"${field}": {...}}}`;
    refused({ subjects: { alice: { tools: ['Read'] } } }, [ISS, OTHER], ambiguous('subjects', 'alice'));
    refused({ groups: { admins: { tools: ['*'] } }, issuers: { [ISS]: {} } }, [ISS, OTHER], ambiguous('groups', 'admins'));
    refused({ scopes: { admin: ['*'] } }, [ISS, OTHER], ambiguous('scopes', 'admin'));
    refused(
      { issuers: { 'https://idp.example.com/': {} } },
      [ISS],
      `issuers["https://idp.example.com/"] is not a configured issuer (TOOLPORT_OAUTH_ISSUER: ${ISS}); write it exactly as the issuer's metadata names it`,
    );
    // One issuer: entries at the top are its own. Several: each under its issuer, groupsClaim at the top as their default.
    checkMappingIssuers(parseMapping({ subjects: { alice: {} }, issuers: { [ISS]: {} } }, 'oauth.json'), [ISS]);
    checkMappingIssuers(parseMapping({ groupsClaim: 'roles', issuers: { [ISS]: { groups: { a: {} } }, [OTHER]: {} } }, 'oauth.json'), [ISS, OTHER]);
  });
});
