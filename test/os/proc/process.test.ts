import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { test } from 'node:test';
import { commandEnv, processGroupRunning, runProcess, type RunOptions } from '#src/os/proc/process.js';
import { processesWith, trackedMarker, waitFor } from '../../support/processes.js';
import { temporaryDirectory } from '../../support/workspace.js';

function options(overrides: Partial<RunOptions> = {}): RunOptions & { out: () => string } {
  const chunks: Buffer[] = [];
  return {
    cwd: process.cwd(),
    env: commandEnv(),
    timeoutMs: 5_000,
    onStdout: (chunk) => chunks.push(chunk),
    onStderr: () => {},
    out: () => Buffer.concat(chunks).toString('utf8'),
    ...overrides,
  };
}

test('commandEnv passes only the allowlisted variables, with TERM=dumb and SHELL=/bin/bash', (t) => {
  process.env.TOOLPORT_TEST_SECRET = 'hunter2';
  t.after(() => delete process.env.TOOLPORT_TEST_SECRET);
  const env = commandEnv({ TMPDIR: '/tmp' });
  for (const name of Object.keys(env)) {
    assert.ok(['PATH', 'HOME', 'LANG', 'LC_ALL', 'TERM', 'TZ', 'USER', 'SHELL', 'TMPDIR'].includes(name), name);
  }
  assert.equal(env.TERM, 'dumb');
  assert.equal(env.SHELL, '/bin/bash');
  assert.equal(env.TMPDIR, '/tmp');
});

test('commandEnv falls back to a standard PATH when the server has none', (t) => {
  const saved = process.env.PATH;
  t.after(() => (process.env.PATH = saved));
  delete process.env.PATH;
  assert.equal(commandEnv().PATH, '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin');
});

test('runProcess reports a program that does not exist as a spawn error', async () => {
  const outcome = await runProcess('/nonexistent/program', [], options());
  assert.equal(outcome.spawnError?.code, 'ENOENT');
});

test('runProcess reports an argument with a NUL byte as a spawn error instead of throwing', async () => {
  const outcome = await runProcess('bash', ['-c', 'echo a\0b'], options());
  assert.ok(outcome.spawnError, 'spawn refused the argument');
});

test('runProcess sends SIGKILL after the grace period to a group that ignores SIGTERM', async (t) => {
  const marker = trackedMarker(t);
  const started = Date.now();
  const opts = options({ timeoutMs: 100, killGraceMs: 200 });
  // Ignored signals stay ignored across exec, so the sleep ignores SIGTERM too.
  const outcome = await runProcess('bash', ['-c', `trap '' TERM; sleep ${marker} & echo $$; wait`], opts);
  assert.equal(outcome.timedOut, true);
  assert.equal(outcome.exitSignal, 'SIGKILL');
  assert.ok(Date.now() - started >= 300, 'SIGKILL came after the grace period');
  await waitFor(() => processesWith(marker).length === 0, 'the group to be gone');
  // A killed process loses its command line before it is a zombie: poll the group itself too.
  const group = Number(opts.out().trim());
  const deadline = Date.now() + 5_000;
  while ((await processGroupRunning(group)) && Date.now() < deadline) await delay(10);
  assert.equal(await processGroupRunning(group), false);
});

test('runProcess returns when a process that left the group holds the pipes open', async (t) => {
  const marker = trackedMarker(t);
  const started = Date.now();
  const dir = await temporaryDirectory(t, 'toolport-process-');
  // bash waits until the escapee is in its new session, or the group kill could catch it before.
  const command = `setsid bash -c 'touch escaped; exec sleep ${marker}' & until [ -e escaped ]; do :; done; echo done`;
  const outcome = await runProcess('bash', ['-c', command], options({ cwd: dir, killGraceMs: 100 }));
  assert.equal(outcome.exitCode, 0);
  assert.ok(Date.now() - started < 3_000, 'the pipes were closed from this side');
  // setsid escapes the group; this is the documented limit of process-group killing.
  assert.equal(processesWith(marker).length, 1);
});

test('runProcess does not start the program when the signal is already aborted', async () => {
  const controller = new AbortController();
  controller.abort('stop');
  const outcome = await runProcess('bash', ['-c', 'echo never'], options({ signal: controller.signal }));
  assert.deepEqual(outcome, { exitCode: null, exitSignal: null, timedOut: false, abortReason: 'stop' });
});

/** Runs a stand-in server that starts `command` through runProcess, then exits as soon as `started` exists. */
async function serverExitsDuringRun(dir: string, command: string, signalOnServerExit?: 'SIGTERM'): Promise<void> {
  const processModule = path.resolve(import.meta.dirname, '../../../src/os/proc/process.ts');
  const script = `
    import { existsSync } from 'node:fs';
    import { commandEnv, runProcess } from ${JSON.stringify(processModule)};
    void runProcess('bash', ['-c', ${JSON.stringify(command)}], {
      cwd: ${JSON.stringify(dir)}, env: commandEnv(), timeoutMs: 60_000, onStdout() {}, onStderr() {},
      ${signalOnServerExit ? `signalOnServerExit: '${signalOnServerExit}',` : ''}
    });
    const poll = setInterval(() => { if (existsSync(${JSON.stringify(path.join(dir, 'started'))})) process.exit(0); }, 5);
    void poll;
  `;
  const server = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: 'inherit' });
  const code = await new Promise((resolve) => server.once('exit', resolve));
  assert.equal(code, 0);
}

test("the server's exit kills a run's group with SIGKILL, or SIGTERM when the run asks for it", async (t) => {
  const marker = trackedMarker(t);
  const dir = await temporaryDirectory(t, 'toolport-process-');
  // The marker is in bash's command line, where processesWith finds it. Its stderr goes nowhere
  // once it started: bash reports the killed sleep there, and with the server's end of the pipe
  // closed that write would kill it with SIGPIPE before its trap runs.
  const command = (name: string): string =>
    `trap 'touch ${name}-got-term; exit' TERM; touch started; exec 2>/dev/null; while :; do sleep 0.01; done # ${marker}`;

  await serverExitsDuringRun(dir, command('default'));
  await waitFor(() => processesWith(marker).length === 0, 'the run to be gone');
  assert.equal(existsSync(path.join(dir, 'default-got-term')), false, 'SIGKILL leaves no time for the trap');

  await rm(path.join(dir, 'started'));
  await serverExitsDuringRun(dir, command('asked'), 'SIGTERM');
  await waitFor(() => existsSync(path.join(dir, 'asked-got-term')), 'the trap to run on SIGTERM');
  await waitFor(() => processesWith(marker).length === 0, 'the run to be gone');
});
