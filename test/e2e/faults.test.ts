import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import path from 'node:path';
import { test, type TestContext } from 'node:test';
import { processesWith, trackedMarker, waitFor } from '../support/processes.js';
import { kill, startServer, type LogLine, type ServerProcess } from '../support/server-process.js';

const FIXTURES = path.resolve(import.meta.dirname, '../fixtures');
const PLUGIN = path.join(FIXTURES, 'faults-plugin.ts');
const BROKEN_PLUGIN = path.join(FIXTURES, 'faults-broken-plugin.ts');

async function server(t: TestContext, env: Record<string, string> = {}): Promise<ServerProcess> {
  const started = await startServer({ TOOLPORT_PLUGINS: PLUGIN, ...env });
  t.after(() => kill(started));
  return started;
}

function call(server: ServerProcess, tool: string, input: unknown, requestId: string): Promise<Response> {
  return fetch(`${server.url}/tools/${tool}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-request-id': requestId },
    body: JSON.stringify(input),
  });
}

/** Sends a call on a connection of its own (no keep-alive pool), and resolves with status and body. */
function callOnNewConnection(server: ServerProcess, tool: string, input: unknown): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const req = request(`${server.url}/tools/${tool}`, { method: 'POST', agent: false, headers: { 'content-type': 'application/json' } }, (res) => {
      let text = '';
      res.on('data', (chunk) => (text += String(chunk)));
      res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
    });
    req.on('error', reject);
    req.end(JSON.stringify(input));
  });
}

const toolCall = (requestId: string) => (l: LogLine) => l.msg === 'tool call' && l.reqId === requestId;

test('a plug-in tool that throws answers 200 isError with its message, and the stack only reaches the log', async (t) => {
  const srv = await server(t);
  const res = await call(srv, 'Explode', {}, 'explode-1');
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), { content: [{ type: 'text', text: 'Tool "Explode" failed: the fixture tool exploded' }], isError: true });
  const line = await srv.logLine(toolCall('explode-1'));
  assert.equal(line.outcome, 'threw');
  assert.match(String((line.err as { stack?: string }).stack), /faults-plugin\.ts/);
});

test('a plug-in tool that hangs past its deadline answers 200 isError "timed out", and its signal fires', async (t) => {
  const srv = await server(t);
  const res = await call(srv, 'Hang', {}, 'hang-1');
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), { content: [{ type: 'text', text: 'Tool "Hang" timed out after 200 ms and was aborted.' }], isError: true });
  assert.equal((await srv.logLine(toolCall('hang-1'))).outcome, 'timeout');
  const aborted = await srv.logLine((l) => l.msg === 'hang aborted' && l.reqId === 'hang-1');
  assert.match(String(aborted.reason), /deadline of 200 ms exceeded/);
  // The server is still there for the next call.
  assert.equal((await call(srv, 'Echo', { text: 'still here' }, 'echo-after-hang')).status, 200);
});

test('a client that disconnects mid-call to Bash gets the command, its child and its grandchild killed', async (t) => {
  const srv = await server(t);
  const mark = trackedMarker(t);
  const req = request(`${srv.url}/tools/Bash`, {
    method: 'POST',
    agent: false,
    headers: { 'content-type': 'application/json', 'x-request-id': 'gone-1' },
  });
  req.on('error', () => {});
  req.end(JSON.stringify({ command: `sleep ${mark} & (sleep ${mark} &); wait` }));
  // bash itself, the backgrounded sleep and the sleep the subshell left behind.
  await waitFor(() => processesWith(mark).length >= 3, 'the command and its children to start', 10_000);
  req.destroy();
  const line = await srv.logLine(toolCall('gone-1'));
  assert.equal(line.outcome, 'aborted');
  await waitFor(() => processesWith(mark).length === 0, 'the command and its children to be gone', 10_000);
});

test('SIGTERM lets a short call finish, aborts a long one after the grace period, refuses new calls with 503, and exits 0', async (t) => {
  const srv = await server(t, { TOOLPORT_SHUTDOWN_GRACE_MS: '300' });
  const mark = trackedMarker(t);
  const gate = `release-${randomBytes(6).toString('hex')}`;
  const long = call(srv, 'Bash', { command: `sleep ${mark} & (sleep ${mark} &); wait` }, 'long-1');
  // Runs until the test creates the gate file, so it is certainly in flight when SIGTERM comes.
  const short = call(srv, 'Bash', { command: `while [ ! -e ${gate} ]; do sleep 0.01; done; echo short done` }, 'short-1');
  await waitFor(() => processesWith(mark).length >= 3 && processesWith(gate).length >= 1, 'both commands to start', 10_000);

  srv.child.kill('SIGTERM');
  await srv.logLine((l) => l.msg === 'shutting down');
  // A new connection while draining: the server still listens, and answers 503.
  const refused = await callOnNewConnection(srv, 'Echo', { text: 'too late' });
  assert.equal(refused.status, 503);
  assert.equal((refused.body as { error: { code: string } }).error.code, 'SHUTTING_DOWN');
  await writeFile(path.join(srv.workspace, gate), '');

  const shortRes = await short;
  assert.equal(shortRes.status, 200);
  assert.deepEqual(await shortRes.json(), { content: [{ type: 'text', text: 'short done' }], isError: false });
  const longRes = await long;
  assert.equal(longRes.status, 200);
  assert.deepEqual(await longRes.json(), {
    content: [{ type: 'text', text: 'Tool "Bash" was aborted: the server is shutting down.' }],
    isError: true,
  });
  assert.equal(await srv.exited, 0);
  await waitFor(() => processesWith(mark).length === 0, 'no sleep left behind', 10_000);
});

test('SIGTERM kills a command that ignores SIGTERM before the process exits, so nothing outlives the server', async (t) => {
  const srv = await server(t, { TOOLPORT_SHUTDOWN_GRACE_MS: '100' });
  const mark = trackedMarker(t);
  // An ignored signal is inherited: neither bash nor its sleeps die of the SIGTERM the abort sends.
  const stubborn = call(srv, 'Bash', { command: `trap "" TERM; sleep ${mark} & sleep ${mark}; wait` }, 'stubborn-1');
  await waitFor(() => processesWith(mark).length >= 3, 'the command to start', 10_000);
  srv.child.kill('SIGTERM');
  const res = await stubborn;
  assert.equal(((await res.json()) as { isError: boolean }).isError, true);
  assert.equal(await srv.exited, 0);
  // The timers that would send SIGKILL died with the server: only its exit handler can have sent it.
  await waitFor(() => processesWith(mark).length === 0, 'no process left behind after exit');
});

test('a plug-in that fails to register stops start-up with exit status 1 and a message naming it', async () => {
  await assert.rejects(startServer({ TOOLPORT_PLUGINS: BROKEN_PLUGIN }), (err: Error) => {
    assert.match(err.message, /server exited with 1/);
    assert.ok(err.message.includes(`toolport: Plug-in "${BROKEN_PLUGIN}" failed to load: `), err.message);
    assert.match(err.message, /Echo/);
    return true;
  });
});

test('a Glob pattern too large for the regular-expression engine answers isError, and the server stays up', async (t) => {
  const srv = await server(t);
  await writeFile(path.join(srv.workspace, 'a.txt'), 'a\n');
  // 21 000 characters, well under the 1 MiB body limit; from about 17 000 the process dies.
  const res = await call(srv, 'Glob', { pattern: '(a)'.repeat(7_000) }, 'glob-1').catch(async (err: unknown) => {
    const why =
      srv
        .stderr()
        .split('\n')
        .find((l) => /Error/.test(l)) ?? '';
    throw new Error(`the server died (exit ${await srv.exited}): ...${why.slice(-80)}`, { cause: err });
  });
  assert.ok(res.status === 200 || res.status === 400, String(res.status));
  assert.equal(((await res.json()) as { isError: boolean }).isError, true);
  assert.equal((await fetch(`${srv.url}/healthz`)).status, 200);
});
