import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ToolportError } from '../../src/core/errors.js';
import { ConcurrencyLimiter, type LimiterOptions } from '../../src/core/limiter.js';

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
});
