import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Writable } from 'node:stream';
import { test, type TestContext } from 'node:test';
import { pino } from 'pino';
import { chooseBashIsolation, logBashIsolation, type BashIsolation } from '#src/os/sandbox/isolation.js';
import { reaperUnavailableReason } from '#src/os/proc/reaper.js';
import { sandboxUnavailableReason } from '#src/os/sandbox/bubblewrap.js';
import { pathWithOnly } from '../../support/programs.js';
import { requireOrSkip } from '../../support/require.js';
import { temporaryDirectory } from '../../support/workspace.js';

async function workspace(t: TestContext): Promise<string> {
  return temporaryDirectory(t, 'toolport-isolation-');
}

/** The one line `logBashIsolation` writes, parsed. */
function logged(isolation: BashIsolation): Record<string, unknown> {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  logBashIsolation(pino({ level: 'info' }, stream), isolation);
  assert.equal(lines.length, 1);
  return lines[0]!;
}

/** What `bash -c command` prints when run the isolation's way. */
async function output(isolation: BashIsolation, command: string, cwd: string): Promise<string> {
  const chunks: Buffer[] = [];
  const outcome = await isolation.run(command, { cwd, timeoutMs: 10_000, onStdout: (chunk) => chunks.push(chunk), onStderr: () => {} });
  assert.equal(outcome.exitCode, 0);
  return Buffer.concat(chunks).toString('utf8');
}

const INFO = 30;
const WARN = 40;
const NO_BWRAP = 'bwrap was not found on PATH; install it (Debian/Ubuntu: apt-get install bubblewrap)';

test('auto runs the sandbox when a trial run works, and the log line says so and why', async (t) => {
  const root = await workspace(t);
  const unavailable = await sandboxUnavailableReason(root);
  if (!requireOrSkip(t, 'bubblewrap', unavailable)) return;
  const isolation = await chooseBashIsolation({ workspaceRoot: root, setting: 'auto' });
  assert.deepEqual([isolation.mode, isolation.reaping], ['sandbox', 'pid-namespace']);
  // bubblewrap is the init of the sandbox's PID namespace.
  assert.equal(await output(isolation, 'read -r name < /proc/$PPID/comm; echo "$name"', root), 'bwrap\n');
  const line = logged(isolation);
  assert.equal(line.level, INFO);
  assert.equal(line.msg, 'Bash runs commands in the bubblewrap sandbox');
  assert.equal(line.bashSandbox, 'on');
  assert.equal(line.reaping, 'pid-namespace');
  assert.equal(line.reason, 'TOOLPORT_BASH_SANDBOX=auto and a trial run of bubblewrap succeeded');
});

test('auto runs Landlock when bubblewrap does not work, and the log line says so, why, and what bubblewrap lacked', async (t) => {
  const root = await workspace(t);
  await pathWithOnly(t, ['bash', 'perl']);
  if (!requireOrSkip(t, 'the subreaper (Perl)', await reaperUnavailableReason())) return;
  const isolation = await chooseBashIsolation({ workspaceRoot: root, setting: 'auto' });
  t.after(() => isolation.close());
  assert.deepEqual([isolation.mode, isolation.mechanism, isolation.reaping], ['sandbox', 'landlock', 'subreaper']);
  assert.equal(await output(isolation, 'read -r name < /proc/$PPID/comm; echo "$name"', root), 'toolport-reaper\n');
  const line = logged(isolation);
  assert.equal(line.level, INFO);
  assert.equal(line.msg, 'Bash runs commands in the Landlock sandbox');
  assert.equal(line.bashSandbox, 'on');
  assert.equal(line.mechanism, 'landlock');
  assert.equal(line.reason, `TOOLPORT_BASH_SANDBOX=auto and a trial run of Landlock and seccomp succeeded; bubblewrap does not work here: ${NO_BWRAP}`);
});

