import assert from 'node:assert/strict';
import { test } from 'node:test';
import { displayName } from '#src/tools/display-name.js';

test('displayName leaves ordinary names as they are, non-ASCII letters and emoji included', () => {
  for (const name of ['a.ts', 'src/app.ts', 'with space.txt', 'naïve/日本語.md', 'emoji-😀.png', 'quote"inside', '-dash', 'a:1:b']) {
    assert.equal(displayName(name), name);
  }
});

test('displayName quotes names with control, format or line-separator characters as JSON that decodes to the name', () => {
  const cases: [string, string][] = [
    ['a\nevil -> secret.txt', '"a\\nevil -> secret.txt"'],
    ['cr\r', '"cr\\r"'],
    ['nul-free\u0001', '"nul-free\\u0001"'],
    ['del\u007f', '"del\\u007f"'],
    ['c1\u0085', '"c1\\u0085"'],
    ['rtl\u202etxt.exe', '"rtl\\u202etxt.exe"'],
    ['isolate\u2066x\u2069', '"isolate\\u2066x\\u2069"'],
    ['zero\u200bwidth', '"zero\\u200bwidth"'],
    ['line\u2028para\u2029', '"line\\u2028para\\u2029"'],
    ['tag\u{e0041}', '"tag\\udb40\\udc41"'],
    ['back\\slash\u0007', '"back\\\\slash\\u0007"'],
  ];
  for (const [name, shown] of cases) {
    assert.equal(displayName(name), shown, JSON.stringify(name));
    assert.equal(JSON.parse(shown), name);
  }
});

test('displayName quotes names that would look quoted, names with white space at either end, and names holding the separator', () => {
  assert.equal(displayName('"quoted"'), '"\\"quoted\\""');
  assert.equal(displayName(' lead'), '" lead"');
  assert.equal(displayName('trail '), '"trail "');
  assert.equal(displayName('fake -> target'), 'fake -> target');
  assert.equal(displayName('fake -> target', ' -> '), '"fake -> target"');
});
