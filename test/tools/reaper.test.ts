import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test, type TestContext } from 'node:test';
import { commandEnv, runProcess, type RunOptions } from '../../src/tools/process.js';
import { reapedCommand, reaperUnavailableReason } from '../../src/tools/reaper.js';
import { escapees } from '../fixtures/escapees.js';
import { processesWith, trackedMarker, waitFor } from '../fixtures/processes.js';
import { pathWithOnly } from '../fixtures/programs.js';

/** Skips the test, saying why, when the reaper cannot run on this machine. */
async function reaperWorks(t: TestContext): Promise<boolean> {
  const reason = await reaperUnavailableReason();
  if (reason !== undefined) t.skip(`the reaper cannot run here: ${reason}`);
  return reason === undefined;
}

function options(overrides: Partial<RunOptions> = {}): RunOptions & { out: () => string; err: () => string } {
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  return {
    cwd: process.cwd(),
    env: commandEnv(),
    timeoutMs: 10_000,
    signalOnServerExit: 'SIGTERM',
    onStdout: (chunk) => out.push(chunk),
    onStderr: (chunk) => err.push(chunk),
    out: () => Buffer.concat(out).toString('utf8'),
    err: () => Buffer.concat(err).toString('utf8'),
    ...overrides,
  };
}

/** Runs `bash -c command` under the reaper. */
function reaped(command: string, graceMs: number, overrides: Partial<RunOptions> = {}): ReturnType<typeof runProcess> & { opts: ReturnType<typeof options> } {
  const { file, args } = reapedCommand('bash', ['-c', command], graceMs);
  const opts = options(overrides);
  return Object.assign(runProcess(file, args, opts), { opts });
}


test('reaperUnavailableReason finds the reaper working here, or says why not', async () => {
  const reason = await reaperUnavailableReason();
  if (process.platform === 'linux' && ['x64', 'arm64'].includes(process.arch)) assert.equal(reason, undefined);
  else assert.equal(typeof reason, 'string');
});

test('reaperUnavailableReason says how to install perl when it is missing', async (t) => {
  await pathWithOnly(t, ['bash']);
  assert.equal(await reaperUnavailableReason(), 'perl was not found on PATH; install it (Debian/Ubuntu: apt-get install perl-base)');
});

test('the reaper kills processes that called setsid or were double-forked when the command exits, and exits with its code', { timeout: 60_000 }, async (t) => {
  if (!(await reaperWorks(t))) return;
  const marker = trackedMarker(t);
  // A grace period longer than the test may take: processes that die on SIGTERM are not waited for.
  const run = reaped(`${escapees(marker)}; echo started; exit 3`, 600_000);
  const outcome = await run;
  assert.deepEqual(outcome, { exitCode: 3, exitSignal: null, timedOut: false });
  assert.equal(run.opts.out(), 'started\n');
  assert.equal(processesWith(marker).length, 0, 'nothing is left when the run returns');
});

test('the reaper dies of the signal that killed the command', async (t) => {
  if (!(await reaperWorks(t))) return;
  const outcome = await reaped('kill -KILL $$', 2_000);
  assert.deepEqual(outcome, { exitCode: null, exitSignal: 'SIGKILL', timedOut: false });
});

test('the reaper exits 127 and says so when the command cannot be run', async (t) => {
  if (!(await reaperWorks(t))) return;
  const { args } = reapedCommand('/nonexistent/program', [], 2_000);
  const opts = options();
  const outcome = await runProcess('perl', args, opts);
  assert.equal(outcome.exitCode, 127);
  assert.match(opts.err(), /^toolport reaper: \/nonexistent\/program: No such file or directory$/m);
});

test('on timeout the reaper kills everything it started, with SIGKILL after the grace period for what ignores SIGTERM', async (t) => {
  if (!(await reaperWorks(t))) return;
  const marker = trackedMarker(t);
  // An ignored signal is inherited: neither bash nor its sleeps die of SIGTERM.
  const run = reaped(`trap '' TERM; ${escapees(marker)}; echo ready; wait`, 300, { timeoutMs: 500, killGraceMs: 1_300 });
  await waitFor(() => run.opts.out() === 'ready\n', 'the escapees to be in place');
  const termAt = Date.now();
  const outcome = await run;
  assert.equal(outcome.timedOut, true);
  assert.equal(outcome.exitSignal, 'SIGKILL', 'bash ignored SIGTERM, so the reaper killed it, and died of the same signal');
  assert.ok(Date.now() - termAt >= 300, 'SIGKILL waited for the grace period');
  assert.equal(processesWith(marker).length, 0, 'nothing is left when the run returns');
});

