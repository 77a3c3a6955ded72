import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SparePool, type Spare } from '#src/os/sandbox/spare-pool.js';

/** A spare the test starts and ends by hand: `finish` resolves its start, `end` ends it as if it died. */
class FakeSpare implements Spare {
  static made: FakeSpare[] = [];
  readonly id = FakeSpare.made.length;
  alive = true;
  discarded = false;
  readonly #onEnd: () => void;

  constructor(onEnd: () => void) {
    this.#onEnd = onEnd;
    FakeSpare.made.push(this);
  }

  discard(): void {
    this.discarded = true;
    this.alive = false;
  }

  end(): void {
    this.alive = false;
    this.#onEnd();
  }
}

/** A pool whose starts wait for the test (`release`), and fail when `failing` is set then. */
function pool(size: number, idleMs = 60_000) {
  FakeSpare.made = [];
  const pending: Array<() => void> = [];
  const state = { failing: false, starts: 0 };
  const spares = new SparePool<FakeSpare>({
    size,
    idleMs,
    start: (onEnd) => {
      state.starts++;
      return new Promise((resolve, reject) => pending.push(() => (state.failing ? reject(new Error('cannot start')) : resolve(new FakeSpare(onEnd)))));
    },
  });
  /** Lets every start asked for so far finish. */
  const release = async (): Promise<void> => {
    for (const finish of pending.splice(0)) finish();
    await new Promise((resolve) => setImmediate(resolve));
  };
  return { spares, release, state };
}

test('the first use starts its own spare; after each use the pool starts one more than the most uses at once, up to its size', async () => {
  const { spares, release } = pool(3);
  const used = spares.use(async (spare) => spare.id);
  await release();
  assert.equal(await used, 0);
  assert.deepEqual(spares.counts, { ready: 0, starting: 2 }, 'one use at a time: two start once it is over');
  await release();
  assert.deepEqual(spares.counts, { ready: 2, starting: 0 });
  // Three at once: the pool grows to its size (3), not to four.
  const three = Promise.all([1, 2, 3].map(() => spares.use(async () => {})));
  await release();
  await three;
  await release();
  assert.deepEqual(spares.counts, { ready: 3, starting: 0 });
});

test('uses take the spare that has waited longest, each once, and the pool tops up after each', async () => {
  const { spares, release } = pool(2);
  await Promise.all([spares.use(async () => {}), release()]);
  await release();
  const first = await spares.use(async (spare) => spare.id);
  const second = await spares.use(async (spare) => spare.id);
  assert.deepEqual([first, second], [1, 2]);
  await release();
  assert.deepEqual(spares.counts, { ready: 2, starting: 0 });
  const seen = new Set<number>();
  for (let i = 0; i < 6; i++) {
    seen.add(await spares.use(async (spare) => spare.id));
    await release();
  }
  assert.equal(seen.size, 6, 'no spare is used twice');
});

test('a use that finds only spares still starting waits for the next one rather than starting its own', async () => {
  const { spares, release, state } = pool(2);
  await Promise.all([spares.use(async () => {}), release()]);
  assert.equal(spares.counts.starting, 2);
  const startsBefore = state.starts;
  const waiting = spares.use(async (spare) => spare.id);
  await release();
  assert.equal(await waiting, 1);
  assert.equal(state.starts, startsBefore + 1, 'one start to top up after the use, none for the use itself');
});

test('a spare that ends while it waits is dropped and never handed out', async () => {
  const { spares, release } = pool(2);
  await Promise.all([spares.use(async () => {}), release()]);
  await release();
  FakeSpare.made[1]!.end();
  assert.equal(spares.counts.ready, 1);
  assert.equal(await spares.use(async (spare) => spare.id), 2);
});

