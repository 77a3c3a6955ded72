import assert from 'node:assert/strict';
import { test } from 'node:test';
import { GenerationCache } from '#src/core/generation-cache.js';

test('a million distinct keys leave at most max entries, and the last ones are all there', () => {
  const cache = new GenerationCache<number>(1000);
  for (let i = 0; i < 1_000_000; i++) {
    cache.set(`k${i}`, i);
    assert.ok(cache.size <= 1000);
  }
  for (let i = 1_000_000 - 500; i < 1_000_000; i++) assert.equal(cache.get(`k${i}`), i);
});

test('an entry seen in each generation is kept; one not seen for two generations is forgotten', () => {
  const cache = new GenerationCache<string>(4);
  cache.set('kept', 'a');
  cache.set('dropped', 'b');
  for (let round = 0; round < 10; round++) {
    cache.set(`x${round}`, 'x');
    cache.set(`y${round}`, 'y');
    assert.equal(cache.get('kept'), 'a', `round ${round}`);
  }
  assert.equal(cache.get('dropped'), undefined);
  assert.ok(cache.size <= 4);
});

test('delete and clear forget entries in both generations', () => {
  const cache = new GenerationCache<number>(4);
  cache.set('a', 1);
  cache.set('b', 2);
  cache.set('c', 3); // a and b are now the older generation
  cache.delete('a');
  assert.equal(cache.get('a'), undefined);
  assert.equal(cache.get('b'), 2);
  cache.clear();
  assert.equal(cache.size, 0);
  assert.equal(cache.get('b'), undefined);
  assert.equal(cache.get('c'), undefined);
});
