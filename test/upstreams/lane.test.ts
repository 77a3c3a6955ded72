import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ListingLane } from '#src/upstreams/lane.js';

/** A lane whose applications the test ends one by one (`finish`), recording what it applied and what failed. */
function lane(fail?: string) {
  const started: string[] = [];
  const failures: unknown[] = [];
  const endings: Array<() => void> = [];
  const listings = new ListingLane<string>(
    (listing) => {
      started.push(listing);
      return new Promise<void>((resolve, reject) => endings.push(() => (listing === fail ? reject(new Error(`${listing} broke`)) : resolve())));
    },
    (err) => failures.push(err),
  );
  const finish = async (): Promise<void> => {
    endings.shift()!();
    for (let i = 0; i < 5; i++) await Promise.resolve();
  };
  return { listings, started, failures, finish };
}

describe('ListingLane', () => {
  it('applies one listing at a time; of those given meanwhile only the newest is applied, and every giver hears when it is', async () => {
    const { listings, started, finish } = lane();
    const heard: string[] = [];
    void listings.give('a').then(() => heard.push('a'));
    void listings.give('b').then(() => heard.push('b'));
    void listings.give('c').then(() => heard.push('c'));
    assert.deepEqual(started, ['a'], 'one at a time');
    assert.equal(listings.settled, false);
    await finish();
    assert.deepEqual(started, ['a', 'c'], 'b was superseded before it started');
    assert.deepEqual(heard, ['a']);
    await finish();
    assert.deepEqual(heard, ['a', 'b', 'c'], 'b is settled by c');
    assert.equal(listings.settled, true);
  });

  it('settles a listing whose application failed, saying why, and applies the next', async () => {
    const { listings, started, failures, finish } = lane('a');
    const first = listings.give('a');
    const second = listings.give('b');
    await finish();
    await first;
    assert.deepEqual(
      failures.map((err) => (err as Error).message),
      ['a broke'],
    );
    assert.deepEqual(started, ['a', 'b']);
    await finish();
    await second;
  });

  it('settle waits for what was given before it, and resolves at once when nothing waits', async () => {
    const { listings, finish } = lane();
    await listings.settle();
    void listings.give('a');
    let settled = false;
    void listings.settle().then(() => (settled = true));
    await Promise.resolve();
    assert.equal(settled, false);
    await finish();
    assert.equal(settled, true);
  });

  it('starts a new run for a listing given once the last run ended', async () => {
    const { listings, started, finish } = lane();
    void listings.give('a');
    await finish();
    void listings.give('b');
    assert.deepEqual(started, ['a', 'b']);
    await finish();
    assert.equal(listings.settled, true);
  });
});
