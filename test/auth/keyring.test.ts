import assert from 'node:assert/strict';
import { test } from 'node:test';
import crypto from 'node:crypto';
import { syncBuiltinESMExports } from 'node:module';
import { KNOWN_TOKENS_MAX, Keyring } from '#src/auth/keyring.js';

const KEYS = [
  { label: 'full', key: 'full-secret-0123456789abcdef' },
  { label: 'a', key: 'a-secret-0123456789abcdef', tools: ['Echo', 'Read'] },
  { label: 'b', key: 'b-secret-0123456789abcdef', tools: ['Read', 'Echo'] },
  { label: 'c', key: 'c-secret-0123456789abcdef', tools: ['LS'], workspace: '/srv/workspaces/c' },
];

test('identify names the key a token matches by label, scope and workspace, and nothing for any other token', () => {
  const keyring = new Keyring(KEYS);
  assert.deepEqual(keyring.identify('full-secret-0123456789abcdef'), { label: 'full', tools: undefined, workspace: undefined, permissions: undefined });
  assert.equal(keyring.identify('c-secret-0123456789abcdef')?.label, 'c');
  assert.equal(keyring.identify('c-secret-0123456789abcdef')?.workspace, '/srv/workspaces/c');
  assert.deepEqual([...(keyring.identify('c-secret-0123456789abcdef')?.tools ?? [])], ['LS']);
  for (const token of ['', 'full-secret-0123456789abcde', 'FULL-SECRET-0123456789ABCDEF', 'x']) assert.equal(keyring.identify(token), undefined, token);
});

test('keys with the same tools share one scope object; the identity is made once per key', () => {
  const keyring = new Keyring(KEYS);
  assert.equal(keyring.scopes.length, 2);
  assert.equal(keyring.identify('a-secret-0123456789abcdef')?.tools, keyring.identify('b-secret-0123456789abcdef')?.tools);
  assert.equal(keyring.identify('a-secret-0123456789abcdef'), keyring.identify('a-secret-0123456789abcdef'));
  assert.ok(Object.isFrozen(keyring.identify('a-secret-0123456789abcdef')));
});

test('an empty keyring has size 0 and identifies no one', () => {
  const keyring = new Keyring([]);
  assert.equal(keyring.size, 0);
  assert.deepEqual(keyring.scopes, []);
  assert.equal(keyring.identify('anything'), undefined);
});

test('a token that matched is found again without hashing; failures are not remembered; the memory is bounded', (t) => {
  const keyring = new Keyring(KEYS);
  // The keyring's named import of createHash follows the module object only once synced.
  const hashes = t.mock.method(crypto, 'createHash');
  syncBuiltinESMExports();
  t.after(() => {
    hashes.mock.restore();
    syncBuiltinESMExports();
  });
  assert.equal(keyring.identify('a-secret-0123456789abcdef')?.label, 'a');
  assert.equal(keyring.identify('a-secret-0123456789abcdef')?.label, 'a');
  assert.equal(hashes.mock.callCount(), 1);
  assert.equal(keyring.identify('not-a-key'), undefined);
  assert.equal(keyring.identify('not-a-key'), undefined);
  assert.equal(hashes.mock.callCount(), 3, 'a token that matched nothing is checked again every time');
  // Many distinct tokens that match: the oldest are forgotten, the recently used are kept.
  const many = new Keyring(Array.from({ length: KNOWN_TOKENS_MAX + 10 }, (_, i) => ({ label: `k${i}`, key: `secret-${i}` })));
  for (let i = 0; i < KNOWN_TOKENS_MAX + 10; i++) {
    many.identify(`secret-${i}`);
    many.identify('secret-0');
  }
  hashes.mock.resetCalls();
  assert.equal(many.identify('secret-0')?.label, 'k0');
  assert.equal(many.identify(`secret-${KNOWN_TOKENS_MAX + 9}`)?.label, `k${KNOWN_TOKENS_MAX + 9}`);
  assert.equal(hashes.mock.callCount(), 0);
  assert.equal(many.identify('secret-1')?.label, 'k1');
  assert.equal(hashes.mock.callCount(), 1, 'a token not used for a while was forgotten and is checked again');
});

test('replace: a token remembered for a removed key matches nothing from the next identify on', () => {
  const keyring = new Keyring(KEYS);
  // Twice, so the token is remembered (and found again without hashing) before the keys change.
  assert.equal(keyring.identify('a-secret-0123456789abcdef')?.label, 'a');
  assert.equal(keyring.identify('a-secret-0123456789abcdef')?.label, 'a');
  keyring.replace(KEYS.filter((k) => k.label !== 'a'));
  assert.equal(keyring.identify('a-secret-0123456789abcdef'), undefined);
  assert.equal(keyring.size, 3);
  assert.equal(keyring.identify('b-secret-0123456789abcdef')?.label, 'b');
});

test('replace: a remembered token of a key whose tools changed answers with the new scope; a new key is identified', () => {
  const keyring = new Keyring(KEYS);
  assert.deepEqual([...(keyring.identify('c-secret-0123456789abcdef')?.tools ?? [])], ['LS']);
  keyring.replace([
    ...KEYS.filter((k) => k.label !== 'c'),
    { label: 'c', key: 'c-secret-0123456789abcdef', tools: ['Grep', 'LS'] },
    { label: 'new', key: 'new-secret-0123456789abcdef' },
  ]);
  assert.deepEqual([...(keyring.identify('c-secret-0123456789abcdef')?.tools ?? [])], ['Grep', 'LS']);
  assert.equal(keyring.identify('c-secret-0123456789abcdef')?.workspace, undefined);
  assert.deepEqual(keyring.identify('new-secret-0123456789abcdef'), { label: 'new', tools: undefined, workspace: undefined, permissions: undefined });
  assert.deepEqual(
    keyring.scopes.map((scope) => [...scope]),
    [
      ['Echo', 'Read'],
      ['Grep', 'LS'],
    ],
  );
});

test('replace keeps the scope object of tools that did not change, so what was made for it stays valid', () => {
  const keyring = new Keyring(KEYS);
  const before = keyring.identify('a-secret-0123456789abcdef')?.tools;
  keyring.replace(KEYS.filter((k) => k.label !== 'c'));
  assert.equal(keyring.identify('a-secret-0123456789abcdef')?.tools, before);
  assert.deepEqual(keyring.scopes, [before]);
  // The same tools in another order: a new scope, since a refusal names them in the key's order.
  keyring.replace([{ label: 'a', key: 'a-secret-0123456789abcdef', tools: ['Read', 'Echo'] }]);
  assert.notEqual(keyring.identify('a-secret-0123456789abcdef')?.tools, before);
  assert.deepEqual([...keyring.scopes[0]!], ['Read', 'Echo']);
});

test('a scope entry ending in * takes every tool whose name starts with what comes before it; iteration gives the entries', () => {
  const keyring = new Keyring([{ label: 'agent', key: 'agent-secret-0123456789abcdef', tools: ['Read', 'github__*'] }]);
  const scope = keyring.identify('agent-secret-0123456789abcdef')!.tools!;
  assert.equal(scope.has('Read'), true);
  assert.equal(scope.has('github__create_issue'), true);
  assert.equal(scope.has('github__'), true);
  assert.equal(scope.has('github_x'), false);
  assert.equal(scope.has('Bash'), false);
  assert.deepEqual([...scope], ['Read', 'github__*']);
});
