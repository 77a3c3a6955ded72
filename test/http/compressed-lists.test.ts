import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { chooseCoding, codedEntityTag, compressedBody } from '#src/http/compressed-lists.js';
import { entityTag } from '#src/http/entity-tag.js';

describe('chooseCoding', () => {
  const cases: Array<[string | undefined, string]> = [
    [undefined, 'identity'],
    ['', 'identity'],
    ['gzip', 'gzip'],
    ['GZIP', 'gzip'],
    ['x-gzip', 'gzip'],
    ['br', 'br'],
    ['gzip, deflate, br', 'br'],
    ['gzip;q=1.0, br;q=0.1', 'br'],
    ['br;q=0, gzip', 'gzip'],
    ['br; q=0.0, gzip;q=0', 'identity'],
    ['*', 'br'],
    ['*;q=0', 'identity'],
    ['*, br;q=0', 'gzip'],
    ['identity;q=0', 'identity'],
    ['deflate', 'identity'],
  ];
  for (const [header, coding] of cases) {
    test(`${JSON.stringify(header)} gets ${coding}`, () => {
      assert.equal(chooseCoding(header), coding);
    });
  }
});

describe('codedEntityTag', () => {
  test("the identity body's tag, with -br or -gz inside the quotes", () => {
    const body = Buffer.from('[]');
    const tag = entityTag(body);
    assert.equal(codedEntityTag(body, 'identity'), tag);
    assert.equal(codedEntityTag(body, 'br'), `${tag.slice(0, -1)}-br"`);
    assert.equal(codedEntityTag(body, 'gzip'), `${tag.slice(0, -1)}-gz"`);
  });
});

describe('compressedBody', () => {
  test('compresses a body once per coding: the same promise while it is made, then the same Buffer', async () => {
    const body = Buffer.from('x'.repeat(5000));
    const first = compressedBody(body, 'gzip');
    assert.equal(compressedBody(body, 'gzip'), first);
    const made = await first;
    assert.equal(compressedBody(body, 'gzip'), made);
    assert.ok(made.length < 100);
    assert.notEqual(await compressedBody(body, 'br'), made);
  });
});
