import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { ToolRegistry } from '#src/core/registry.js';
import { buildApp, type AppOptions } from '#src/http/app.js';
import { gatedTool, type GatedRun } from '../fixtures/gated-tool.js';
import { until } from '../support/wait.js';

const KEY_A = 'key-of-caller-a-0123456789';
const KEY_B = 'key-of-caller-b-0123456789';
const KEY_C = 'key-of-caller-c-0123456789';

/** A Bash-like tool (4 slots) behind three keys, with the server's default queue and shares. */
async function busyServer(options: Partial<AppOptions> = {}) {
  const gated = gatedTool('Slow', { maxConcurrency: 4 });
  const registry = new ToolRegistry();
  registry.register(gated.tool);
  const app = await buildApp({
    registry,
    rateLimit: 0,
    apiKeys: [
      { label: 'a', key: KEY_A },
      { label: 'b', key: KEY_B },
      { label: 'c', key: KEY_C },
    ],
    ...options,
  });
  const call = (key: string, id: string, remoteAddress?: string): Promise<LightMyRequestResponse> =>
    app.inject({
      method: 'POST',
      url: '/tools/Slow',
      headers: key === '' ? {} : { authorization: `Bearer ${key}` },
      payload: { id },
      ...(remoteAddress && { remoteAddress }),
    });
  return { app, gated, call };
}

/** Releases every run of the tool, as they start, until all `calls` have answered. */
async function releaseUntilAnswered(gated: ReturnType<typeof gatedTool>, calls: Array<Promise<unknown>>, deadlineMs = 10_000): Promise<void> {
  let answered = false;
  const all = Promise.all(calls).then(() => (answered = true));
  const released = new Set<GatedRun>();
  const end = Date.now() + deadlineMs;
  while (!answered) {
    if (Date.now() > end) assert.fail('timed out waiting for the calls to answer');
    for (const run of gated.runs) {
      if (!released.has(run)) {
        released.add(run);
        run.release();
      }
    }
    await new Promise((resolve) => setImmediate(resolve));
  }
  await all;
}

test("200 calls from one key take half the tool's slots and a quarter of its queue; another key's call runs at once", async (t) => {
  const { app, gated, call } = await busyServer();
  t.after(() => app.close());
  const flood = Array.from({ length: 200 }, (_, i) => call(KEY_A, `a${i}`));
  await gated.started(2);
  await until(() => app.toolport.executor.load('Slow').waiting === 16, "A's share of the queue to fill", 10_000, 0);
  const refused = (await Promise.all(flood.slice(18))).map((r) => [r.statusCode, r.headers['retry-after'], r.json()]);
  assert.equal(refused.length, 182);
  const expected = {
    content: [
      {
        type: 'text',
        text: `Tool "Slow" is busy with this caller's calls: 2 running and 16 waiting, the most one caller may have (2 running, 16 waiting); retry later.`,
      },
    ],
    isError: true,
    error: {
      code: 'QUEUE_FULL',
      message: `Tool "Slow" is busy with this caller's calls: 2 running and 16 waiting, the most one caller may have (2 running, 16 waiting); retry later.`,
      details: { tool: 'Slow', running: 2, waiting: 16, maxConcurrencyPerCaller: 2, queuePerCaller: 16 },
    },
  };
  for (const answer of refused) assert.deepEqual(answer, [503, '1', expected]);

  const b = call(KEY_B, 'b0');
  const runs = await gated.started(3);
  assert.equal(runs[2]?.id, 'b0', "B's call started while A's 16 calls still wait");
  runs[2]?.release('b done');
  assert.deepEqual((await b).json(), { content: [{ type: 'text', text: 'b done' }], isError: false });

  await releaseUntilAnswered(gated, flood);
  assert.equal((await Promise.all(flood.slice(0, 18))).filter((r) => r.statusCode === 200).length, 18);
});

