import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, it } from 'node:test';
import { parseUpstreams } from '#src/upstreams/config.js';
import { Upstream, type UpstreamOptions } from '#src/upstreams/upstream.js';
import { capturedLog } from '../support/log-capture.js';
import { until } from '../support/wait.js';
import { temporaryDirectory, type Cleanup } from '../support/workspace.js';

const FLOODING = path.resolve(import.meta.dirname, '../fixtures/upstreams/flooding-server.mjs');
const FLOODING_HTTP = path.resolve(import.meta.dirname, '../fixtures/upstreams/flooding-http-server.mjs');
const KiB = 1024;
const MiB = 1024 * KiB;
/** What a pipe or socket hands over at once: what is kept may pass a bound by one chunk. */
const CHUNK = 64 * KiB;

type Text = { content: Array<{ text: string }> };

/** Upstream `f`: the flooding server over stdio (listing `listMiB` of tools), its entry's keys `extra`; `received()` lists the methods it got. */
async function floodingStdio(t: Cleanup, extra: Record<string, unknown> = {}, options: Partial<UpstreamOptions> = {}, listMiB = 0) {
  const dir = await temporaryDirectory(t);
  const record = path.join(dir, 'received.txt');
  await writeFile(record, '');
  const text = JSON.stringify({ mcpServers: { f: { command: process.execPath, args: [FLOODING, String(listMiB)], env: { FLOODING_LOG: record }, ...extra } } });
  const received = async (): Promise<string[]> => (await readFile(record, 'utf8')).split('\n').filter(Boolean);
  return { ...alone(t, text, options), received };
}

