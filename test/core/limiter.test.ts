import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ToolportError } from '#src/core/errors.js';
import { ConcurrencyLimiter, type LimiterOptions } from '#src/core/limiter.js';

function limiter(options: Partial<LimiterOptions> = {}): ConcurrencyLimiter {
  return new ConcurrencyLimiter({ tool: 'Bash', limit: 2, queueSize: 2, ...options });
}

/** Asserts that `acquire` throws QUEUE_FULL with this exact message, details and headers. */
function assertQueueFull(l: ConcurrencyLimiter, message: string, details: unknown): void {
  assert.throws(
    () => l.acquire(),
    (err: unknown) => {
      assert.ok(err instanceof ToolportError);
      assert.equal(err.code, 'QUEUE_FULL');
      assert.equal(err.statusCode, 503);
      assert.equal(err.message, message);
      assert.deepEqual(err.details, details);
      assert.equal(err.retryAfterSeconds, 1);
      return true;
    },
  );
}

describe('ConcurrencyLimiter', () => {
  test('grants up to `limit` slots at once and queues the next call', () => {
    const l = limiter();
    assert.equal(l.acquire(), true);
    assert.equal(l.acquire(), true);
    const third = l.acquire();
    assert.ok(third instanceof Promise);
    assert.deepEqual({ running: l.running, waiting: l.waiting }, { running: 2, waiting: 1 });
  });

  test('a released slot goes to the waiting calls in arrival order (FIFO)', async () => {
    const l = limiter({ limit: 1, queueSize: 3 });
    l.acquire();
    const order: string[] = [];
    const waiters = ['a', 'b', 'c'].map((name) => (l.acquire() as Promise<boolean>).then((held) => held && order.push(name)));
    l.release();
    await Promise.resolve();
    assert.deepEqual(order, ['a']);
    l.release();
    l.release();
    await Promise.all(waiters);
    assert.deepEqual(order, ['a', 'b', 'c']);
    assert.deepEqual({ running: l.running, waiting: l.waiting }, { running: 1, waiting: 0 });
  });

  test('a slot handed to a waiter cannot be taken by a call that arrives later', () => {
    const l = limiter({ limit: 1, queueSize: 1 });
    l.acquire();
    void l.acquire();
    l.release();
    assert.equal(l.running, 1, 'the slot passed straight to the waiter');
    assert.ok(l.acquire() instanceof Promise, 'the newcomer waits');
  });

  test('a call past a full queue is refused with QUEUE_FULL naming the tool, the running and the waiting', () => {
    const l = limiter({ limit: 2, queueSize: 2 });
    l.acquire();
    l.acquire();
    void l.acquire();
    void l.acquire();
    assertQueueFull(l, 'Tool "Bash" is busy: 2 calls running and 2 waiting; retry later.', {
      tool: 'Bash',
      running: 2,
      waiting: 2,
      maxConcurrency: 2,
      queueSize: 2,
    });
    assert.equal(l.waiting, 2, 'the refused call did not join the queue');
  });

  test('queueSize 0 refuses a call at once when every slot is taken, and says "1 call running"', () => {
    const l = limiter({ limit: 1, queueSize: 0 });
    assert.equal(l.acquire(), true);
    assertQueueFull(l, 'Tool "Bash" is busy: 1 call running and 0 waiting; retry later.', {
      tool: 'Bash',
      running: 1,
      waiting: 0,
      maxConcurrency: 1,
      queueSize: 0,
    });
    l.release();
    assert.equal(l.acquire(), true, 'a free slot is granted again');
  });

  test('a waiting call whose signal aborts leaves the queue at once, resolves false, and never gets a slot', async () => {
    const l = limiter({ limit: 1, queueSize: 2 });
    l.acquire();
    const controller = new AbortController();
    const leaving = l.acquire(controller.signal);
    const staying = l.acquire();
    controller.abort(new Error('client gone'));
    assert.equal(await leaving, false);
    assert.equal(l.waiting, 1);
    l.release();
    assert.equal(await staying, true, 'the slot went to the call behind it');
    assert.equal(l.running, 1);
  });

  test('a call with an already aborted signal does not queue when every slot is taken', async () => {
    const l = limiter({ limit: 1, queueSize: 1 });
    l.acquire();
    assert.equal(await l.acquire(AbortSignal.abort()), false);
    assert.equal(l.waiting, 0);
  });

  test('an admitted waiter stops listening to its signal: a later abort changes no count', async () => {
    const l = limiter({ limit: 1, queueSize: 1 });
    l.acquire();
    const controller = new AbortController();
    const waiting = l.acquire(controller.signal);
    l.release();
    assert.equal(await waiting, true);
    controller.abort();
    assert.deepEqual({ running: l.running, waiting: l.waiting }, { running: 1, waiting: 0 });
  });

  test('onChange hears every change of the running and waiting counts', async () => {
    const seen: Array<[number, number]> = [];
    const l = limiter({ limit: 1, queueSize: 2, onChange: (running, waiting) => seen.push([running, waiting]) });
    l.acquire();
    const controller = new AbortController();
    void l.acquire(controller.signal);
    const second = l.acquire();
    controller.abort();
    l.release();
    await second;
    l.release();
    assert.deepEqual(seen, [
      [1, 0],
      [1, 1],
      [1, 2],
      [1, 1],
      [1, 0],
      [0, 0],
    ]);
  });

  test('a limit that is not a positive integer or a negative queue size is refused', () => {
    assert.throws(() => limiter({ limit: 0 }), RangeError);
    assert.throws(() => limiter({ limit: 1.5 }), RangeError);
    assert.throws(() => limiter({ queueSize: -1 }), RangeError);
  });
  test('a named caller holds at most its share of the slots; another caller takes a free one at once', () => {
    const l = limiter({ limit: 4, queueSize: 8, limitPerCaller: 2, queuePerCaller: 4 });
    assert.equal(l.acquire(undefined, 'A'), true);
    assert.equal(l.acquire(undefined, 'A'), true);
    assert.ok(l.acquire(undefined, 'A') instanceof Promise, "A's third call waits although two slots are free");
    assert.equal(l.acquire(undefined, 'B'), true, 'B runs at once');
    assert.deepEqual(
      { running: l.running, waiting: l.waiting, A: l.loadOf('A'), B: l.loadOf('B') },
      {
        running: 3,
        waiting: 1,
        A: { running: 2, waiting: 1 },
        B: { running: 1, waiting: 0 },
      },
    );
  });

  test('past its share of the queue a caller is refused with QUEUE_FULL naming the share, while others still queue', () => {
    const l = limiter({ limit: 2, queueSize: 8, limitPerCaller: 1, queuePerCaller: 2 });
    l.acquire(undefined, 'A');
    void l.acquire(undefined, 'A');
    void l.acquire(undefined, 'A');
    assert.throws(
      () => l.acquire(undefined, 'A'),
      (err: unknown) => {
        assert.ok(err instanceof ToolportError);
        assert.deepEqual(
          { code: err.code, status: err.statusCode, message: err.message, details: err.details, retryAfterSeconds: err.retryAfterSeconds },
          {
            code: 'QUEUE_FULL',
            status: 503,
            message: `Tool "Bash" is busy with this caller's calls: 1 running and 2 waiting, the most one caller may have (1 running, 2 waiting); retry later.`,
            details: { tool: 'Bash', running: 1, waiting: 2, maxConcurrencyPerCaller: 1, queuePerCaller: 2 },
            retryAfterSeconds: 1,
          },
        );
        return true;
      },
    );
    assert.equal(l.acquire(undefined, 'B'), true);
    assert.ok(l.acquire(undefined, 'C') instanceof Promise, 'C queues behind a full house, not refused');
  });

  test('the whole queue full is refused with the tool-wide message even when the caller has room in its share', () => {
    const l = limiter({ limit: 1, queueSize: 2, limitPerCaller: 1, queuePerCaller: 2 });
    l.acquire(undefined, 'A');
    void l.acquire(undefined, 'A');
    void l.acquire(undefined, 'B');
    assertQueueFull(l, 'Tool "Bash" is busy: 1 call running and 2 waiting; retry later.', {
      tool: 'Bash',
      running: 1,
      waiting: 2,
      maxConcurrency: 1,
      queueSize: 2,
    });
  });

  test('waiting callers take turns: a flood from one caller does not hold back a later caller by more than one slot', async () => {
    const l = limiter({ limit: 1, queueSize: 100, limitPerCaller: 1, queuePerCaller: 50 });
    l.acquire(undefined, 'A');
    const order: string[] = [];
    const wait = (caller: string, n: number): Promise<unknown> => (l.acquire(undefined, caller) as Promise<boolean>).then(() => order.push(`${caller}${n}`));
    const waiters = [1, 2, 3, 4, 5].map((n) => wait('A', n));
    waiters.push(wait('B', 1), wait('B', 2), wait('C', 1));
    for (let i = 0; i < 8; i++) {
      const holder = i === 0 ? 'A' : order.at(-1)!.slice(0, 1);
      l.release(holder);
      await Promise.resolve();
    }
    await Promise.all(waiters);
    assert.deepEqual(order, ['A1', 'B1', 'C1', 'A2', 'B2', 'A3', 'A4', 'A5']);
  });

  test("a caller's waiting call runs as soon as one of its own calls ends, when the tool has free slots", async () => {
    const l = limiter({ limit: 4, queueSize: 4, limitPerCaller: 1, queuePerCaller: 4 });
    l.acquire(undefined, 'A');
    const next = l.acquire(undefined, 'A') as Promise<boolean>;
    l.release('A');
    assert.equal(await next, true);
    assert.deepEqual({ running: l.running, waiting: l.waiting }, { running: 1, waiting: 0 });
  });

  test('calls without a caller share only the tool-wide limits', () => {
    const l = limiter({ limit: 3, queueSize: 3, limitPerCaller: 1, queuePerCaller: 0 });
    assert.equal(l.acquire(), true);
    assert.equal(l.acquire(), true);
    assert.equal(l.acquire(), true);
    assert.ok(l.acquire() instanceof Promise);
  });

  test('a waiting caller whose signal aborts leaves its turn; the slot goes to the next caller', async () => {
    const l = limiter({ limit: 1, queueSize: 4, limitPerCaller: 1, queuePerCaller: 2 });
    l.acquire(undefined, 'A');
    const controller = new AbortController();
    const b = l.acquire(controller.signal, 'B') as Promise<boolean>;
    const c = l.acquire(undefined, 'C') as Promise<boolean>;
    controller.abort();
    assert.equal(await b, false);
    l.release('A');
    assert.equal(await c, true);
    assert.deepEqual(
      { running: l.running, waiting: l.waiting, B: l.loadOf('B'), C: l.loadOf('C') },
      {
        running: 1,
        waiting: 0,
        B: { running: 0, waiting: 0 },
        C: { running: 1, waiting: 0 },
      },
    );
  });

  test('release for a caller that holds no slot is a wiring mistake and throws, changing no count', () => {
    const l = limiter({ limit: 2, queueSize: 2 });
    l.acquire(undefined, 'A');
    assert.throws(() => l.release('B'), /holds no slot/);
    assert.deepEqual({ running: l.running, A: l.loadOf('A') }, { running: 1, A: { running: 1, waiting: 0 } });
  });

  test('shares above the tool-wide limits are lowered to them; a share that is not a positive integer is refused', () => {
    const l = limiter({ limit: 2, queueSize: 3, limitPerCaller: 10, queuePerCaller: 10 });
    assert.deepEqual({ limitPerCaller: l.limitPerCaller, queuePerCaller: l.queuePerCaller }, { limitPerCaller: 2, queuePerCaller: 3 });
    assert.throws(() => limiter({ limitPerCaller: 0 }), RangeError);
    assert.throws(() => limiter({ queuePerCaller: -1 }), RangeError);
  });
  test('a freed slot goes to the waiting caller with the fewest calls running, whatever the order of arrival', async () => {
    const l = limiter({ limit: 3, queueSize: 10, limitPerCaller: 2, queuePerCaller: 5 });
    l.acquire(undefined, 'A');
    l.acquire(undefined, 'A');
    l.acquire(undefined, 'C');
    const order: string[] = [];
    const a = (l.acquire(undefined, 'A') as Promise<boolean>).then(() => order.push('A'));
    const c = (l.acquire(undefined, 'C') as Promise<boolean>).then(() => order.push('C'));
    const b = (l.acquire(undefined, 'B') as Promise<boolean>).then(() => order.push('B'));
    l.release('A');
    await Promise.resolve();
    assert.deepEqual(order, ['B'], 'B (none running) goes before A and C (one running each), though it came last');
    l.release('C');
    await Promise.resolve();
    assert.deepEqual(order, ['B', 'C'], 'C, with none running now, before A with one');
    l.release('B');
    await Promise.all([a, b, c]);
    assert.deepEqual(order, ['B', 'C', 'A']);
  });
});
