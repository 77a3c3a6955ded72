import assert from 'node:assert/strict';
import { readFileSync, statSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { test, type TestContext } from 'node:test';
import { sandboxUnavailableReason } from '#src/os/sandbox/bubblewrap.js';
import { freePort } from '../support/ports.js';
import { processesIn, processesWith, trackedMarker, waitFor } from '../support/processes.js';
import { requireOrSkip } from '../support/require.js';
import { kill, startServer, type ServerProcess } from '../support/server-process.js';
import { until } from '../support/wait.js';
import { temporaryDirectory } from '../support/workspace.js';

// Real processes end to end: the server (`src/server.ts`), its sandboxed commands, and callers
// over REST. What is asserted is what callers get back and which processes are left, never how
// long anything took (scripts/hostile-latency.ts measures that).

const ALICE = { label: 'alice', key: 'alice-secret-0123456789abcdef' };
const MALLORY = { label: 'mallory', key: 'mallory-secret-0123456789abcdef' };
type Caller = typeof ALICE;

async function server(t: TestContext, env: Record<string, string>): Promise<ServerProcess> {
  const dir = await temporaryDirectory(t, 'toolport-callers-e2e-');
  const keys = path.join(dir, 'keys.json');
  await writeFile(keys, JSON.stringify([ALICE, MALLORY]));
  const srv = await startServer({ TOOLPORT_API_KEYS_FILE: keys, ...env });
  t.after(() => kill(srv));
  return srv;
}

interface Answer {
  status: number;
  text: string;
  isError: boolean | undefined;
}

async function call(srv: ServerProcess, who: Caller, tool: string, input: Record<string, unknown>): Promise<Answer> {
  const res = await fetch(`${srv.url}/tools/${tool}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${who.key}`, 'content-type': 'application/json' },
    body: JSON.stringify(input),
  });
  const body = (await res.json()) as { content?: Array<{ text?: string }>; isError?: boolean };
  return { status: res.status, text: (body.content ?? []).map((c) => c.text ?? '').join('\n'), isError: body.isError };
}

const STARTED = /^Command running in background with ID: (b[\w-]{12})\. Output is being written to: (\.toolport\/tasks\/b[\w-]{12}\.output)$/;

async function startTask(srv: ServerProcess, who: Caller, command: string): Promise<{ id: string; file: string }> {
  const answer = await call(srv, who, 'Bash', { command, run_in_background: true });
  assert.equal(answer.status, 200, answer.text);
  const match = STARTED.exec(answer.text);
  assert.ok(match && answer.isError === false, answer.text);
  return { id: match[1]!, file: match[2]! };
}

test('an agent starts `node server.js` in the background, polls its output until it listens, curls it from a foreground Bash, stops it, and no process is left', async (t) => {
  // The default sandbox (`auto`); the foreground curl reaches the task's port only with the network on.
  const srv = await server(t, { TOOLPORT_BASH_NETWORK: 'all', TOOLPORT_SHUTDOWN_GRACE_MS: '100' });
  const marker = trackedMarker(t);
  const port = await freePort();
  const script = `require('node:http').createServer((q, s) => s.end('hello from the dev server\\n')).listen(${port}, '127.0.0.1', () => console.log('listening on ${port}'));\n`;
  assert.equal((await call(srv, ALICE, 'Write', { file_path: 'server.js', content: script })).isError, false);
  const { id, file } = await startTask(srv, ALICE, `node server.js ${marker}`);
  await until(
    async () => (await call(srv, ALICE, 'TaskOutput', { task_id: id, block: false })).text.includes(`listening on ${port}`),
    'the server to listen',
    30_000,
  );
  assert.equal(readFileSync(path.join(srv.workspace, file), 'utf8'), `listening on ${port}\n`);
  assert.deepEqual(await call(srv, ALICE, 'Bash', { command: `curl -s http://127.0.0.1:${port}/` }), {
    status: 200,
    text: 'hello from the dev server',
    isError: false,
  });
  const stopped = await call(srv, ALICE, 'TaskStop', { task_id: id });
  assert.deepEqual(JSON.parse(stopped.text), { message: `Successfully stopped task: ${id} (node server.js ${marker})`, task_id: id, task_type: 'local_bash' });
  assert.deepEqual(processesWith(marker), []);
  const after = await call(srv, ALICE, 'TaskOutput', { task_id: id, block: false });
  assert.match(after.text, /<status>killed<\/status>/);
  srv.child.kill('SIGTERM');
  assert.equal(await srv.exited, 0);
  // The sandbox's spare shells see the server gone and end by themselves, a moment later.
  await waitFor(() => processesIn(srv.workspace).length === 0, 'nothing left in the workspace after exit', 10_000);
});

const CAP = 4;
const MAX_OUTPUT = 1024 ** 2;
const MAX_PROCESSES = 32;
const GIB = 1024 ** 3;

