import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import { ToolRegistry } from '#src/core/registry.js';
import { buildApp } from '#src/http/app.js';
import { Echo } from '#src/tools/echo.js';
import { ChurnGuard, HOLD_ENDED, HOLD_STARTED, type ChurnHold, type ChurnLimits } from '#src/upstreams/churn.js';
import { parseUpstreams } from '#src/upstreams/config.js';
import { checkDefinitions } from '#src/upstreams/definitions.js';
import { lockOf, parseLock, formatLock } from '#src/upstreams/lock/lock.js';
import { UpstreamSource } from '#src/upstreams/source.js';
import { Upstream } from '#src/upstreams/upstream.js';
import { capturedLog } from '../support/log-capture.js';
import { until } from '../support/wait.js';
import { temporaryDirectory, type Cleanup } from '../support/workspace.js';

const CHURNING = path.resolve(import.meta.dirname, '../fixtures/upstreams/churning-server.mjs');
const QUIET = path.resolve(import.meta.dirname, '../fixtures/upstreams/quiet-server.mjs');
const MINUTE = 60_000;

/** A guard on fake time (the clock at 0), recording the holds and releases it tells. */
function guard(t: TestContext, limits: ChurnLimits = { changes: 5, windowMs: MINUTE, holdMs: 5 * MINUTE }) {
  t.mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 0 });
  const told: Array<ChurnHold | 'released'> = [];
  const churn = new ChurnGuard(limits, { onHold: (hold) => told.push(hold), onRelease: () => told.push('released') });
  return { churn, told, tick: (ms: number) => t.mock.timers.tick(ms) };
}

describe('ChurnGuard', () => {
  it('admits 5 changes within a minute, holds the 6th for 5 minutes and says so once', (t) => {
    const { churn, told, tick } = guard(t);
    for (let i = 0; i < 5; i++) {
      assert.equal(churn.admit(), true);
      tick(10_000);
    }
    assert.equal(churn.admit(), false, 'the 6th within 60 s');
    assert.equal(churn.admit(), false);
    assert.deepEqual(told, [{ since: 50_000, until: 350_000, changes: 5 }]);
    assert.deepEqual(churn.hold, { since: 50_000, until: 350_000, changes: 5 });
    tick(5 * MINUTE - 1);
    assert.equal(churn.admit(), false);
    tick(1);
    assert.deepEqual(told.slice(1), ['released']);
    assert.equal(churn.hold, undefined);
    // Counted from nothing again: 5 more at once.
    for (let i = 0; i < 5; i++) assert.equal(churn.admit(), true);
    assert.equal(churn.admit(), false);
  });

  it('never holds changes spread wider than the window', (t) => {
    const { churn, told, tick } = guard(t);
    for (let i = 0; i < 100; i++) {
      assert.equal(churn.admit(), true, `change ${i}`);
      tick(MINUTE / 5);
    }
    assert.deepEqual(told, []);
  });

  it('tells no release once closed', (t) => {
    const { churn, told, tick } = guard(t, { changes: 1, windowMs: MINUTE, holdMs: 1000 });
    churn.admit();
    churn.admit();
    churn.close();
    tick(1000);
    assert.equal(told.length, 1);
  });
});

/** Upstreams written in a temporary directory (each stdio one in it, where it may write), opened as a source with `churn` limits. */
async function open(t: Cleanup, servers: Record<string, Record<string, unknown>>, churn: ChurnLimits, lock?: string) {
  const dir = await temporaryDirectory(t);
  const text = JSON.stringify({ mcpServers: Object.fromEntries(Object.entries(servers).map(([name, server]) => [name, { cwd: dir, ...server }])) });
  const specs = parseUpstreams(text, {});
  const registry = new ToolRegistry().register(Echo);
  const log = capturedLog();
  const source = new UpstreamSource(specs, registry, {
    log: log.logger,
    version: 'test',
    lock: lock === undefined ? undefined : parseLock(lock, 'toolport.lock.json'),
    baseEnv: process.env,
    churn,
  });
  t.after(() => source.stop());
  await source.start();
  return { dir, specs, registry, source, log };
}

const held = (log: { lines: Record<string, unknown>[] }) => log.lines.filter((l) => l.msg === HOLD_STARTED);
const released = (log: { lines: Record<string, unknown>[] }) => log.lines.filter((l) => l.msg === HOLD_ENDED);

