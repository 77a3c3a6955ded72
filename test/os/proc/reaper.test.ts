import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test, type TestContext } from 'node:test';
import { commandEnv, type RunOptions } from '#src/os/proc/process.js';
import { reaperUnavailableReason, ResidentReaper, type ResidentReaperOptions } from '#src/os/proc/reaper.js';
import { escapees } from '../../fixtures/escapees.js';
import { processesWith, trackedMarker, waitFor } from '../../support/processes.js';
import { pathWithOnly } from '../../support/programs.js';
import { requireOrSkip } from '../../support/require.js';
import { temporaryDirectory } from '../../support/workspace.js';

/** A reaper closed when the test ends, or undefined (the test skipped, saying why) when it cannot run here. */
async function startReaper(t: TestContext, options: ResidentReaperOptions = {}): Promise<ResidentReaper | undefined> {
  try {
    const reaper = await ResidentReaper.start(options);
    t.after(() => reaper.close());
    return reaper;
  } catch (err) {
    requireOrSkip(t, 'the reaper (Perl)', (err as Error).message);
    return undefined;
  }
}

function options(overrides: Partial<RunOptions> = {}): RunOptions & { out: () => string; err: () => string } {
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  return {
    cwd: process.cwd(),
    env: commandEnv(),
    timeoutMs: 10_000,
    onStdout: (chunk) => out.push(chunk),
    onStderr: (chunk) => err.push(chunk),
    out: () => Buffer.concat(out).toString('utf8'),
    err: () => Buffer.concat(err).toString('utf8'),
    ...overrides,
  };
}

/** Runs `bash -c command` under the reaper, with its grace period of `graceMs`. */
function reaped(
  reaper: ResidentReaper,
  command: string,
  graceMs: number,
  overrides: Partial<RunOptions> = {},
): Promise<Awaited<ReturnType<ResidentReaper['run']>>> & { opts: ReturnType<typeof options> } {
  const opts = options({ killGraceMs: graceMs, ...overrides });
  return Object.assign(reaper.run('bash', ['-c', command], opts), { opts });
}

/** The parent of a process, from /proc. */
function parentOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
}

