import assert from 'node:assert/strict';
import { rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { test, type TestContext } from 'node:test';
import { reaperUnavailableReason } from '#src/os/proc/reaper.js';
import { escapees } from '../fixtures/escapees.js';
import { processesWith, trackedMarker, waitFor } from '../support/processes.js';
import { requireOrSkip } from '../support/require.js';
import { kill, startServer, type ServerProcess } from '../support/server-process.js';
import { temporaryDirectory } from '../support/workspace.js';

const ALICE = { label: 'alice', key: 'alice-secret-0123456789abcdef' };
const BOB = { label: 'bob', key: 'bob-secret-0123456789abcdef' };

async function server(t: TestContext, env: Record<string, string> = {}): Promise<{ srv: ServerProcess; writeKeys: (keys: unknown) => Promise<void> }> {
  const dir = await temporaryDirectory(t, 'toolport-tasks-e2e-');
  const file = path.join(dir, 'keys.json');
  const writeKeys = async (keys: unknown): Promise<void> => {
    await writeFile(`${file}.new`, JSON.stringify(keys));
    await rename(`${file}.new`, file);
  };
  await writeKeys([ALICE, BOB]);
  const srv = await startServer({ TOOLPORT_API_KEYS_FILE: file, TOOLPORT_SHUTDOWN_GRACE_MS: '100', ...env });
  t.after(() => kill(srv));
  return { srv, writeKeys };
}

async function post(srv: ServerProcess, who: { key: string }, tool: string, input: unknown): Promise<{ status: number; body: unknown }> {
  const res = await fetch(`${srv.url}/tools/${tool}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${who.key}`, 'content-type': 'application/json' },
    body: JSON.stringify(input),
  });
  return { status: res.status, body: await res.json() };
}

async function startTask(srv: ServerProcess, who: { key: string }, command: string): Promise<string> {
  const { status, body } = await post(srv, who, 'Bash', { command, run_in_background: true });
  assert.equal(status, 200);
  const text = (body as { content: Array<{ text: string }> }).content[0]!.text;
  const id = /with ID: (\S+)\./.exec(text)?.[1];
  assert.ok(id, text);
  return id;
}

const notFound = (id: string) => ({ content: [{ type: 'text', text: `No task found with ID: ${id}` }], isError: true });

test('over REST a key sees and stops only its own tasks, and /readyz and /metrics count the tasks running', async (t) => {
  const { srv } = await server(t);
  const mark = trackedMarker(t);
  const id = await startTask(srv, ALICE, `sleep ${mark}`);
  await waitFor(() => processesWith(mark).length > 0, 'the task to start', 10_000);
  assert.deepEqual(await post(srv, BOB, 'TaskOutput', { task_id: id, block: false }), { status: 200, body: notFound(id) });
  assert.deepEqual(await post(srv, BOB, 'TaskStop', { task_id: id }), { status: 200, body: notFound(id) });
  const ready = await fetch(`${srv.url}/readyz`);
  assert.deepEqual(await ready.json(), { status: 'ready', tasks: { running: 1 }, callTasks: { working: 0 } });
  const metrics = await (await fetch(`${srv.url}/metrics`, { headers: { authorization: `Bearer ${ALICE.key}` } })).text();
  assert.match(metrics, /^toolport_background_tasks_running 1$/m);
  const invalid = await post(srv, ALICE, 'TaskOutput', { task_id: id, timeout: 600_001 });
  const message = 'Invalid input for tool "TaskOutput":\n- $.timeout: must be <= 600000';
  assert.deepEqual(invalid, {
    status: 400,
    body: {
      content: [{ type: 'text', text: message }],
      isError: true,
      error: { code: 'INVALID_INPUT', message, details: { violations: [{ path: '$.timeout', message: 'must be <= 600000' }] } },
    },
  });
  assert.equal((await post(srv, ALICE, 'TaskStop', { task_id: id })).status, 200);
  assert.deepEqual(processesWith(mark), []);
  assert.deepEqual(await (await fetch(`${srv.url}/readyz`)).json(), { status: 'ready', tasks: { running: 0 }, callTasks: { working: 0 } });
});

