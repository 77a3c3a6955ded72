import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ByteBudget } from '#src/upstreams/byte-budget.js';

describe('ByteBudget', () => {
  it('lets readers hold bytes up to the limit; past it a reader waits until others free enough', async () => {
    const peaks: number[] = [];
    const budget = new ByteBudget(100, (total) => peaks.push(total));
    const [a, b] = [budget.share(), budget.share()];
    assert.equal(a.room(60), undefined);
    const waiting = b.room(60);
    assert.ok(waiting !== undefined, 'b waits: 120 would pass 100');
    let woken = false;
    void waiting.then(() => (woken = true));
    a.hold(50);
    await Promise.resolve();
    assert.equal(woken, false, '50 + 60 still passes 100');
    a.done();
    await waiting;
    assert.equal(budget.held, 60);
    assert.equal(Math.max(...peaks), 60);
  });

  it('never stops the oldest reader holding bytes, whoever waits first, so readers that each hold a part cannot wait for each other', async () => {
    const budget = new ByteBudget(100);
    const [oldest, middle, newest] = [budget.share(), budget.share(), budget.share()];
    assert.equal(oldest.room(40), undefined);
    assert.equal(middle.room(30), undefined);
    assert.equal(newest.room(30), undefined);
    const newestWaits = newest.room(50);
    const middleWaits = middle.room(50);
    assert.ok(newestWaits !== undefined && middleWaits !== undefined);
    // The oldest goes on past the limit.
    assert.equal(oldest.room(50), undefined);
    assert.equal(budget.held, 150);
    let newestWoken = false;
    void newestWaits.then(() => (newestWoken = true));
    oldest.done();
    // The middle one is the oldest holder now, though it began waiting second: it goes on past the limit (60 + 50).
    await middleWaits;
    assert.equal(newestWoken, false);
    assert.equal(budget.held, 110);
    middle.done();
    await newestWaits;
    assert.equal(budget.held, 80);
  });
});