/** Points the system's temporary directory below a file, where Landlock's private directories cannot be made. */
async function noPrivateDirectories(t: TestContext, root: string): Promise<string> {
  const file = path.join(root, 'not-a-directory');
  await writeFile(file, '');
  const saved = process.env.TMPDIR;
  process.env.TMPDIR = path.join(file, 'tmp');
  t.after(() => {
    if (saved === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = saved;
  });
  return process.env.TMPDIR;
}

test('auto runs without a sandbox when neither works, under the subreaper, and warns naming both reasons', async (t) => {
  const root = await workspace(t);
  await pathWithOnly(t, ['bash', 'perl']);
  if (!requireOrSkip(t, 'the subreaper (Perl)', await reaperUnavailableReason())) return;
  await noPrivateDirectories(t, root);
  const isolation = await chooseBashIsolation({ workspaceRoot: root, setting: 'auto' });
  assert.deepEqual([isolation.mode, isolation.mechanism, isolation.reaping], ['unconfined', 'none', 'subreaper']);
  assert.equal(await output(isolation, 'read -r name < /proc/$PPID/comm; echo "$name"', root), 'toolport-reaper\n');
  const line = logged(isolation);
  assert.equal(line.level, WARN);
  assert.equal(
    line.msg,
    "Bash runs commands without a sandbox: they can read and write whatever the server's user can, reach the network, and read the server's secrets",
  );
  assert.equal(line.bashSandbox, 'off');
  assert.equal(line.reaping, 'subreaper');
  assert.match(
    String(line.reason),
    /^TOOLPORT_BASH_SANDBOX=auto and no sandbox works here: bubblewrap does not work here: bwrap was not found on PATH; install it \(Debian\/Ubuntu: apt-get install bubblewrap\); Landlock cannot confine commands here: no private directory for calls can be made: ENOTDIR: /,
  );
});

test('bubblewrap refuses to start, saying why, when bubblewrap does not work', async (t) => {
  const root = await workspace(t);
  await pathWithOnly(t, ['bash', 'perl']);
  await assert.rejects(chooseBashIsolation({ workspaceRoot: root, setting: 'bubblewrap' }), {
    message: `TOOLPORT_BASH_SANDBOX=bubblewrap but bubblewrap (bwrap) is not available: ${NO_BWRAP}`,
  });
});

test('true refuses to start, naming what each sandbox lacks, when neither works', async (t) => {
  const root = await workspace(t);
  await pathWithOnly(t, ['bash']);
  await assert.rejects(chooseBashIsolation({ workspaceRoot: root, setting: true }), {
    message:
      `TOOLPORT_BASH_SANDBOX=true but no sandbox works here: bubblewrap does not work here: ${NO_BWRAP}; ` +
      'Landlock cannot confine commands here: the reaper cannot run: perl was not found on PATH; install it (Debian/Ubuntu: apt-get install perl-base)',
  });
});

test('landlock refuses to start, saying why, when no private directory can be made', async (t) => {
  const root = await workspace(t);
  await noPrivateDirectories(t, root);
  await assert.rejects(chooseBashIsolation({ workspaceRoot: root, setting: 'landlock' }), {
    message: /^TOOLPORT_BASH_SANDBOX=landlock but Landlock cannot confine commands here: no private directory for calls can be made: ENOTDIR: /,
  });
});

test('false runs without the sandbox even where it works, and warns', async (t) => {
  const root = await workspace(t);
  if (!requireOrSkip(t, 'the subreaper (Perl)', await reaperUnavailableReason())) return;
  const isolation = await chooseBashIsolation({ workspaceRoot: root, setting: false });
  assert.deepEqual([isolation.mode, isolation.reaping], ['unconfined', 'subreaper']);
  const line = logged(isolation);
  assert.equal(line.level, WARN);
  assert.equal(line.bashSandbox, 'off');
  assert.equal(line.reason, 'TOOLPORT_BASH_SANDBOX=false');
});

test('without bubblewrap and perl only the process group is left, and the reason says what that does not kill', async (t) => {
  const root = await workspace(t);
  await pathWithOnly(t, ['bash']);
  const isolation = await chooseBashIsolation({ workspaceRoot: root, setting: 'auto' });
  assert.deepEqual([isolation.mode, isolation.reaping], ['unconfined', 'process-group']);
  assert.equal(await output(isolation, 'echo $PPID', root), `${process.pid}\n`, 'the server runs bash itself');
  const line = logged(isolation);
  assert.equal(line.level, WARN);
  assert.equal(line.reaping, 'process-group');
  assert.equal(
    line.reason,
    `TOOLPORT_BASH_SANDBOX=auto and no sandbox works here: bubblewrap does not work here: ${NO_BWRAP}; ` +
      'Landlock cannot confine commands here: the reaper cannot run: perl was not found on PATH; install it (Debian/Ubuntu: apt-get install perl-base); ' +
      'and the subreaper cannot run, ' +
      "so processes that leave the command's process group are not killed: perl was not found on PATH; install it (Debian/Ubuntu: apt-get install perl-base)",
  );
});

test('the sandbox hides the secret files it is given, and the log line lists what it hides', async (t) => {
  const root = await workspace(t);
  const unavailable = await sandboxUnavailableReason(root);
  if (!requireOrSkip(t, 'bubblewrap', unavailable)) return;
  const dir = await temporaryDirectory(t, 'toolport-secrets-', '/var/tmp');
  await writeFile(path.join(dir, 'keys.json'), '[]');
  const isolation = await chooseBashIsolation({ workspaceRoot: root, setting: true, secretFiles: [path.join(dir, 'keys.json')] });
  assert.deepEqual(isolation.hidden, { directories: [dir], files: [] });
  assert.equal(await output(isolation, `ls -A ${dir}`, root), '', 'an empty directory covers it');
  assert.deepEqual(logged(isolation).hidden, { directories: [dir], files: [] });
});