/** The bash a marked command runs in. */
function bashOf(marker: string): number {
  const bash = processesWith(marker).find((pid) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').startsWith('bash\0'));
  assert.ok(bash !== undefined, 'bash is running');
  return bash;
}

test('reaperUnavailableReason finds the reaper working here, or says why not', async () => {
  const reason = await reaperUnavailableReason();
  if (process.platform === 'linux' && ['x64', 'arm64'].includes(process.arch)) assert.equal(reason, undefined);
  else assert.equal(typeof reason, 'string');
});

test('the server binds its socket under the name reaper.pl connects to, padded to sun_path whole, on every Node line', async (t) => {
  // Node before 22 pads an abstract name with NULs and later lines do not; to the kernel those are
  // two names, and a reaper connecting to the other one gets "Connection refused" on every call.
  const reaper = await startReaper(t);
  if (reaper === undefined) return;
  const names = readFileSync('/proc/net/unix', 'utf8')
    .split('\n')
    .map((line) => line.split(' ').at(-1) ?? '')
    .filter((name) => name.startsWith(`@toolport-reaper-${process.pid}-`));
  assert.ok(names.length > 0, 'the listening socket is in /proc/net/unix');
  for (const name of names) assert.match(name, /^@toolport-reaper-\d+-[0-9a-f]{16}@+$/);
  assert.deepEqual(new Set(names.map((name) => name.length)), new Set([108]));
  const run = reaped(reaper, 'echo reached', 1000);
  assert.equal((await run).exitCode, 0);
  assert.equal(run.opts.out(), 'reached\n');
});

test('reaperUnavailableReason says how to install perl when it is missing', async (t) => {
  await pathWithOnly(t, ['bash']);
  assert.equal(await reaperUnavailableReason(), 'perl was not found on PATH; install it (Debian/Ubuntu: apt-get install perl-base)');
});

test('the reaper kills processes that called setsid or were double-forked when the command exits, and exits with its code', { timeout: 60_000 }, async (t) => {
  const reaper = await startReaper(t);
  if (reaper === undefined) return;
  const marker = trackedMarker(t);
  // A grace period longer than the test may take: processes that die on SIGTERM are not waited for.
  const run = reaped(reaper, `${escapees(marker)}; echo started; echo to stderr >&2; exit 3`, 600_000);
  const outcome = await run;
  assert.deepEqual(outcome, { exitCode: 3, exitSignal: null, timedOut: false });
  assert.equal(run.opts.out(), 'started\n');
  assert.equal(run.opts.err(), 'to stderr\n');
  assert.equal(processesWith(marker).length, 0, 'nothing is left when the run returns');
});

test('the reaper runs calls at once, each with its own output, working directory and environment', async (t) => {
  const reaper = await startReaper(t);
  if (reaper === undefined) return;
  const runs = [1, 2, 3, 4].map((n) =>
    reaped(reaper, 'sleep 0.1; echo "$N $PWD"; echo "e$N" >&2', 2_000, { cwd: n % 2 === 0 ? '/' : tmpdir(), env: commandEnv({ N: String(n) }) }),
  );
  const outcomes = await Promise.all(runs);
  for (const [i, run] of runs.entries()) {
    assert.equal(outcomes[i]!.exitCode, 0);
    assert.equal(run.opts.out(), `${i + 1} ${(i + 1) % 2 === 0 ? '/' : tmpdir()}\n`);
    assert.equal(run.opts.err(), `e${i + 1}\n`);
  }
});

test('the reaper reports the signal that killed the command', async (t) => {
  const reaper = await startReaper(t);
  if (reaper === undefined) return;
  const outcome = await reaped(reaper, 'kill -KILL $$', 2_000);
  assert.deepEqual(outcome, { exitCode: null, exitSignal: 'SIGKILL', timedOut: false });
});

test('the reaper exits 127 and says so when the command cannot be run', async (t) => {
  const reaper = await startReaper(t);
  if (reaper === undefined) return;
  const opts = options();
  const outcome = await reaper.run('/nonexistent/program', [], opts);
  assert.equal(outcome.exitCode, 127);
  assert.match(opts.err(), /^toolport reaper: \/nonexistent\/program: No such file or directory$/m);
});

test('the reaper reports a working directory it cannot enter as a failure to start', async (t) => {
  const reaper = await startReaper(t);
  if (reaper === undefined) return;
  const outcome = await reaper.run('true', [], options({ cwd: '/nonexistent/directory' }));
  assert.match(outcome.spawnError?.message ?? '', /^\/nonexistent\/directory: No such file or directory$/);
});

test('the reaper refuses a NUL byte in the command as spawn does', async (t) => {
  const reaper = await startReaper(t);
  if (reaper === undefined) return;
  const outcome = await reaper.run('bash', ['-c', 'echo a\0b'], options());
  assert.equal(outcome.spawnError?.code, 'ERR_INVALID_ARG_VALUE');
});

test('on timeout the reaper kills everything it started, with SIGKILL after the grace period for what ignores SIGTERM', async (t) => {
  const reaper = await startReaper(t);
  if (reaper === undefined) return;
  const marker = trackedMarker(t);
  // An ignored signal is inherited: neither bash nor its sleeps die of SIGTERM.
  const run = reaped(reaper, `trap '' TERM; ${escapees(marker)}; echo ready; wait`, 300, { timeoutMs: 500 });
  await waitFor(() => run.opts.out() === 'ready\n', 'the escapees to be in place');
  const termAt = Date.now();
  const outcome = await run;
  assert.equal(outcome.timedOut, true);
  assert.equal(outcome.exitSignal, 'SIGKILL', 'bash ignored SIGTERM, so the reaper killed it');
  assert.ok(Date.now() - termAt >= 300, 'SIGKILL waited for the grace period');
  assert.equal(processesWith(marker).length, 0, 'nothing is left when the run returns');
});

test('an aborted call kills everything it started and says why', async (t) => {
  const reaper = await startReaper(t);
  if (reaper === undefined) return;
  const marker = trackedMarker(t);
  const controller = new AbortController();
  const run = reaped(reaper, `${escapees(marker)}; echo ready; wait`, 2_000, { signal: controller.signal });
  await waitFor(() => run.opts.out() === 'ready\n', 'the escapees to be in place');
  controller.abort('the client went away');
  const outcome = await run;
  assert.equal(outcome.abortReason, 'the client went away');
  assert.equal(processesWith(marker).length, 0, 'nothing is left when the run returns');
});

test('a call aborted before the resident forked it is still killed when it starts: many times, nothing outlives its call', async (t) => {
  const reaper = await startReaper(t);
  if (reaper === undefined) return;
  const marker = trackedMarker(t);
  // Aborted in the same tick as submitted: the call answers before the resident can report a pid.
  for (let i = 0; i < 20; i++) {
    const controller = new AbortController();
    const run = reaped(reaper, `exec -a ${marker} sleep 30`, 200, { signal: controller.signal });
    controller.abort('the client went away');
    assert.equal((await run).abortReason, 'the client went away');
  }
  // Whatever the resident forked for them is killed as it starts (SIGTERM; SIGKILL 200 ms later).
  await waitFor(() => processesWith(marker).length === 0, 'every command of an aborted call to be gone', 10_000);
});

test('a new resident takes the next call when the last one was killed, and the calls it ran end', async (t) => {
  const reaper = await startReaper(t);
  if (reaper === undefined) return;
  const marker = trackedMarker(t);
  const run = reaped(reaper, `${escapees(marker)}; echo ready; wait`, 2_000);
  await waitFor(() => run.opts.out() === 'ready\n', 'the escapees to be in place');
  const resident = parentOf(parentOf(bashOf(marker)));
  assert.equal(readFileSync(`/proc/${resident}/cmdline`, 'utf8'), 'toolport-reaper\0');
  process.kill(resident, 'SIGKILL');
  // Its call reaper gets SIGTERM as its parent dies, and cleans up.
  const outcome = await run;
  assert.equal(outcome.exitSignal, 'SIGTERM');
  assert.equal(processesWith(marker).length, 0, 'nothing is left when the run returns');
  const next = reaped(reaper, 'echo again', 2_000);
  assert.equal((await next).exitCode, 0);
  assert.equal(next.opts.out(), 'again\n');
});

test('when the server dies the reaper kills everything it started', async (t) => {
  if (!requireOrSkip(t, 'the reaper (Perl)', await reaperUnavailableReason())) return;
  const marker = trackedMarker(t);
  // A stand-in for the server: it starts a reaper and a command, and is then killed with
  // SIGKILL, which leaves it no time to do anything.
  const reaperModule = path.resolve(import.meta.dirname, '../../../src/os/proc/reaper.ts');
  const processModule = path.resolve(import.meta.dirname, '../../../src/os/proc/process.ts');
  const script = `
    import { ResidentReaper } from ${JSON.stringify(reaperModule)};
    import { commandEnv } from ${JSON.stringify(processModule)};
    const reaper = await ResidentReaper.start();
    void reaper.run('bash', ['-c', ${JSON.stringify(`${escapees(marker)}; echo ready; wait`)}], {
      cwd: '/', env: commandEnv(), timeoutMs: 60_000, killGraceMs: 300, onStdout: (d) => process.stdout.write(d), onStderr() {},
    });
  `;
  const server = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.after(() => server.kill('SIGKILL'));
  let out = '';
  server.stdout.on('data', (d) => (out += String(d)));
  await waitFor(() => out === 'ready\n', 'the escapees to be in place', 20_000);
  // bash and the two sleeps (one in a session of its own, one orphaned); the stand-in names the marker too.
  assert.equal(processesWith(marker).filter((pid) => pid !== server.pid).length, 3);
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
  // A dying server can send several: its group kill, then PR_SET_PDEATHSIG as the resident dies.
  // Perl blocks a signal while its handler runs, so one that comes then is handled after the
  // handler has died; the hook holds the reaper there meanwhile.
  const dir = await temporaryDirectory(t, 'toolport-reaper-');
  await writeFile(path.join(dir, 'HoldDie.pm'), HOLD_DIE_MODULE);
  // The call reapers have the resident's environment; only the command gets the one it is run with.
  const reaper = await startReaper(t, { env: commandEnv({ PERL5OPT: `-I${dir} -MHoldDie`, HOLD_DIE_DIR: dir }) });
  if (reaper === undefined) return;
  const marker = trackedMarker(t);
  const run = reaped(reaper, `${escapees(marker)}; echo ready; wait`, 2_000);
  await waitFor(() => run.opts.out() === 'ready\n', 'the escapees to be in place');
  const callReaper = parentOf(bashOf(marker));
  process.kill(callReaper, 'SIGTERM');
  await waitFor(() => existsSync(path.join(dir, 'dying')), 'the reaper to handle SIGTERM');
  process.kill(callReaper, 'SIGTERM');
  await writeFile(path.join(dir, 'go'), '');
  const outcome = await run;
  assert.deepEqual(outcome, { exitCode: null, exitSignal: 'SIGTERM', timedOut: false }, 'the reaper reports bash as it ended, not an error');
  assert.equal(run.opts.err(), '');
  assert.equal(processesWith(marker).length, 0, 'nothing is left when the run returns');
});

test(
  "the reaper's watch stops a call past its processes, past its memory, and past its directory's bytes, naming the bound",
  { timeout: 60_000 },
  async (t) => {
    const reaper = await startReaper(t);
    if (!reaper) return;
    const watched = async (watch: string, command: string): Promise<{ bound: string | undefined; out: string }> => {
      const dir = await temporaryDirectory(t, 'toolport-watch-');
      command = command.replaceAll('DIR', dir);
      const run = options();
      const outcome = await reaper.run('bash', ['-c', command], { ...run, confine: [`watch 20 ${watch} ${dir}`] });
      return { bound: outcome.overBound, out: run.out() };
    };
    // 100 processes against a bound of 50 tasks; the call would otherwise run for a minute.
    const processes = await watched('50 0 0', 'for i in $(seq 100); do sleep 60 & done; wait; echo finished');
    assert.deepEqual(processes, { bound: 'processes', out: '' });
    const memory = await watched('0 100000000 0', 'node -e "const kept = []; for (;;) kept.push(Buffer.alloc(1e7, 1))"; echo finished');
    assert.deepEqual(memory, { bound: 'memory', out: '' });
    const tmp = await watched(`0 0 1000000`, `for i in $(seq 100); do head -c 100000 /dev/zero > DIR/f$i; sleep 0.01; done; echo finished`);
    assert.deepEqual(tmp, { bound: 'tmp', out: '' });
    const within = await watched('50 100000000 1000000', 'echo fine');
    assert.deepEqual(within, { bound: undefined, out: 'fine\n' });
  },
);
