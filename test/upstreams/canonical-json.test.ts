import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { canonicalJson, digestOf, nestedDeeperThan, withSortedKeys } from '#src/upstreams/canonical-json.js';

/** The same JSON value with every object's keys in reverse order. */
function reversed(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(reversed);
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(
    Object.keys(value)
      .reverse()
      .map((key) => [key, reversed((value as Record<string, unknown>)[key])]),
  );
}

describe('canonicalJson', () => {
  it('sorts keys at every level by UTF-16 code units and writes no whitespace', () => {
    assert.equal(
      canonicalJson({ b: [3, { z: 1, a: null }], a: 'x', é: true, Z: 1.5, '\u{1F600}': 0, '\uFFFF': 0 }),
      '{"Z":1.5,"a":"x","b":[3,{"a":null,"z":1}],"é":true,"😀":0,"\uFFFF":0}',
    );
  });

  it('writes numbers and strings as JSON.stringify does, and leaves out what JSON leaves out', () => {
    assert.equal(canonicalJson([1e21, 0.1, -0, 'a"\n\u2028\ud800']), '[1e+21,0.1,0,"a\\"\\n\u2028\\ud800"]');
    assert.equal(canonicalJson({ a: undefined, b: () => 1, c: [undefined, Symbol('s')] }), '{"c":[null,null]}');
    assert.throws(() => canonicalJson(1n), { name: 'TypeError', message: 'canonicalJson: a bigint is not a JSON value' });
  });

  it('refuses a value nested past 1000 levels instead of exhausting the stack', () => {
    let deep: unknown = 0;
    for (let i = 0; i < 1200; i++) deep = [deep];
    assert.throws(() => canonicalJson(deep), { name: 'RangeError', message: 'canonicalJson: the value is nested more than 1000 levels deep' });
  });

  it('gives one text per JSON value whatever the order of its keys, and parses back to it', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const text = canonicalJson(value);
        assert.equal(canonicalJson(reversed(value)), text);
        assert.deepEqual(JSON.parse(text), JSON.parse(JSON.stringify(value)));
        assert.deepEqual(withSortedKeys(value), value);
        assert.equal(canonicalJson(withSortedKeys(value)), text);
      }),
    );
  });
});

describe('digestOf', () => {
  it('is the SHA-256 of the canonical JSON, in lowercase hex', () => {
    const value = { name: 'echo', inputSchema: { type: 'object' } };
    assert.equal(digestOf(value), createHash('sha256').update('{"inputSchema":{"type":"object"},"name":"echo"}').digest('hex'));
    assert.match(digestOf(value), /^[0-9a-f]{64}$/);
  });
});

describe('nestedDeeperThan', () => {
  it('counts arrays and objects, not scalars', () => {
    assert.equal(nestedDeeperThan('text', 0), false);
    assert.equal(nestedDeeperThan({}, 0), true);
    assert.equal(nestedDeeperThan({ a: [{ b: 1 }] }, 3), false);
    assert.equal(nestedDeeperThan({ a: [{ b: {} }] }, 3), true);
  });

  it('walks a value far deeper than the stack allows', () => {
    let deep: unknown = 0;
    for (let i = 0; i < 100_000; i++) deep = { d: deep };
    assert.equal(nestedDeeperThan(deep, 64), true);
  });
});