/** Upstream `f`: the flooding server over HTTP, a process of its own (GETs answered as `getMode` says); `gets()` asks it how many GETs it had. */
async function floodingHttp(t: Cleanup, extra: Record<string, unknown> = {}, options: Partial<UpstreamOptions> = {}, getMode = '405') {
  const child = spawn(process.execPath, [FLOODING_HTTP, getMode], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.after(() => {
    child.kill('SIGKILL');
  });
  const port = await new Promise<string>((resolve) => child.stdout.once('data', (chunk: Buffer) => resolve(/listening (\d+)/.exec(String(chunk))![1]!)));
  const gets = async (): Promise<number> => ((await (await fetch(`http://127.0.0.1:${port}/stats`)).json()) as { gets: number }).gets;
  const text = JSON.stringify({ mcpServers: { f: { url: `http://127.0.0.1:${port}/mcp`, ...extra } } });
  return { ...alone(t, text, options), gets };
}

function alone(t: Cleanup, text: string, options: Partial<UpstreamOptions>) {
  const log = capturedLog();
  const listed: unknown[][] = [];
  const upstream = new Upstream(parseUpstreams(text, {})[0]!, {
    log: log.logger,
    version: '0.0.0',
    baseEnv: process.env,
    onTools: (tools) => listed.push([...tools]),
    backoffMs: 60_000,
    ...options,
  });
  t.after(() => upstream.stop());
  return { upstream, log, listed };
}

const call = (upstream: Upstream, tool: string, input: Record<string, unknown>, signal = AbortSignal.timeout(30_000)) =>
  upstream.call(tool, input, { signal }).then(
    (result) => (result as Text).content[0]!.text.slice(0, 40),
    (err: Error) => err.message,
  );
const TOO_LARGE = (bound: string): string =>
  `Upstream "f" answered with more than ${bound}, the most toolport takes from it for one call ("maxResultBytes" in its entry of the upstreams file); the answer was dropped unread.`;

describe('a stdio upstream that floods toolport', () => {
  for (const [order, mib] of [
    ['last', 30],
    ['first', 8],
  ] as const) {
    it(`answering 16 calls at once with ${mib} MiB each (id ${order}) has each call fail naming the bound, keeps no more than the allowance, parses none of it, and stays up`, async (t) => {
      const { upstream } = await floodingStdio(t, { maxResultBytes: MiB, maxConcurrency: 16 });
      await upstream.start();
      const parsedBefore = upstream.counters.parsedBytes;
      const outcomes = await Promise.all(Array.from({ length: 16 }, () => call(upstream, 'big', { mib, order })));
      assert.deepEqual(outcomes, Array(16).fill(TOO_LARGE('1 MiB')));
      assert.equal(upstream.counters.refusedAnswers, 16);
      assert.equal(upstream.counters.parsedBytes, parsedBefore, 'nothing of the answers was parsed');
      assert.ok(upstream.counters.peakHeldBytes <= MiB + CHUNK, `${upstream.counters.peakHeldBytes} bytes kept at once`);
      assert.equal(await call(upstream, 'echo', {}), 'echo');
      assert.deepEqual(upstream.status(), { state: 'ready', transport: 'stdio', tools: 0, held: 0, restarts: 0 });
    });
  }

  it('answering within maxResultBytes is read whole, the structured answer too', async (t) => {
    const { upstream } = await floodingStdio(t, { maxResultBytes: 2 * MiB });
    await upstream.start();
    const answer = (await upstream.call('big', { mib: 1, shape: 'structured' }, { signal: AbortSignal.timeout(30_000) })) as {
      structuredContent: { rows: unknown[] };
    };
    assert.equal(answer.structuredContent.rows.length, Math.ceil(MiB / 40));
  });

  for (const order of ['last', 'first']) {
    it(`that answers ids toolport never sent (20 x 30 MiB, id ${order}) is taken down at the first, unparsed, saying why`, async (t) => {
      const { upstream } = await floodingStdio(t, { maxResultBytes: MiB });
      await upstream.start();
      const parsedBefore = upstream.counters.parsedBytes;
      const outcome = await call(upstream, 'foreign', { count: 20, mib: 30, order });
      assert.equal(
        outcome,
        'Upstream "f" went away during the call (the process sent an answer to a request toolport never sent); the call may or may not have taken effect. toolport is restarting it.',
      );
      assert.equal(upstream.state, 'down');
      assert.equal(upstream.status().reason, 'the process sent an answer to a request toolport never sent');
      assert.equal(upstream.counters.parsedBytes, parsedBefore);
      assert.ok(upstream.counters.peakHeldBytes <= MiB + CHUNK, `${upstream.counters.peakHeldBytes} bytes kept at once`);
    });
  }

  it('answering calls after they were aborted has the answers dropped unparsed, each freeing its slot at once', async (t) => {
    const { upstream } = await floodingStdio(t, { maxConcurrency: 1 }, { abortGraceMs: 600_000 });
    await upstream.start();
    const parsedBefore = upstream.counters.parsedBytes;
    for (let i = 0; i < 4; i++) {
      // Aborted once the upstream says it started; it answers 4 MiB once it hears the cancellation.
      const controller = new AbortController();
      const onProgress = (): void => controller.abort(new Error('gone'));
      await assert.rejects(upstream.call('late', { mib: 4 }, { signal: controller.signal, onProgress }), { message: 'gone' });
    }
    // The one slot is free again only once the last late answer came (the grace is ten minutes).
    assert.equal(await call(upstream, 'echo', {}), 'echo');
    assert.equal(upstream.counters.lateAnswers, 4);
    assert.ok(upstream.counters.parsedBytes - parsedBefore < KiB, `${upstream.counters.parsedBytes - parsedBefore} bytes parsed`);
    assert.equal(upstream.state, 'ready');
  });

  it('listing one page larger than a listing may take is refused before it is parsed: down, saying why', async (t) => {
    const { upstream, listed } = await floodingStdio(t, {}, {}, 20);
    await assert.rejects(upstream.start(), {
      message: 'Upstream "f" is not available: its tool list is larger than 16 MiB, the most toolport reads of one listing.',
    });
    assert.deepEqual(listed, []);
    assert.equal(upstream.status().reason, 'its tool list is larger than 16 MiB, the most toolport reads of one listing');
    assert.ok(upstream.counters.parsedBytes < KiB, `${upstream.counters.parsedBytes} bytes parsed`);
    assert.ok(upstream.counters.peakHeldBytes <= 16 * MiB + CHUNK, `${upstream.counters.peakHeldBytes} bytes kept at once`);
  });

  it('that stops in the middle of a line is taken down, saying so, and the call in flight hears it', async (t) => {
    const { upstream } = await floodingStdio(t, {}, { lineStallMs: 200 });
    await upstream.start();
    assert.equal(
      await call(upstream, 'stall', { bytes: 1000 }),
      'Upstream "f" went away during the call (the process sent a line that never ended); the call may or may not have taken effect. toolport is restarting it.',
    );
    assert.equal(upstream.state, 'down');
    assert.equal(upstream.status().reason, 'the process sent a line that never ended');
  });

  it('that trickles a line without end is taken down once a call sent behind it times out', async (t) => {
    const { upstream } = await floodingStdio(t, {}, { lineStallMs: 300 });
    await upstream.start();
    const next = new Promise<string>((resolve) => {
      // The trickle's line is open once its progress is heard: the echo sent now waits behind it.
      const onProgress = (): void => void call(upstream, 'echo', {}, AbortSignal.timeout(400)).then(resolve);
      void upstream.call('trickle', { every: 20 }, { signal: AbortSignal.timeout(30_000), onProgress }).catch(() => undefined);
    });
    assert.equal(await next, 'The operation was aborted due to timeout');
    await until(() => upstream.state === 'down', 'the upstream to be taken down');
    assert.equal(upstream.status().reason, 'the process sent a line that never ended');
  });
});

describe('an HTTP upstream that floods toolport', () => {
  for (const framing of ['json', 'chunked', 'sse']) {
    it(`answering 16 calls at once with 30 MiB each (${framing}) has each call fail naming the bound, keeps no more than the allowances, parses none of it`, async (t) => {
      const { upstream } = await floodingHttp(t, { maxResultBytes: MiB, maxConcurrency: 16 });
      await upstream.start();
      const parsedBefore = upstream.counters.parsedBytes;
      const outcomes = await Promise.all(Array.from({ length: 16 }, () => call(upstream, 'big', { mib: 30, framing })));
      assert.deepEqual(outcomes, Array(16).fill(TOO_LARGE('1 MiB')));
      assert.equal(upstream.counters.parsedBytes, parsedBefore);
      assert.ok(upstream.counters.peakHeldBytes <= 16 * (MiB + CHUNK), `${upstream.counters.peakHeldBytes} bytes kept at once`);
      assert.equal(await call(upstream, 'echo', {}), 'echo');
      assert.equal(upstream.state, 'ready');
    });
  }

  it('answering 16 calls at once with 7 MiB each (within the allowance) holds at most 32 MiB and one answer unparsed; every call is answered', async (t) => {
    const { upstream } = await floodingHttp(t, { maxConcurrency: 16 });
    await upstream.start();
    const outcomes = await Promise.all(Array.from({ length: 16 }, () => call(upstream, 'big', { mib: 7, framing: 'sse' })));
    assert.deepEqual(outcomes, Array(16).fill('x'.repeat(40)));
    assert.ok(upstream.counters.peakHeldBytes <= 32 * MiB + 8 * MiB, `${upstream.counters.peakHeldBytes} bytes held at once`);
  });

  it('that answers ids toolport never sent is taken down at the first, saying why; one larger than the call may take only fails the call', async (t) => {
    const { upstream } = await floodingHttp(t, { maxResultBytes: MiB });
    await upstream.start();
    assert.equal(await call(upstream, 'foreign', { count: 20, mib: 30 }), TOO_LARGE('1 MiB'));
    assert.equal(upstream.state, 'ready');
    const outcome = await call(upstream, 'foreign', { count: 20, mib: 0.01 });
    assert.match(outcome, /^Upstream "f" went away during the call \(the upstream sent an answer to a request toolport never sent\)/);
    assert.equal(upstream.state, 'down');
    assert.equal(upstream.status().reason, 'the upstream sent an answer to a request toolport never sent');
  });

  it('whose GET stream ends at once with retry: 0 is asked again with waits that double, then given up and re-listed periodically', async (t) => {
    const reconnect = { minMs: 20, stableMs: 10_000, maxQuickEnds: 4 };
    const { upstream, gets, log, listed } = await floodingHttp(t, {}, { streamReconnect: reconnect, relistMs: 50 }, 'retry0');
    await upstream.start();
    await until(
      () => log.lines.some((line) => line.msg === 'upstream event stream given up: its tool list is read again periodically instead'),
      'the stream to be given up',
    );
    // 20 + 40 + 80 + 160 ms of waits: at most a handful of GETs, where a client without backoff makes hundreds.
    assert.equal(await gets(), 5);
    await until(() => listed.length >= 3, 'the periodic re-list');
    assert.equal(await gets(), 5);
  });
});
