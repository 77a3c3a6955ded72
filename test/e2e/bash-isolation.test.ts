import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, realpathSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test, type TestContext } from 'node:test';
import { reaperUnavailableReason } from '#src/os/proc/reaper.js';
import { sandboxUnavailableReason } from '#src/os/sandbox/bubblewrap.js';
import { escapees } from '../fixtures/escapees.js';
import { processesIn, processesWith, trackedMarker, waitFor } from '../support/processes.js';
import { kill, startServer, type ServerProcess } from '../support/server-process.js';
import { requireOrSkip } from '../support/require.js';
import { temporaryDirectory } from '../support/workspace.js';

async function server(t: TestContext, env: Record<string, string>): Promise<ServerProcess> {
  const started = await startServer(env);
  t.after(() => kill(started));
  return started;
}

async function bash(srv: ServerProcess, key: string, command: string): Promise<{ text: string; isError: boolean }> {
  const res = await fetch(`${srv.url}/tools/Bash`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({ command }),
  });
  assert.equal(res.status, 200);
  const body = (await res.json()) as { content: Array<{ text: string }>; isError: boolean };
  return { text: body.content[0]!.text, isError: body.isError };
}

/**
 * Starts a call that leaves a setsid'd and a double-forked process behind and then waits, stops
 * the server with SIGTERM while the call runs, and checks that nothing the call started is left.
 */
async function shutdownLeavesNothing(t: TestContext, srv: ServerProcess, key: string): Promise<void> {
  const mark = trackedMarker(t);
  const call = bash(srv, key, `${escapees(mark)}; touch ready; wait`);
  await waitFor(() => existsSync(path.join(srv.workspace, 'ready')), 'the escapees to be in place', 10_000);
  srv.child.kill('SIGTERM');
  assert.equal((await call).isError, true);
  assert.equal(await srv.exited, 0);
  await waitFor(() => processesWith(mark).length === 0, 'nothing the call started to outlive the server');
}

const key = (): string => randomBytes(24).toString('hex');

test("by default the server runs Bash in the sandbox, says so at start-up, and Bash reads no key from the keys file or the server's environment", async (t) => {
  const unavailable = await sandboxUnavailableReason(tmpdir());
  if (!requireOrSkip(t, 'bubblewrap', unavailable)) return;
  const keysDir = await temporaryDirectory(t, 'toolport-e2e-keys-', '/var/tmp');
  const [envKey, fileKey] = [key(), key()];
  await writeFile(path.join(keysDir, 'keys.json'), JSON.stringify([{ label: 'from-file', key: fileKey }]));
  const srv = await server(t, { TOOLPORT_API_KEYS: envKey, TOOLPORT_API_KEYS_FILE: path.join(keysDir, 'keys.json'), TOOLPORT_SHUTDOWN_GRACE_MS: '100' });

  const line = await srv.logLine((l) => typeof l.bashSandbox === 'string');
  assert.equal(line.msg, 'Bash runs commands in the bubblewrap sandbox');
  assert.equal(line.bashSandbox, 'on');
  assert.equal(line.reason, 'TOOLPORT_BASH_SANDBOX=auto and a trial run of bubblewrap succeeded');
  assert.deepEqual(line.hidden, { directories: [keysDir], files: [] });

  // Both keys work, so the server has them: in its environment and from the file.
  const search = await bash(
    srv,
    fileKey,
    `cat ${keysDir}/keys.json; cat /proc/${srv.pid}/environ; grep -r -l -a -s -e ${envKey} -e ${fileKey} /proc/[0-9]*/environ ${keysDir}; echo searched`,
  );
  assert.doesNotMatch(search.text, new RegExp(`${envKey}|${fileKey}`));
  assert.match(search.text, /^searched$/m);
  assert.match(search.text, new RegExp(`cat: ${keysDir}/keys.json: No such file or directory`));
  assert.match(search.text, new RegExp(`cat: /proc/${srv.pid}/environ: No such file or directory`));

  await shutdownLeavesNothing(t, srv, envKey);
});

test('with TOOLPORT_BASH_SANDBOX=false the server warns at start-up, and nothing a Bash call starts outlives the call or the server', async (t) => {
  const noReaper = await reaperUnavailableReason();
  if (!requireOrSkip(t, 'the subreaper (Perl)', noReaper)) return;
  const apiKey = key();
  const srv = await server(t, { TOOLPORT_API_KEYS: apiKey, TOOLPORT_BASH_SANDBOX: 'false', TOOLPORT_SHUTDOWN_GRACE_MS: '100' });

  const line = await srv.logLine((l) => typeof l.bashSandbox === 'string');
  assert.equal(line.level, 40);
  assert.match(String(line.msg), /^Bash runs commands without a sandbox: /);
  assert.equal(line.bashSandbox, 'off');
  assert.equal(line.reaping, 'subreaper');
  assert.equal(line.reason, 'TOOLPORT_BASH_SANDBOX=false');

  const mark = trackedMarker(t);
  assert.deepEqual(await bash(srv, apiKey, `${escapees(mark)}; echo left behind`), { text: 'left behind', isError: false });
  assert.equal(processesWith(mark).length, 0, 'nothing is left when the call returns');

  await shutdownLeavesNothing(t, srv, apiKey);
});

test('with TOOLPORT_BASH_SANDBOX=true the server refuses to start where neither sandbox can run, saying why', async (t) => {
  const emptyPath = await temporaryDirectory(t, 'toolport-e2e-path-');
  await assert.rejects(startServer({ TOOLPORT_BASH_SANDBOX: 'true', PATH: emptyPath }), (err: Error) => {
    assert.match(err.message, /server exited with 1/);
    assert.ok(
      err.message.includes(
        'toolport: TOOLPORT_BASH_SANDBOX=true but no sandbox works here: bubblewrap does not work here: bwrap was not found on PATH; install it (Debian/Ubuntu: apt-get install bubblewrap); Landlock cannot confine commands here: the reaper cannot run: perl was not found on PATH',
      ),
      err.message,
    );
    return true;
  });
});

test('the shells and sandboxes Bash starts ahead of calls end with the server, whether it stops or is killed', { timeout: 120_000 }, async (t) => {
  const noReaper = await reaperUnavailableReason();
  if (!requireOrSkip(t, 'the subreaper (Perl)', noReaper)) return;
  const noSandbox = await sandboxUnavailableReason(tmpdir());
  if (!requireOrSkip(t, 'bubblewrap', noSandbox)) return;
  for (const sandbox of ['auto', 'landlock', 'false']) {
    for (const signal of ['SIGTERM', 'SIGKILL'] as const) {
      const apiKey = key();
      const srv = await server(t, { TOOLPORT_API_KEYS: apiKey, TOOLPORT_BASH_SANDBOX: sandbox, TOOLPORT_SHUTDOWN_GRACE_MS: '100' });
      const workspace = realpathSync(srv.workspace);
      assert.deepEqual(await bash(srv, apiKey, 'echo once'), { text: 'once', isError: false });
      // Started after the call: call reapers, (bubblewrap,) and the shells waiting in them, all in the workspace.
      await waitFor(() => processesIn(workspace).length >= 4, `shells to wait in the workspace (sandbox ${sandbox})`, 10_000);
      srv.child.kill(signal);
      await srv.exited;
      await waitFor(() => processesIn(workspace).length === 0, `nothing left in the workspace after ${signal} (sandbox ${sandbox})`, 10_000);
    }
  }
});
