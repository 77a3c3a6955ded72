import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { IdentityMapper, isTokenPrincipal } from '#src/auth/identity.js';
import { parseMapping } from '#src/auth/mapping.js';
import { TokenRefusal } from '#src/auth/token-refusal.js';
import { ruleCatalog, serverRules } from '#src/permissions/catalog.js';
import { defineTool } from '#src/core/define-tool.js';
import { Type } from 'typebox';

const TOOLS = [
  defineTool({ name: 'Read', description: 'r', inputSchema: Type.Object({}), rules: { specifier: 'path' }, execute: () => ({ content: [] }) }),
  defineTool({ name: 'Write', description: 'w', inputSchema: Type.Object({}), rules: { specifier: 'path' }, execute: () => ({ content: [] }) }),
  defineTool({ name: 'Bash', description: 'b', inputSchema: Type.Object({}), rules: { specifier: 'command' }, execute: () => ({ content: [] }) }),
];

const ISS = 'https://idp.example.com';
const OTHER = 'https://partner.example.org';
const EXP = 1_900_000_000_000;
const tools = (identity: { tools: ReadonlySet<string> | undefined }) => (identity.tools === undefined ? undefined : [...identity.tools]);

describe('IdentityMapper', () => {
  test('the subject becomes the label; tools:<name> scopes become the tool scope; other scopes grant nothing', () => {
    const identity = new IdentityMapper().identify({ iss: ISS, sub: 'alice', client_id: 'claude', scope: 'openid tools:Read tools:github__* email' }, EXP);
    assert.equal(identity.label, 'sub:alice');
    assert.equal(identity.subject, 'alice');
    assert.equal(identity.client, 'claude');
    assert.equal(identity.expiresAt, EXP);
    assert.deepEqual(tools(identity), ['Read', 'github__*']);
    assert.equal(identity.tools?.has('github__search'), true);
    assert.equal(identity.tools?.has('Write'), false);
    assert.ok(isTokenPrincipal(identity));
  });

  test('tools:* grants every tool', () => {
    assert.equal(new IdentityMapper().identify({ iss: ISS, sub: 'a', scope: 'tools:* tools:Read' }, EXP).tools, undefined);
  });

  test('a token with no tool scope may use no tool', () => {
    assert.deepEqual(tools(new IdentityMapper().identify({ iss: ISS, sub: 'a', scope: 'openid' }, EXP)), []);
  });

  test('scp (Entra ID, Okta) is read when scope is absent, and a claim may grant tools as scopes do', () => {
    const mapper = new IdentityMapper({ toolsClaim: 'realm_access.roles' });
    const identity = mapper.identify({ iss: ISS, sub: 'a', scp: ['tools:Read'], realm_access: { roles: ['tools:Grep', 'offline_access'] } }, EXP);
    assert.deepEqual(tools(identity), ['Read', 'Grep']);
  });

  test('tokens granting the same tools share one scope object', () => {
    const mapper = new IdentityMapper();
    const a = mapper.identify({ iss: ISS, sub: 'a', scope: 'tools:Read tools:Grep' }, EXP);
    const b = mapper.identify({ iss: ISS, sub: 'b', scope: 'tools:Grep tools:Read' }, EXP);
    assert.equal(a.tools, b.tools);
  });

  test('the mapping names scopes, and gives subjects and groups tools, a workspace and permission rules', () => {
    const mapping = parseMapping(
      {
        scopes: { reader: ['Read', 'Grep'], admin: ['*'] },
        subjects: { alice: { workspace: '/srv/alice', permissions: { deny: ['Bash(rm:*)', 'Read(.env)'] } } },
        groups: { ops: { tools: ['Bash'], workspace: '/srv/ops' } },
      },
      'oauth.json',
    );
    const mapper = new IdentityMapper({ mapping, permissions: serverRules({ deny: ['Write'] }, ruleCatalog(TOOLS, [])) });
    const alice = mapper.identify({ iss: ISS, sub: 'alice', scope: 'reader', groups: ['ops'] }, EXP);
    assert.deepEqual(tools(alice), ['Read', 'Grep', 'Bash']);
    assert.equal(alice.workspace, '/srv/alice');
    // The subject's rules, over the server's default, as a key's are.
    assert.equal(alice.permissions?.pathRefusal('Read', 'read', '.env')?.message, 'Path ".env" is denied by Read(.env).');
    assert.equal(alice.permissions?.toolRefusal('Write')?.message, 'Tool "Write" is denied by Write.');
    assert.equal(alice.tools?.permissions, alice.permissions);
    const bob = mapper.identify({ iss: ISS, sub: 'bob', scope: 'reader', groups: ['ops'] }, EXP);
    assert.equal(bob.workspace, '/srv/ops');
    assert.equal(bob.permissions?.pathRefusal('Read', 'read', '.env'), undefined);
    assert.equal(bob.permissions?.toolRefusal('Write')?.message, 'Tool "Write" is denied by Write.');
    // Every tool, with the default rules stated in its lists.
    const carol = mapper.identify({ iss: ISS, sub: 'carol', scope: 'admin' }, EXP);
    assert.equal(carol.tools?.has('Anything'), true);
    assert.equal(carol.tools?.permissions, carol.permissions);
  });

  test("a mapping entry's rule that cannot be read stops start-up, naming the entry and the rule", () => {
    const mapping = parseMapping({ groups: { ops: { permissions: { allow: ['Nope'] } } } }, 'oauth.json');
    assert.throws(() => new IdentityMapper({ mapping, permissions: serverRules(undefined, ruleCatalog(TOOLS, [])) }), {
      name: 'PermissionRuleError',
      message: 'TOOLPORT_OAUTH_MAPPING groups["ops"], "permissions": rule "Nope" names "Nope", which is not a served tool',
    });
  });

  test('with several issuers the label names the issuer too', () => {
    assert.equal(new IdentityMapper({ issuers: [ISS, OTHER] }).identify({ iss: ISS, sub: 'alice' }, EXP).label, `sub:alice@${ISS}`);
  });

  test('a client credentials token without sub is known by its client; one with neither is refused', () => {
    assert.equal(new IdentityMapper().identify({ iss: ISS, azp: 'ci-runner' }, EXP).label, 'sub:ci-runner');
    assert.throws(
      () => new IdentityMapper().identify({ iss: ISS }, EXP),
      (err: unknown) => err instanceof TokenRefusal && err.message === 'The access token names no subject (sub) and no client (client_id, azp).',
    );
  });
  test("with several issuers, a subject's and a group's entries apply to the tokens of their own issuer only", () => {
    const mapping = parseMapping(
      {
        issuers: {
          [ISS]: { scopes: { admin: ['*'] }, subjects: { alice: { tools: ['Read'] } }, groups: { admins: { tools: ['*'] } } },
          [OTHER]: { groupsClaim: 'roles', groups: { readers: { tools: ['Read'] } } },
        },
      },
      'oauth.json',
    );
    const mapper = new IdentityMapper({ mapping, issuers: [ISS, OTHER] });
    assert.deepEqual(tools(mapper.identify({ iss: ISS, sub: 'alice' }, EXP)), ['Read']);
    assert.equal(mapper.identify({ iss: ISS, sub: 'bob', groups: ['admins'] }, EXP).tools, undefined);
    assert.equal(mapper.identify({ iss: ISS, sub: 'bob', scope: 'admin' }, EXP).tools, undefined);
    // The same names from the other issuer: nothing of the first issuer's entries.
    assert.deepEqual(tools(mapper.identify({ iss: OTHER, sub: 'alice' }, EXP)), []);
    assert.deepEqual(tools(mapper.identify({ iss: OTHER, sub: 'bob', groups: ['admins'], scope: 'admin' }, EXP)), []);
    // Its own section, with its own groups claim.
    assert.deepEqual(tools(mapper.identify({ iss: OTHER, sub: 'carol', roles: ['readers'] }, EXP)), ['Read']);
    assert.equal(mapper.identify({ iss: OTHER, sub: 'alice' }, EXP).label, `sub:alice@${OTHER}`);
  });

  test('with one issuer, the entries at the top and those of its section both apply', () => {
    const mapping = parseMapping({ subjects: { alice: { tools: ['Read'] } }, issuers: { [ISS]: { subjects: { alice: { tools: ['Write'] } } } } }, 'oauth.json');
    const mapper = new IdentityMapper({ mapping, issuers: [ISS] });
    assert.deepEqual(tools(mapper.identify({ iss: ISS, sub: 'alice' }, EXP)), ['Write', 'Read']);
  });

  test('a mapping with entries that name no issuer, with several issuers configured, is refused', () => {
    const mapping = parseMapping({ groups: { admins: { tools: ['*'] } } }, 'oauth.json');
    assert.throws(() => new IdentityMapper({ mapping, issuers: [ISS, OTHER] }), {
      name: 'OAuthSetupError',
      message:
        'TOOLPORT_OAUTH_MAPPING: the mapping: groups["admins"] names no issuer, and 2 issuers are configured (TOOLPORT_OAUTH_ISSUER), so a token of any of them could claim it; with several issuers, put every entry under "issuers": {"<issuer>": {"groups": {...}}}',
    });
  });

  test('a claim of the wrong type is refused, not guessed at', () => {
    const mapper = new IdentityMapper({ mapping: parseMapping({ groups: { ops: { tools: ['Bash'] } } }, 'oauth.json'), toolsClaim: 'roles' });
    const refused = (claims: Record<string, unknown>, message: string) =>
      assert.throws(
        () => mapper.identify({ iss: ISS, ...claims }, EXP),
        (err: unknown) => err instanceof TokenRefusal && err.error === 'invalid_token' && err.message === message,
      );
    refused({ sub: 42 }, "The access token's sub claim is not a non-empty string.");
    refused({ sub: '' }, "The access token's sub claim is not a non-empty string.");
    refused({ sub: 'a', client_id: ['x'] }, "The access token's client_id claim is not a non-empty string.");
    refused({ sub: 'a', azp: {} }, "The access token's azp claim is not a non-empty string.");
    refused({ sub: 'a', scope: ['tools:*'] }, "The access token's scope claim is not a string of space-separated scopes.");
    refused({ sub: 'a', scp: [1] }, "The access token's scp claim is not a string or an array of strings.");
    refused({ sub: 'a', groups: { ops: true } }, "The access token's groups claim is not a string or an array of strings.");
    refused({ sub: 'a', roles: 7 }, "The access token's roles claim is not a string or an array of strings.");
  });
});
