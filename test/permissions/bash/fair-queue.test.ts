import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { checkCommandLine, MAX_LINE_BYTES, parseCommandPattern } from '#src/permissions/bash/check.js';
import { FairQueue } from '#src/permissions/bash/fair-queue.js';

const RULES = { allow: ['git status:*', 'echo:*'].map(parseCommandPattern), deny: [parseCommandPattern('rm:*')] };

// Lines of 64 KiB a hostile caller would send: the longest the rules read, each as costly as a line that size can be.
const HOSTILE = [
  `echo ${'a '.repeat(MAX_LINE_BYTES / 2 - 3)}`,
  `echo "${'\\\\\n'.repeat(MAX_LINE_BYTES / 3 - 4)}"`,
  ')'.repeat(MAX_LINE_BYTES),
  `echo ${'$x'.repeat(MAX_LINE_BYTES / 2 - 3)}`,
];

describe('FairQueue', () => {
  it('gives a freed slot to the caller that waited longest since its last turn', async () => {
    const queue = new FairQueue(1);
    const order: string[] = [];
    const jobs = [
      ...Array.from({ length: 20 }, (_, i) => queue.run('a', () => order.push(`a${i}`))),
      queue.run('b', () => order.push('b0')),
      queue.run('b', () => order.push('b1')),
      queue.run('c', () => order.push('c0')),
    ];
    await Promise.all(jobs);
    assert.deepEqual(order.slice(0, 7), ['a0', 'a1', 'b0', 'c0', 'a2', 'b1', 'a3']);
    assert.equal(order.length, 23);
  });

  it('runs at most one job of a caller at a time, leaving other slots to other callers', async () => {
    const queue = new FairQueue(2);
    const release: Array<() => void> = [];
    const started: string[] = [];
    const job = (name: string) => () =>
      new Promise<void>((resolve) => {
        started.push(name);
        release.push(resolve);
      });
    const all = [queue.run('a', job('a0')), queue.run('a', job('a1')), queue.run('b', job('b0'))];
    assert.deepEqual(started, ['a0', 'b0']);
    release.shift()?.();
    await all[0];
    // The slot is given back once the job's promise has settled: one turn of the event loop later.
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(started, ['a0', 'b0', 'a1']);
    for (const resolve of release) resolve();
    await Promise.all(all);
  });

  it('settles a job with what it throws, and runs the next', async () => {
    const queue = new FairQueue(1);
    await assert.rejects(
      queue.run('a', () => {
        throw new Error('boom');
      }),
      { message: 'boom' },
    );
    assert.equal(await queue.run('a', () => 42), 42);
  });
});

describe('checkCommandLine shared between callers', () => {
  it("answers another caller's git status before a hostile caller's second 64 KiB line", async () => {
    // Both threads started, as in a server that has checked lines before.
    await Promise.all([checkCommandLine('git status', RULES, { caller: 'one' }), checkCommandLine('git status', RULES, { caller: 'two' })]);
    const settled: string[] = [];
    const hostile = Array.from({ length: 40 }, (_, i) =>
      checkCommandLine(HOSTILE[i % HOSTILE.length] as string, RULES, { caller: 'hostile' }).then((verdict) => {
        settled.push(`hostile${i}`);
        return verdict;
      }),
    );
    const other = checkCommandLine('git status --short', RULES, { caller: 'other' }).then((verdict) => {
      settled.push('other');
      return verdict;
    });
    assert.deepEqual(await other, { allowed: true });
    await Promise.all(hostile);
    assert.ok(settled.indexOf('other') <= 1, `settled in the order ${settled.slice(0, 5).join(', ')}...`);
  });

  it('reads each hostile line to a verdict, refusing those past what the rules model', async () => {
    const verdicts = await Promise.all(HOSTILE.map((line) => checkCommandLine(line, RULES, { caller: 'hostile' })));
    assert.deepEqual(
      verdicts.map((verdict) => verdict.allowed),
      [true, true, false, true],
    );
  });
});