test('SIGTERM lets a background task finish within the grace, refusing new ones meanwhile, then the process exits 0', async (t) => {
  const { srv } = await server(t, { TOOLPORT_SHUTDOWN_GRACE_MS: '30000' });
  const id = await startTask(srv, ALICE, 'until [ -e go ]; do sleep 0.05; done; echo went');
  srv.child.kill('SIGTERM');
  await srv.logLine((l) => l.msg === 'shutting down');
  assert.equal((await fetch(`${srv.url}/readyz`)).status, 503);
  const refused = await post(srv, BOB, 'Bash', { command: 'true', run_in_background: true });
  assert.equal(refused.status, 503);
  assert.equal((refused.body as { error: { code: string } }).error.code, 'SHUTTING_DOWN');
  await writeFile(path.join(srv.workspace, 'go'), '');
  const ended = await srv.logLine((l) => l.msg === 'background task ended');
  assert.equal(ended.task, id);
  assert.equal(ended.status, 'completed');
  assert.equal(ended.exitCode, 0);
  assert.equal(await srv.exited, 0);
});

test('SIGTERM drains background tasks like calls, then ends one that ignores SIGTERM, and nothing outlives the server', async (t) => {
  const { srv } = await server(t);
  const mark = trackedMarker(t);
  await startTask(srv, ALICE, `trap '' TERM; sleep ${mark} & sleep ${mark}; wait`);
  await startTask(srv, BOB, `setsid sleep ${mark} & sleep ${mark}`);
  await waitFor(() => processesWith(mark).length >= 4, 'the tasks to start', 10_000);
  srv.child.kill('SIGTERM');
  assert.equal(await srv.exited, 0);
  await waitFor(() => processesWith(mark).length === 0, 'no process of a task left after exit', 10_000);
});

test('without the sandbox, under the subreaper, nothing a task leaves behind (setsid, a double fork) outlives TaskStop or the server', async (t) => {
  const noReaper = await reaperUnavailableReason();
  if (!requireOrSkip(t, 'the subreaper (Perl)', noReaper)) return;
  const { srv } = await server(t, { TOOLPORT_BASH_SANDBOX: 'false' });
  const [stopped, left] = [trackedMarker(t), trackedMarker(t)];
  const first = await startTask(srv, ALICE, `${escapees(stopped)}; sleep ${stopped}`);
  await waitFor(() => processesWith(stopped).length >= 3, 'the escapees to be in place', 10_000);
  assert.equal((await post(srv, ALICE, 'TaskStop', { task_id: first })).status, 200);
  assert.deepEqual(processesWith(stopped), []);
  await startTask(srv, BOB, `${escapees(left)}; trap '' TERM; sleep ${left}`);
  await waitFor(() => processesWith(left).length >= 3, 'the escapees to be in place', 10_000);
  srv.child.kill('SIGTERM');
  assert.equal(await srv.exited, 0);
  await waitFor(() => processesWith(left).length === 0, 'no process of a task left after exit', 10_000);
});

test("a reload that removes a key ends its tasks after the grace, and another key's tasks run on", async (t) => {
  const { srv, writeKeys } = await server(t);
  const [gone, kept] = [trackedMarker(t), trackedMarker(t)];
  await startTask(srv, ALICE, `sleep ${gone}`);
  const bobs = await startTask(srv, BOB, `sleep ${kept}`);
  await waitFor(() => processesWith(gone).length > 0 && processesWith(kept).length > 0, 'the tasks to start', 10_000);
  await writeKeys([BOB]);
  srv.child.kill('SIGHUP');
  await srv.logLine((l) => l.msg === 'API keys reloaded');
  await waitFor(() => processesWith(gone).length === 0, "the removed key's task to end", 10_000);
  assert.ok(processesWith(kept).length > 0);
  const polled = await post(srv, BOB, 'TaskOutput', { task_id: bobs, block: false });
  assert.match((polled.body as { content: Array<{ text: string }> }).content[0]!.text, /<status>running<\/status>/);
});
