import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RECONNECT_TIMING, StreamBackoff } from '#src/upstreams/http/stream-backoff.js';

describe('StreamBackoff', () => {
  it('waits at least 0.5 s whatever retry asks, doubling for each stream in a row that ends within 30 s, up to a minute, and gives up after 9', () => {
    const backoff = new StreamBackoff();
    const waits = Array.from({ length: 9 }, () => backoff.ended(5, 0));
    assert.deepEqual(waits, [500, 1000, 2000, 4000, 8000, 16000, 32000, 60000, undefined]);
    assert.equal(backoff.givenUp, 'the upstream ended its event stream 9 times in a row, each within 30 s of opening it');
    assert.deepEqual(RECONNECT_TIMING, { minMs: 500, defaultMs: 1000, maxMs: 60000, stableMs: 30000, maxQuickEnds: 8 });
  });

  it("takes the upstream's retry above the floor, or 1 s without one, and starts again after a stream that lived long", () => {
    const backoff = new StreamBackoff();
    assert.equal(backoff.ended(10, 3000), 3000);
    assert.equal(backoff.ended(10, undefined), 2000);
    assert.equal(backoff.ended(10, undefined), 4000);
    assert.equal(backoff.ended(30_000, undefined), 1000);
    assert.equal(backoff.ended(10, 200), 500);
    assert.equal(backoff.base(0), 500);
  });
});