describe('an upstream whose every listing brings new definitions (no lock file)', () => {
  it('is held past its budget: the last list applied is served and called, the log says so once, /readyz stays ready; its neighbours are not held', async (t) => {
    const dir = await temporaryDirectory(t);
    const names = path.join(dir, 'names.txt');
    await writeFile(names, 'steady');
    // Two churning upstreams at once (one announcing, one re-listed by toolport), and a steady one.
    const limits = { changes: 2, windowMs: MINUTE, holdMs: 1500 };
    const { registry, source, log } = await open(
      t,
      {
        loud: { command: process.execPath, args: [CHURNING, 'announce'], env: { CHURN_TOOLS: '4' } },
        sly: { command: process.execPath, args: [CHURNING, 'quiet'], env: { CHURN_TOOLS: '4' } },
        steady: { command: process.execPath, args: [QUIET, names] },
      },
      limits,
    );
    const app = await buildApp({ registry, upstreams: source });
    t.after(() => app.close());

    await until(() => held(log).length > 0, 'the announcing upstream to be held');
    const status = source.status();
    const frozen = status['loud']?.frozen;
    assert.ok(frozen, JSON.stringify(status));
    assert.equal(
      frozen.reason,
      'its tool list changed more than 2 times within 60 s; its new lists are not applied until the hold ends, and the last one applied is served',
    );
    assert.equal(Date.parse(frozen.until) - Date.parse(frozen.since), 1500);
    assert.deepEqual({ ...status['loud'], frozen: undefined }, { state: 'ready', transport: 'stdio', tools: 4, held: 0, restarts: 0, frozen: undefined });
    assert.deepEqual(
      { ...held(log)[0], time: undefined, pid: undefined, hostname: undefined },
      {
        level: 40,
        time: undefined,
        pid: undefined,
        hostname: undefined,
        upstream: 'loud',
        changes: 2,
        windowSeconds: 60,
        holdSeconds: 1.5,
        until: frozen.until,
        msg: HOLD_STARTED,
      },
    );
    // The last list applied is served (the second, or the third when the second was superseded
    // while the first compiled), and calls reach the upstream, which has listed newer ones since.
    const served = () => Number(/^Listing (\d+): tool 0\.$/.exec(registry.get('loud__t0')!.description)![1]);
    const servedAtHold = served();
    assert.ok(servedAtHold === 2 || servedAtHold === 3, `listing ${servedAtHold}`);
    const call = await app.inject({ method: 'POST', url: '/tools/loud__t0', payload: {} });
    assert.equal(call.statusCode, 200);
    const listed = Number(/^listing (\d+)$/.exec((call.json() as { content: Array<{ text: string }> }).content[0]!.text)![1]);
    assert.ok(listed > servedAtHold, `the upstream gave listing ${listed}, toolport serves listing ${servedAtHold}`);
    const ready = await app.inject({ url: '/readyz' });
    assert.equal(ready.statusCode, 200);
    assert.equal((ready.json() as { status: string }).status, 'ready');
    assert.equal((await app.inject({ method: 'POST', url: '/tools/Echo', payload: { text: 'hi' } })).statusCode, 200);
    assert.equal(source.status()['steady']?.frozen, undefined);
    assert.equal(source.status()['sly']?.frozen, undefined, 'listed only every 5 minutes: its changes are within the budget');

    // The hold ends: said once, and the newest list kept back is applied.
    await until(() => released(log).length > 0, 'the hold to end');
    assert.equal(held(log).length, 1, 'one warning for the hold, however many listings it kept back');
    assert.equal(released(log)[0]!.upstream, 'loud');
    assert.ok((released(log)[0]!.notApplied as number) >= 1);
    assert.equal(source.status()['loud']?.frozen, undefined);
    await until(() => served() > servedAtHold, 'a listing kept back to be applied');
  });
});

describe('an upstream held to the lock file, during a hold', () => {
  it('has a call of a definition it no longer lists refused, though the hold keeps the list that serves it', async (t) => {
    const dir = await temporaryDirectory(t);
    const text = JSON.stringify({ mcpServers: { loud: { command: process.execPath, args: [CHURNING, 'announce'], cwd: dir, env: { CHURN_TOOLS: '1' } } } });
    const spec = parseUpstreams(text, {})[0]!;
    // Reviewed: the first list a fresh process gives.
    let first: unknown[] = [];
    const reviewer = new Upstream(spec, { log: capturedLog().logger, version: 'test', baseEnv: process.env, onTools: (tools) => (first = [...tools]) });
    await reviewer.start();
    await reviewer.stop();
    const lock = formatLock(lockOf(new Map([['loud', checkDefinitions(spec, first).tools]])));
    // One change a minute: the second listing (every definition changed, so none served) is held back.
    const { registry, source, log } = await open(
      t,
      { loud: { command: process.execPath, args: [CHURNING, 'announce'], env: { CHURN_TOOLS: '1' } } },
      { changes: 1, windowMs: MINUTE, holdMs: MINUTE },
      lock,
    );
    assert.equal(registry.get('loud__t0')?.description, 'Listing 1: tool 0.');
    await until(() => held(log).length > 0, 'the hold');
    assert.ok(registry.get('loud__t0'), 'still listed: the hold keeps the last list applied');
    const app = await buildApp({ registry, upstreams: source });
    t.after(() => app.close());
    const call = await app.inject({ method: 'POST', url: '/tools/loud__t0', payload: {} });
    assert.deepEqual(call.json(), {
      content: [
        {
          type: 'text',
          text: 'Upstream "loud" now lists a definition of t0 that differs from the one pinned in the lock file: the tool is held until `toolport upstreams lock` is run again.',
        },
      ],
      isError: true,
    });
  });
});