test('when the server dies the reaper kills everything it started', async (t) => {
  if (!(await reaperWorks(t))) return;
  const marker = trackedMarker(t);
  // A stand-in for the server: it starts the reaper, naming itself as the server, and is then
  // killed with SIGKILL, which leaves it no time to do anything.
  const { file, args } = reapedCommand('bash', ['-c', `${escapees(marker)}; echo ready; wait`], 300);
  const script = `
    const { spawn } = require('node:child_process');
    const args = JSON.parse(process.argv[2]);
    args[args.indexOf('--') + 3] = String(process.pid);
    const child = spawn(process.argv[1], args, { stdio: ['ignore', 'pipe', 'inherit'], detached: true });
    child.stdout.on('data', (d) => process.stdout.write(d));
  `;
  const server = spawn(process.execPath, ['-e', script, file, JSON.stringify(args)], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.after(() => server.kill('SIGKILL'));
  let out = '';
  server.stdout.on('data', (d) => (out += String(d)));
  await waitFor(() => out === 'ready\n', 'the escapees to be in place');
  // The reaper, bash and the two sleeps (one in a session of its own, one orphaned); the stand-in names the marker too.
  assert.equal(processesWith(marker).filter((pid) => pid !== server.pid).length, 4);
  server.kill('SIGKILL');
  await waitFor(() => processesWith(marker).length === 0, 'everything the reaper started to be gone');
});

/**
 * A Perl module that holds a dying Perl in its __DIE__ hook: it creates `dying` in $HOLD_DIE_DIR, then
 * waits (at most 5 s) for `go` there. Loaded into the reaper through PERL5OPT.
 */
const HOLD_DIE_MODULE = String.raw`
package HoldDie;
$SIG{__DIE__} = sub {
  open(my $fh, '>', "$ENV{HOLD_DIE_DIR}/dying") and close($fh);
  for (1 .. 500) { last if -e "$ENV{HOLD_DIE_DIR}/go"; select(undef, undef, undef, 0.01); }
};
1;
`;

test('the reaper kills everything it started when a second signal comes while it handles the first', async (t) => {
  if (!(await reaperWorks(t))) return;
  const marker = trackedMarker(t);
  // A dying server can send several: its group kill, then PR_SET_PDEATHSIG once per thread its
  // children are handed to as it exits. Perl blocks a signal while its handler runs, so one that
  // comes then is handled after the handler has died; the hook holds the reaper there meanwhile.
  const dir = await mkdtemp(path.join(tmpdir(), 'toolport-reaper-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  await writeFile(path.join(dir, 'HoldDie.pm'), HOLD_DIE_MODULE);
  const env = commandEnv({ PERL5OPT: `-I${dir} -MHoldDie`, HOLD_DIE_DIR: dir });
  const run = reaped(`${escapees(marker)}; echo ready; wait`, 2_000, { env });
  await waitFor(() => run.opts.out() === 'ready\n', 'the escapees to be in place');
  const reaper = processesWith(marker).find((pid) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').startsWith('perl\0'));
  assert.ok(reaper !== undefined, 'the reaper is running');
  process.kill(reaper, 'SIGTERM');
  await waitFor(() => existsSync(path.join(dir, 'dying')), 'the reaper to handle SIGTERM');
  process.kill(reaper, 'SIGTERM');
  await writeFile(path.join(dir, 'go'), '');
  const outcome = await run;
  assert.deepEqual(outcome, { exitCode: null, exitSignal: 'SIGTERM', timedOut: false }, 'the reaper exits as bash did, not of an error');
  assert.equal(run.opts.err(), '');
  assert.equal(processesWith(marker).length, 0, 'nothing is left when the run returns');
});