test('a hostile key at its cap, printing 1 GiB, forking without end and ignoring SIGTERM, leaves a well-behaved key its tasks and calls; TaskStop and shutdown leave no process', async (t) => {
  const dir = await temporaryDirectory(t, 'toolport-callers-probe-');
  // In bubblewrap the process bound counts the command's own processes (its user namespace), not the user's.
  if (!requireOrSkip(t, 'bubblewrap', await sandboxUnavailableReason(dir))) return;
  const srv = await server(t, {
    TOOLPORT_BASH_SANDBOX: 'bubblewrap',
    TOOLPORT_BASH_TASKS_PER_CALLER: String(CAP),
    TOOLPORT_BASH_TASK_MAX_OUTPUT: String(MAX_OUTPUT),
    TOOLPORT_BASH_MAX_PROCESSES: String(MAX_PROCESSES),
    TOOLPORT_SHUTDOWN_GRACE_MS: '500',
    // Alice calls as fast as she can; the rate limit is not what is tested here.
    TOOLPORT_RATE_LIMIT: '0',
  });
  const [forks, stubborn, lastStubborn, sleepers, alicesServer] = [trackedMarker(t), trackedMarker(t), trackedMarker(t), trackedMarker(t), trackedMarker(t)];

  // Alice's long task, started before the attack and polled after it.
  const dev = await startTask(srv, ALICE, `echo up; sleep ${alicesServer}`);
  let attacking = true;
  const wrong: string[] = [];
  const wellBehaved = (async () => {
    for (let i = 0; attacking || i < 3; i++) {
      const task = await startTask(srv, ALICE, `echo alice-${i}`);
      const output = await call(srv, ALICE, 'TaskOutput', { task_id: task.id, timeout: 60_000 });
      if (
        output.status !== 200 ||
        !/<status>completed<\/status>\n\n<exit_code>0<\/exit_code>\n\n<output>\nalice-\d+\n<\/output>/.test(output.text) ||
        !output.text.includes(`alice-${i}`)
      )
        wrong.push(`TaskOutput ${i}: ${output.status} ${output.text}`);
      const foreground = await call(srv, ALICE, 'Bash', { command: `echo fg-${i}` });
      if (JSON.stringify(foreground) !== JSON.stringify({ status: 200, text: `fg-${i}`, isError: false }))
        wrong.push(`Bash ${i}: ${JSON.stringify(foreground)}`);
      const echo = await call(srv, ALICE, 'Echo', { text: `echo-${i}` });
      if (JSON.stringify(echo) !== JSON.stringify({ status: 200, text: `echo-${i}`, isError: false })) wrong.push(`Echo ${i}: ${JSON.stringify(echo)}`);
    }
  })();

  try {
    // 1 GiB of output: the file stops at the cap with a note; the rest is read and dropped.
    const flood = await startTask(srv, MALLORY, `yes flood | head -c ${GIB}`);
    // A fork loop: held to the process bound.
    await startTask(srv, MALLORY, `while true; do sleep ${forks} & done`);
    await waitFor(() => processesWith(forks).length >= MAX_PROCESSES / 2, 'the fork loop to run into its bound', 30_000);
    // Deaf to SIGTERM: TaskStop ends it with SIGKILL after the grace, every process of it.
    const deaf = await startTask(srv, MALLORY, `trap '' TERM; sleep ${stubborn} & sleep ${stubborn}; wait`);
    await waitFor(() => processesWith(stubborn).length >= 2, 'the deaf task to start', 30_000);
    const stopped = await call(srv, MALLORY, 'TaskStop', { task_id: deaf.id });
    assert.equal(stopped.status, 200);
    assert.equal(JSON.parse(stopped.text).message, `Successfully stopped task: ${deaf.id} (trap '' TERM; sleep ${stubborn} & sleep ${stubborn}; wait)`);
    assert.deepEqual(processesWith(stubborn), []);
    // Another deaf one, left for shutdown, then tasks until the cap refuses one.
    await startTask(srv, MALLORY, `trap '' TERM; sleep ${lastStubborn} & sleep ${lastStubborn}; wait`);
    let refused: Answer | undefined;
    for (let i = 0; i <= CAP && refused === undefined; i++) {
      const answer = await call(srv, MALLORY, 'Bash', { command: `sleep ${sleepers}`, run_in_background: true });
      if (answer.isError) refused = answer;
    }
    assert.deepEqual(refused, {
      status: 200,
      text: `Too many background tasks: ${CAP} of yours are running, the most allowed at once. Stop one with TaskStop, or wait for one to finish.`,
      isError: true,
    });
    // The bound held throughout: never more processes than it allows.
    for (let i = 0; i < 10; i++) assert.ok(processesWith(forks).length <= MAX_PROCESSES, `${processesWith(forks).length} processes of the fork loop`);

    const flooded = await call(srv, MALLORY, 'TaskOutput', { task_id: flood.id, timeout: 600_000 });
    const note = `[Output stopped at ${MAX_OUTPUT} bytes, the most a task's file takes; the task goes on running and its further output is not kept]`;
    assert.match(flooded.text, /<retrieval_status>success<\/retrieval_status>.*<status>completed<\/status>\n\n<exit_code>0<\/exit_code>/s);
    assert.ok(flooded.text.includes(note), flooded.text.slice(-400));
    assert.equal(statSync(path.join(srv.workspace, flood.file)).size, MAX_OUTPUT + note.length + 2);
  } finally {
    attacking = false;
    await wellBehaved;
  }
  assert.deepEqual(wrong, []);
  const polled = await call(srv, ALICE, 'TaskOutput', { task_id: dev.id, block: false });
  assert.match(polled.text, /<status>running<\/status>\n\n<output>\nup\n<\/output>/);
  assert.equal((await call(srv, ALICE, 'TaskStop', { task_id: dev.id })).status, 200);
  assert.deepEqual(processesWith(alicesServer), []);

  // Shutdown with the fork loop, a deaf task and sleepers still running: exit 0, nothing left.
  srv.child.kill('SIGTERM');
  assert.equal(await srv.exited, 0);
  await waitFor(() => [forks, lastStubborn, sleepers].every((m) => processesWith(m).length === 0), 'no process of a task left after exit', 10_000);
  await waitFor(() => processesIn(srv.workspace).length === 0, 'nothing left in the workspace after exit', 10_000);
});