test("while two keys flood and hold every slot, a third key's call runs as soon as one call ends, before the floods' next", async (t) => {
  const { app, gated, call } = await busyServer();
  t.after(() => app.close());
  const floodA = Array.from({ length: 10 }, (_, i) => call(KEY_A, `a${i}`));
  await gated.started(2);
  const floodC = Array.from({ length: 10 }, (_, i) => call(KEY_C, `c${i}`));
  await gated.started(4);
  await until(() => app.toolport.executor.load('Slow').waiting === 16, 'both floods to queue', 10_000, 0);
  const b = call(KEY_B, 'b0');
  await until(() => app.toolport.executor.load('Slow').waiting === 17, "B's call to queue", 10_000, 0);
  gated.runs[0]?.release();
  const runs = await gated.started(5);
  assert.equal(runs[4]?.id, 'b0', 'the freed slot went to the caller that had none');
  runs[4]?.release();
  assert.equal((await b).statusCode, 200);
  await releaseUntilAnswered(gated, [...floodA, ...floodC]);
  assert.deepEqual(new Set((await Promise.all([...floodA, ...floodC])).map((r) => r.statusCode)), new Set([200]));
});

test('without keys each client address gets its share: one address flooding leaves slots to another', async (t) => {
  const { app, gated, call } = await busyServer({ apiKeys: [] });
  t.after(() => app.close());
  const flood = Array.from({ length: 30 }, (_, i) => call('', `x${i}`, '10.0.0.1'));
  await gated.started(2);
  await until(() => app.toolport.executor.load('Slow').waiting === 16, "the first address's share of the queue to fill", 10_000, 0);
  const other = call('', 'y0', '10.0.0.2');
  const runs = await gated.started(3);
  assert.equal(runs[2]?.id, 'y0');
  runs[2]?.release();
  assert.equal((await other).statusCode, 200);
  const refused = await Promise.all(flood.slice(18));
  assert.deepEqual(new Set(refused.map((r) => r.statusCode)), new Set([503]));
  await releaseUntilAnswered(gated, flood);
  assert.deepEqual(new Set((await Promise.all(flood.slice(0, 18))).map((r) => r.statusCode)), new Set([200]));
});

test('TOOLPORT_MAX_CONCURRENCY_PER_CALLER and TOOLPORT_QUEUE_PER_CALLER set the shares (never above the tool-wide limits)', async (t) => {
  const { app, gated, call } = await busyServer({ maxConcurrencyPerCaller: 3, queuePerCaller: 1 });
  t.after(() => app.close());
  const calls = [0, 1, 2, 3].map((i) => call(KEY_A, `a${i}`));
  await gated.started(3);
  await until(() => app.toolport.executor.load('Slow').waiting === 1, "A's fourth call to queue", 10_000, 0);
  const refused = await call(KEY_A, 'a4');
  assert.equal(refused.statusCode, 503);
  assert.equal(
    refused.json().error.message,
    `Tool "Slow" is busy with this caller's calls: 3 running and 1 waiting, the most one caller may have (3 running, 1 waiting); retry later.`,
  );
  await releaseUntilAnswered(gated, calls);
  assert.deepEqual(
    (await Promise.all(calls)).map((r) => r.statusCode),
    [200, 200, 200, 200],
  );
});

test('without keys, every loopback address is one caller: a client cycling through 127.0.0.2 to .9 gets one share', async (t) => {
  const { app, gated, call } = await busyServer({ apiKeys: [] });
  t.after(() => app.close());
  const flood = Array.from({ length: 40 }, (_, i) => call('', `x${i}`, `127.0.0.${2 + (i % 8)}`));
  await gated.started(2);
  await until(() => app.toolport.executor.load('Slow').waiting === 16, 'the share of the queue to fill', 10_000, 0);
  const refused = await Promise.all(flood.slice(18));
  assert.deepEqual(new Set(refused.map((r) => r.statusCode)), new Set([503]), '22 of the 40 are past the one share');
  assert.equal(gated.runs.length, 2, 'two run, as for one caller');
  await releaseUntilAnswered(gated, flood);
});
