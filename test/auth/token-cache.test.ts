import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TokenCache } from '#src/auth/token-cache.js';

test('a token is answered until its own expiry, then forgotten', () => {
  const cache = new TokenCache<string>();
  cache.set('t', 'alice', 1000);
  assert.equal(cache.get('t', 999), 'alice');
  assert.equal(cache.get('t', 1000), undefined);
  assert.equal(cache.get('t', 0), undefined, 'an expired entry is dropped');
});

test('the cache is bounded: tokens not seen for a generation are forgotten, tokens in use are kept', () => {
  const cache = new TokenCache<number>(4);
  cache.set('a', 1, Infinity);
  cache.set('b', 2, Infinity);
  // The recent generation is full: it becomes the older one.
  cache.set('c', 3, Infinity);
  assert.equal(cache.get('a', 0), 1, 'moved back into the recent generation');
  cache.set('d', 4, Infinity);
  cache.set('e', 5, Infinity);
  assert.equal(cache.get('b', 0), undefined);
  assert.equal(cache.get('a', 0), 1);
});