test('a spare that cannot start costs one attempt per use, never a loop, and the use sees why', async () => {
  const { spares, release, state } = pool(4);
  state.failing = true;
  const used = assert.rejects(
    spares.use(async () => {}),
    /cannot start/,
  );
  await release();
  await used;
  await release();
  // The failed use still tops up: two attempts, both failed, and nothing more until the next use.
  assert.equal(state.starts, 1 + 2);
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(state.starts, 3);
  assert.deepEqual(spares.counts, { ready: 0, starting: 0 });
});

test('a use waiting for a spare whose start fails starts one of its own', async () => {
  const { spares, release, state } = pool(1);
  await Promise.all([spares.use(async () => {}), release()]);
  assert.equal(spares.counts.starting, 1);
  const waiting = assert.rejects(
    spares.use(async (spare) => spare.id),
    /cannot start/,
  );
  state.failing = true;
  // The one it waits for fails; so does its own start, whose error it then reports.
  await release();
  await release();
  await waiting;
  assert.equal(state.starts, 1 + 1 + 1 + 1, 'its own start, and one to top up after it');
});

test('an idle pool ends its spares, and the next use starts them again', (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const { spares, release } = pool(2, 1_000);
  return (async () => {
    await Promise.all([spares.use(async () => {}), release()]);
    await release();
    assert.equal(spares.counts.ready, 2);
    t.mock.timers.tick(999);
    assert.equal(spares.counts.ready, 2, 'not before the idle time');
    t.mock.timers.tick(1);
    assert.equal(spares.counts.ready, 0);
    assert.ok(FakeSpare.made.slice(1).every((spare) => spare.discarded));
    await Promise.all([spares.use(async () => {}), release()]);
    await release();
    assert.equal(spares.counts.ready, 2);
  })();
});

test('a use keeps the pool from going idle while it runs', (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const { spares, release } = pool(2, 1_000);
  return (async () => {
    await Promise.all([spares.use(async () => {}), release()]);
    await release();
    let finish: () => void = () => {};
    const long = spares.use(() => new Promise<void>((resolve) => (finish = resolve)));
    await new Promise((resolve) => setImmediate(resolve));
    t.mock.timers.tick(5_000);
    assert.equal(spares.counts.ready, 1, 'the other spare waits on while a use runs');
    finish();
    await long;
    await release();
    assert.equal(spares.counts.ready, 2);
    t.mock.timers.tick(1_000);
    assert.equal(spares.counts.ready, 0);
  })();
});

test('a closed pool ends its spares, and ones that finish starting later are ended too', async () => {
  const { spares, release } = pool(2);
  await Promise.all([spares.use(async () => {}), release()]);
  await release();
  // One use takes a ready spare and, once over, asks for another, which is still starting at the close.
  await spares.use(async () => {});
  assert.deepEqual(spares.counts, { ready: 1, starting: 1 });
  spares.close();
  assert.equal(spares.counts.ready, 0);
  await release();
  assert.deepEqual(spares.counts, { ready: 0, starting: 0 });
  const unused = FakeSpare.made.filter((spare) => ![0, 1].includes(spare.id));
  assert.equal(unused.length, 2);
  assert.ok(
    unused.every((spare) => spare.discarded),
    'the one that waited and the one that finished starting after the close',
  );
});

test('uses beyond the spares starting start their own instead of waiting for a spare another use waits for', async () => {
  const { spares, release, state } = pool(2);
  await Promise.all([spares.use(async () => {}), release()]);
  assert.equal(spares.counts.starting, 2);
  const startsBefore = state.starts;
  // Four uses at once, each held until all four have a spare: with two starting, two must start their own.
  let holding = 0;
  let releaseAll: () => void = () => {};
  const all = new Promise<void>((resolve) => (releaseAll = resolve));
  const uses = Array.from({ length: 4 }, () =>
    spares.use(async (spare) => {
      if (++holding === 4) releaseAll();
      await all;
      return spare.id;
    }),
  );
  await release();
  const ids = await Promise.all(uses);
  assert.equal(new Set(ids).size, 4);
  assert.equal(state.starts - startsBefore, 2 + 2, 'two for the uses that found none starting for them, two to top up after');
});
