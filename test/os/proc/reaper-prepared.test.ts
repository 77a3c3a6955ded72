import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { test, type TestContext } from 'node:test';
import { commandEnv } from '#src/os/proc/process.js';
import type { BeginOptions, ReapedCall } from '#src/os/sandbox/reaped-call.js';
import { ResidentReaper } from '#src/os/proc/reaper.js';
import { processesWith, trackedMarker, waitFor } from '../../support/processes.js';
import { requireOrSkip } from '../../support/require.js';
import { temporaryDirectory } from '../../support/workspace.js';

// Calls started ahead of their use (`ResidentReaper.prepare`): what the Bash tool's waiting shells are made of.

async function startReaper(t: TestContext): Promise<ResidentReaper | undefined> {
  try {
    const reaper = await ResidentReaper.start();
    // A call that waits for its begin keeps no process alive (nor does the reaper): the test does.
    const keepAlive = setInterval(() => {}, 1_000);
    t.after(() => {
      clearInterval(keepAlive);
      reaper.close();
    });
    return reaper;
  } catch (err) {
    requireOrSkip(t, 'the reaper (Perl)', (err as Error).message);
    return undefined;
  }
}

/** Starts `bash -c script` ahead of its use, with what it writes kept for the test. */
function prepare(reaper: ResidentReaper, script: string, joins?: string[]): ReapedCall {
  const call = reaper.prepare('bash', ['-c', script], { cwd: '/', env: commandEnv(), killGraceMs: 2_000, joins });
  assert.ok(!(call instanceof Error), String(call));
  return call;
}

function begin(overrides: Partial<BeginOptions> = {}): BeginOptions & { out: () => string; err: () => string } {
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  return {
    timeoutMs: 10_000,
    onStdout: (chunk) => out.push(chunk),
    onStderr: (chunk) => err.push(chunk),
    out: () => Buffer.concat(out).toString('utf8'),
    err: () => Buffer.concat(err).toString('utf8'),
    ...overrides,
  };
}

test('a call started ahead waits for its input on fd 3, then runs with it; what it wrote before reaches the call', async (t) => {
  const reaper = await startReaper(t);
  if (reaper === undefined) return;
  const marker = trackedMarker(t);
  // Writes before it reads: held in its connection until the call begins, then delivered first.
  const call = prepare(reaper, `echo early; echo early-err >&2; IFS= read -r -d '' -u 3 input; echo "got [$input] $(readlink /proc/self/fd/0)"; : ${marker}`);
  await waitFor(() => processesWith(marker).length > 0, 'the command to run');
  assert.equal(call.alive, true);
  const opts = begin();
  const outcome = await call.begin(opts, 'two\nlines');
  assert.deepEqual(outcome, { exitCode: 0, exitSignal: null, timedOut: false });
  assert.equal(opts.out(), 'early\ngot [two\nlines] /dev/null\n');
  assert.equal(opts.err(), 'early-err\n');
  assert.equal(call.alive, false);
});

test('the timeout of a call started ahead counts from its begin, not from its start', async (t) => {
  const reaper = await startReaper(t);
  if (reaper === undefined) return;
  const call = prepare(reaper, `IFS= read -r -d '' -u 3 input; eval "$input"`);
  // Longer than the timeout below: a timer started with the call would have fired by now.
  await new Promise((resolve) => setTimeout(resolve, 400));
  const quick = await call.begin(begin({ timeoutMs: 300 }), 'exit 4');
  assert.deepEqual(quick, { exitCode: 4, exitSignal: null, timedOut: false });

  const marker = trackedMarker(t);
  const slow = prepare(reaper, `IFS= read -r -d '' -u 3 input; eval "$input"`);
  const outcome = await slow.begin(begin({ timeoutMs: 300 }), `sleep ${marker}`);
  assert.equal(outcome.timedOut, true);
  await waitFor(() => processesWith(marker).length === 0, 'the timed-out command to be gone');
});

test('an abort signalled before the begin ends the call at once, and its command with it', async (t) => {
  const reaper = await startReaper(t);
  if (reaper === undefined) return;
  const marker = trackedMarker(t);
  const call = prepare(reaper, `IFS= read -r -d '' -u 3 input; sleep ${marker}`);
  await waitFor(() => processesWith(marker).length > 0, 'the command to run');
  const controller = new AbortController();
  controller.abort('client gone');
  const outcome = await call.begin(begin({ signal: controller.signal }), 'ignored');
  assert.equal(outcome.abortReason, 'client gone');
  await waitFor(() => processesWith(marker).length === 0, 'the aborted command to be gone');
});

test('discarding a call started ahead ends its command and everything it started', async (t) => {
  const reaper = await startReaper(t);
  if (reaper === undefined) return;
  const marker = trackedMarker(t);
  // A child that leaves the group, which only the call reaper can find.
  const call = prepare(reaper, `setsid sleep ${marker} & IFS= read -r -d '' -u 3 input`);
  await waitFor(() => processesWith(marker).length === 2, 'the command and its child to run');
  call.discard();
  await call.done;
  assert.equal(call.alive, false);
  await waitFor(() => processesWith(marker).length === 0, 'nothing of the discarded call to be left');
});

test('a call started ahead whose command ends before its begin is no longer alive, and begins with how it ended', async (t) => {
  const reaper = await startReaper(t);
  if (reaper === undefined) return;
  const call = prepare(reaper, 'exit 3');
  await call.done;
  assert.equal(call.alive, false);
  assert.deepEqual(await call.begin(begin(), 'too late'), { exitCode: 3, exitSignal: null, timedOut: false });
});

test('the call reaper joins the files it is given before the command starts, or the call fails saying which', async (t) => {
  const reaper = await startReaper(t);
  if (reaper === undefined) return;
  const dir = await temporaryDirectory(t, 'toolport-joins-');
  const procs = path.join(dir, 'cgroup.procs');
  await writeFile(procs, '');
  const call = prepare(reaper, `IFS= read -r -d '' -u 3 input; echo "$PPID"`, [procs]);
  const opts = begin();
  await call.begin(opts, '');
  // bash's parent is the call reaper, which wrote its pid before it forked bash.
  assert.equal(readFileSync(procs, 'utf8'), opts.out().trim());

  const missing = path.join(dir, 'gone', 'cgroup.procs');
  const failing = prepare(reaper, 'echo never', [missing]);
  const failed = await failing.begin(begin(), '');
  assert.equal(failed.spawnError?.message, `could not join the call's cgroup (${missing}): No such file or directory`);
});
