import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { test, type TestContext } from 'node:test';
import { processesWith, trackedMarker, waitFor } from '../support/processes.js';
import { kill, startServer, type ServerProcess } from '../support/server-process.js';
import { readStream, type StreamItem } from '../support/sse-client.js';
import { temporaryDirectory } from '../support/workspace.js';

// REST's Prefer: respond-async against the real server process, with real commands.
const ALICE = { label: 'alice', key: 'rest-tasks-alice-secret-0123456789' };
const MALLORY = { label: 'mallory', key: 'rest-tasks-mallory-secret-0123456789' };

async function server(t: TestContext, env: Record<string, string> = {}): Promise<ServerProcess> {
  const dir = await temporaryDirectory(t, 'toolport-rest-tasks-e2e-');
  const file = path.join(dir, 'keys.json');
  await writeFile(file, JSON.stringify([ALICE, MALLORY]));
  const srv = await startServer({ TOOLPORT_API_KEYS_FILE: file, TOOLPORT_BASH_SANDBOX: 'false', TOOLPORT_SHUTDOWN_GRACE_MS: '100', ...env });
  t.after(() => kill(srv));
  return srv;
}

const as = (who: { key: string }) => ({ authorization: `Bearer ${who.key}` });

async function startBash(srv: ServerProcess, who: { key: string }, command: string): Promise<{ id: string; location: string }> {
  const res = await fetch(`${srv.url}/tools/Bash`, {
    method: 'POST',
    headers: { ...as(who), 'content-type': 'application/json', prefer: 'respond-async' },
    body: JSON.stringify({ command }),
  });
  assert.equal(res.status, 202, await res.clone().text());
  assert.equal(res.headers.get('preference-applied'), 'respond-async');
  const body = (await res.json()) as { id: string; status: string };
  assert.equal(body.status, 'working');
  const location = res.headers.get('location')!;
  assert.equal(location, `/tasks/${body.id}`);
  return { id: body.id, location };
}

test('a Bash call as a task: its events stream until the result, /readyz and /metrics count it, and another key gets 404', async (t) => {
  const srv = await server(t);
  const { id, location } = await startBash(srv, ALICE, 'until [ -e go ]; do sleep 0.05; done; echo went');
  assert.deepEqual(((await (await fetch(`${srv.url}/readyz`)).json()) as { callTasks: unknown }).callTasks, { working: 1 });
  const metrics = await (await fetch(`${srv.url}/metrics`, { headers: as(ALICE) })).text();
  assert.match(metrics, /^toolport_call_tasks_working 1$/m);
  const stolen = await fetch(`${srv.url}${location}`, { headers: as(MALLORY) });
  const random = await fetch(`${srv.url}/tasks/task_AAAAAAAAAAAAAAAAAAAAAA`, { headers: as(MALLORY) });
  assert.equal(stolen.status, 404);
  assert.deepEqual(await stolen.json(), await random.json());
  const res = await fetch(`${srv.url}${location}`, { headers: { ...as(ALICE), accept: 'text/event-stream' } });
  assert.equal(res.headers.get('content-type'), 'text/event-stream');
  const events: Array<{ status: string; result?: { content: Array<{ text: string }> } }> = [];
  for await (const item of readStream(res.body!)) {
    if (!('event' in (item as StreamItem))) continue;
    const event = item as { event: string; data: string };
    events.push(JSON.parse(event.data));
    // Let the command end only once the stream is open: the first event says it still works.
    if (events.length === 1) await writeFile(path.join(srv.workspace, 'go'), '');
  }
  assert.equal(events[0]!.status, 'working');
  const last = events.at(-1)!;
  assert.equal(last.status, 'completed');
  assert.match(last.result!.content[0]!.text, /went/);
  const line = await srv.logLine((l) => l.msg === 'tool call' && l.tool === 'Bash' && l.outcome === 'ok');
  assert.deepEqual([line.key, line.transport], ['alice', 'rest'], 'the task is audited as a call of its key');
  assert.equal(((await (await fetch(`${srv.url}/tasks/${id}`, { headers: as(ALICE) })).json()) as { status: string }).status, 'completed');
});

test('DELETE /tasks/{id} kills the running command; SIGTERM ends a working task within the grace and nothing outlives the server', async (t) => {
  const srv = await server(t);
  const [cancelled, left] = [trackedMarker(t), trackedMarker(t)];
  const first = await startBash(srv, ALICE, `sleep ${cancelled}`);
  await waitFor(() => processesWith(cancelled).length > 0, 'the command to start', 10_000);
  const res = await fetch(`${srv.url}${first.location}`, { method: 'DELETE', headers: as(ALICE) });
  assert.equal(res.status, 200);
  assert.equal(((await res.json()) as { status: string }).status, 'cancelled');
  await waitFor(() => processesWith(cancelled).length === 0, 'the cancelled command to end', 10_000);
  await startBash(srv, MALLORY, `sleep ${left}`);
  await waitFor(() => processesWith(left).length > 0, 'the second command to start', 10_000);
  srv.child.kill('SIGTERM');
  assert.equal(await srv.exited, 0);
  await waitFor(() => processesWith(left).length === 0, 'no process of a task left after exit', 10_000);
});
