import assert from 'node:assert/strict';
import { existsSync, lutimesSync, mkdirSync, readdirSync, readFileSync, statSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import type { TaskBounds } from '#src/core/background.js';
import type { ToolDef, ToolResult } from '#src/core/types.js';
import { createBashTool } from '#src/tools/bash.js';
import { BackgroundTasks } from '#src/tools/tasks/background-tasks.js';
import { createTaskOutputTool } from '#src/tools/tasks/task-output.js';
import { createTaskStopTool } from '#src/tools/tasks/task-stop.js';
import { Workspace } from '#src/os/fs/workspace.js';
import { requireOrSkip } from '../../support/require.js';
import { freePort } from '../../support/ports.js';
import { processesWith, trackedMarker } from '../../support/processes.js';
import { toolContext } from '../../support/tool-context.js';
import { until } from '../../support/wait.js';
import { temporaryDirectory } from '../../support/workspace.js';

interface Tools {
  bash: ToolDef;
  output: ToolDef;
  stop: ToolDef;
  tasks: BackgroundTasks;
  ws: Workspace;
}

/** Bash as a server runs it here (the sandbox when one works, the default limits), with tasks under `bounds`. */
async function setup(t: { after(fn: () => Promise<void> | void): void }, bounds: Partial<TaskBounds> = {}, limits?: { maxProcesses: number }): Promise<Tools> {
  const dir = await temporaryDirectory(t, 'toolport-tasks-');
  const ws = await Workspace.open(dir);
  const tasks = new BackgroundTasks(bounds);
  const bash = await createBashTool({
    workspace: ws,
    sandbox: 'auto',
    network: true,
    tasks,
    ...(limits && { limits: { maxProcesses: limits.maxProcesses, tmpSize: 0, maxFileSize: 0, maxMemory: 0, maxAddressSpace: 0, maxCpuSeconds: 0 } }),
  });
  t.after(async () => {
    await tasks.close();
    await ws.close();
  });
  return { bash, output: createTaskOutputTool(tasks), stop: createTaskStopTool(tasks), tasks, ws };
}

async function call(tool: ToolDef, caller: string, input: Record<string, unknown>): Promise<{ text: string; isError: boolean }> {
  const result: ToolResult = await tool.execute(input, { ...toolContext(), caller });
  const block = result.content[0]!;
  assert.equal(block.type, 'text');
  return { text: block.type === 'text' ? block.text : '', isError: result.isError === true };
}

/** The other caller's foreground call, which must answer as always and soon while a hostile task runs. */
async function servedPromptly(tools: Tools, caller: string): Promise<void> {
  const started = performance.now();
  assert.deepEqual(await call(tools.bash, caller, { command: 'echo served' }), { text: 'served', isError: false });
  const ms = performance.now() - started;
  assert.ok(ms < 5_000, `the other caller's call took ${Math.round(ms)} ms`);
}

const STARTED = /^Command running in background with ID: (b[\w-]{12})\. Output is being written to: (\.toolport\/tasks\/b[\w-]{12}\.output)$/;

async function startTask(tools: Tools, caller: string, command: string): Promise<{ id: string; file: string }> {
  const answer = await call(tools.bash, caller, { command, run_in_background: true });
  assert.equal(answer.isError, false, answer.text);
  const match = STARTED.exec(answer.text);
  assert.ok(match, answer.text);
  return { id: match[1]!, file: match[2]! };
}

test('an agent starts a dev server in the background, polls its output until it listens, calls it with curl, stops it, and nothing is left', async (t) => {
  const tools = await setup(t);
  const marker = trackedMarker(t);
  const port = await freePort();
  writeFileSync(
    path.join(tools.ws.root, 'server.js'),
    `require('node:http').createServer((q, s) => s.end('hello from the dev server\\n')).listen(${port}, '127.0.0.1', () => console.log('listening on ${port}'));\n`,
  );
  const { id, file } = await startTask(tools, 'alice', `node server.js ${marker}`);
  await until(async () => (await call(tools.output, 'alice', { task_id: id, block: false })).text.includes(`listening on ${port}`), 'the server to listen');
  const polled = await call(tools.output, 'alice', { task_id: id, block: false });
  assert.equal(
    polled.text,
    `<retrieval_status>not_ready</retrieval_status>\n\n<task_id>${id}</task_id>\n\n<task_type>local_bash</task_type>\n\n<status>running</status>\n\n<output>\nlistening on ${port}\n</output>\n\n<output_file>${file}</output_file>`,
  );
  assert.equal(readFileSync(path.join(tools.ws.root, file), 'utf8'), `listening on ${port}\n`);
  const curl = await call(tools.bash, 'alice', { command: `curl -s http://127.0.0.1:${port}/` });
  assert.deepEqual(curl, { text: 'hello from the dev server', isError: false });
  const stopped = await call(tools.stop, 'alice', { task_id: id });
  assert.deepEqual(JSON.parse(stopped.text), { message: `Successfully stopped task: ${id} (node server.js ${marker})`, task_id: id, task_type: 'local_bash' });
  assert.deepEqual(processesWith(marker), []);
  const after = await call(tools.output, 'alice', { task_id: id, block: false });
  assert.match(after.text, /<retrieval_status>success<\/retrieval_status>\n\n.*<status>killed<\/status>/s);
  assert.match(after.text, /\[Task stopped by TaskStop\]/);
  assert.equal(tools.tasks.running, 0);
});

test("another key's task, and an id never given, are both 'not found': TaskOutput and TaskStop answer the same words", async (t) => {
  const tools = await setup(t);
  const marker = trackedMarker(t);
  const { id } = await startTask(tools, 'alice', `sleep ${marker}`);
  await until(() => processesWith(marker).length > 0, 'the task to start');
  for (const taskId of [id, 'bAAAAAAAAAAAA']) {
    assert.deepEqual(await call(tools.output, 'bob', { task_id: taskId, block: false }), { text: `No task found with ID: ${taskId}`, isError: true });
    assert.deepEqual(await call(tools.stop, 'bob', { task_id: taskId }), { text: `No task found with ID: ${taskId}`, isError: true });
  }
  // Bob's TaskStop left Alice's task running.
  assert.equal(processesWith(marker).length > 0, true);
  assert.match((await call(tools.output, 'alice', { task_id: id, block: false })).text, /<status>running<\/status>/);
});

test('TaskOutput waits for the task to finish and shows its exit code; with a short timeout it says timeout', async (t) => {
  const tools = await setup(t);
  const { id, file } = await startTask(tools, 'alice', 'echo out; echo err >&2; exit 3');
  const done = await call(tools.output, 'alice', { task_id: id });
  assert.deepEqual(done, {
    text: `<retrieval_status>success</retrieval_status>\n\n<task_id>${id}</task_id>\n\n<task_type>local_bash</task_type>\n\n<status>failed</status>\n\n<exit_code>3</exit_code>\n\n<output>\nout\nerr\n</output>\n\n<output_file>${file}</output_file>`,
    isError: false,
  });
  const marker = trackedMarker(t);
  const slow = await startTask(tools, 'alice', `sleep ${marker}`);
  const waited = await call(tools.output, 'alice', { task_id: slow.id, block: true, timeout: 50 });
  assert.match(waited.text, /^<retrieval_status>timeout<\/retrieval_status>\n\n.*<status>running<\/status>/s);
});

test('TaskStop refuses a task that has ended and a call without an id, in Claude Code words', async (t) => {
  const tools = await setup(t);
  const { id } = await startTask(tools, 'alice', 'true');
  await call(tools.output, 'alice', { task_id: id });
  assert.deepEqual(await call(tools.stop, 'alice', { task_id: id }), { text: `Task ${id} is not running (status: completed)`, isError: true });
  assert.deepEqual(await call(tools.stop, 'alice', {}), { text: 'Missing required parameter: task_id', isError: true });
  // The deprecated KillShell name for the id still works.
  const marker = trackedMarker(t);
  const other = await startTask(tools, 'alice', `sleep ${marker}`);
  assert.equal((await call(tools.stop, 'alice', { shell_id: other.id })).isError, false);
  assert.deepEqual(processesWith(marker), []);
});

test('a caller at its cap, and the server at its total, are refused while other callers start tasks and run calls', async (t) => {
  const tools = await setup(t, { maxPerCaller: 2, maxTotal: 3 });
  const marker = trackedMarker(t);
  await startTask(tools, 'mallory', `sleep ${marker}`);
  await startTask(tools, 'mallory', `sleep ${marker}`);
  assert.deepEqual(await call(tools.bash, 'mallory', { command: `sleep ${marker}`, run_in_background: true }), {
    text: 'Too many background tasks: 2 of yours are running, the most allowed at once. Stop one with TaskStop, or wait for one to finish.',
    isError: true,
  });
  await startTask(tools, 'alice', `sleep ${marker}`);
  assert.deepEqual(await call(tools.bash, 'bob', { command: `sleep ${marker}`, run_in_background: true }), {
    text: 'Too many background tasks: the server runs 3, the most it allows at once. Try again later.',
    isError: true,
  });
  // Calls are not tasks: a foreground call of another caller runs as always.
  await servedPromptly(tools, 'bob');
  assert.equal(tools.tasks.running, 3);
  await tools.tasks.stopAll();
  assert.deepEqual(processesWith(marker), []);
});

test("a task that prints without end fills its file to the cap, which then stops with a note, and other callers' calls go on", async (t) => {
  const maxOutputBytes = 64 * 1024;
  const tools = await setup(t, { maxOutputBytes });
  const { id, file } = await startTask(tools, 'mallory', 'yes flood');
  const note = `[Output stopped at ${maxOutputBytes} bytes, the most a task's file takes; the task goes on running and its further output is not kept]`;
  await until(async () => (await call(tools.output, 'mallory', { task_id: id, block: false })).text.includes(note), 'the output to stop');
  await servedPromptly(tools, 'alice');
  await call(tools.stop, 'mallory', { task_id: id });
  const written = readFileSync(path.join(tools.ws.root, file), 'utf8');
  assert.equal(written, `${'flood\n'.repeat(maxOutputBytes / 6 + 1).slice(0, maxOutputBytes)}\n${note}\n`);
  assert.equal(statSync(path.join(tools.ws.root, file)).size, maxOutputBytes + note.length + 2);
});

test('a task that ignores SIGTERM is killed by TaskStop after the grace, with every process it started', async (t) => {
  const tools = await setup(t);
  const marker = trackedMarker(t);
  const { id } = await startTask(tools, 'mallory', `trap '' TERM; sleep ${marker} & sleep ${marker}; wait`);
  await until(() => processesWith(marker).length >= 2, 'the sleeps to start');
  await servedPromptly(tools, 'alice');
  const stopped = await call(tools.stop, 'mallory', { task_id: id });
  assert.equal(stopped.isError, false);
  assert.deepEqual(processesWith(marker), []);
});

test('a task that forks without end is held to its process limit, and the other caller still runs calls', async (t) => {
  const tools = await setup(t, { maxLifetimeMs: 60_000 }, { maxProcesses: 32 });
  const marker = trackedMarker(t);
  const { id } = await startTask(tools, 'mallory', `while true; do sleep ${marker} & done`);
  await until(() => processesWith(marker).length >= 20, 'the fork loop to reach its limit');
  assert.ok(processesWith(marker).length <= 32, `${processesWith(marker).length} processes`);
  await servedPromptly(tools, 'alice');
  await call(tools.stop, 'mallory', { task_id: id });
  assert.deepEqual(processesWith(marker), []);
});

test('a task is stopped at its lifetime, and forgotten with its file once its retention has passed', async (t) => {
  const tools = await setup(t, { maxLifetimeMs: 300, retentionMs: 200 });
  const marker = trackedMarker(t);
  const { id, file } = await startTask(tools, 'alice', `sleep ${marker}`);
  const ended = await call(tools.output, 'alice', { task_id: id, timeout: 10_000 });
  assert.match(ended.text, /<status>killed<\/status>/);
  assert.match(ended.text, /\[Task stopped after running 300 ms, the longest a task may run\]/);
  assert.deepEqual(processesWith(marker), []);
  await until(async () => (await call(tools.output, 'alice', { task_id: id, block: false })).isError, 'the task to be forgotten');
  assert.deepEqual(await call(tools.output, 'alice', { task_id: id, block: false }), { text: `No task found with ID: ${id}`, isError: true });
  await until(() => !existsSync(path.join(tools.ws.root, file)), 'the file to be removed');
});

test("a task's CPU time is bounded by its lifetime, a call's by its timeout", async (t) => {
  const tools = await setup(t, { maxLifetimeMs: 7_200_000 });
  const { id } = await startTask(tools, 'alice', 'ulimit -t');
  assert.match((await call(tools.output, 'alice', { task_id: id })).text, /<output>\n7200\n<\/output>/);
  assert.deepEqual(await call(tools.bash, 'alice', { command: 'ulimit -t' }), { text: '120', isError: false });
});

/** The nice value the command's own process runs at. */
const NICE = "cut -d' ' -f19 /proc/self/stat";

/** Whether `task` is the nice value of a task started by a server whose calls run at `call`: 10 or more, and above the call's unless both are at the lowest priority. */
function yieldsTo(task: number, call: number): boolean {
  return task >= 10 && (task > call || task === 19);
}

test('a task runs at a lower priority than calls (nice 10), so that it yields the CPU to them', async (t) => {
  const tools = await setup(t);
  const called = Number((await call(tools.bash, 'alice', { command: NICE })).text);
  const { id } = await startTask(tools, 'alice', NICE);
  const output = /<output>\n(\d+)\n<\/output>/.exec((await call(tools.output, 'alice', { task_id: id })).text);
  assert.ok(output, 'the task printed its nice value');
  assert.ok(yieldsTo(Number(output[1]), called), `a task at nice ${output[1]}, a call at ${called}`);
});

test("a link planted where the tasks' directory goes is not followed: the task is refused and nothing is written outside", async (t) => {
  const tools = await setup(t);
  const outside = await temporaryDirectory(t, 'toolport-outside-');
  symlinkSync(outside, path.join(tools.ws.root, '.toolport'));
  const answer = await call(tools.bash, 'alice', { command: 'echo hi', run_in_background: true });
  assert.deepEqual(answer, {
    text: 'Could not make the output file of the task in .toolport/tasks (ENOTDIR): is something other than a directory there?',
    isError: true,
  });
  assert.deepEqual(readdirSync(outside), []);
});

test('a caller keeps at most 64 finished tasks: past that the oldest is forgotten with its file, before its retention is up', async (t) => {
  const tools = await setup(t);
  const ids: Array<{ id: string; file: string }> = [];
  for (let i = 0; i < 65; i++) {
    const task = await startTask(tools, 'alice', 'true');
    await call(tools.output, 'alice', { task_id: task.id });
    ids.push(task);
  }
  const [first, second] = ids;
  assert.deepEqual(await call(tools.output, 'alice', { task_id: first!.id, block: false }), { text: `No task found with ID: ${first!.id}`, isError: true });
  await until(() => !existsSync(path.join(tools.ws.root, first!.file)), 'the file to be removed');
  assert.match((await call(tools.output, 'alice', { task_id: second!.id, block: false })).text, /<status>completed<\/status>/);
});

test('under Landlock and seccomp a task runs confined as a call does, with its private TMPDIR, and ends with TaskStop', async (t) => {
  const ws = await Workspace.open(await temporaryDirectory(t, 'toolport-tasks-landlock-'));
  const tasks = new BackgroundTasks();
  t.after(async () => {
    await tasks.close();
    await ws.close();
  });
  let bash: ToolDef;
  try {
    bash = await createBashTool({ workspace: ws, sandbox: 'landlock', tasks });
  } catch (err) {
    requireOrSkip(t, 'Landlock', (err as Error).message);
    return;
  }
  const tools: Tools = { bash, output: createTaskOutputTool(tasks), stop: createTaskStopTool(tasks), tasks, ws };
  const marker = trackedMarker(t);
  const { id } = await startTask(
    tools,
    'alice',
    `echo "$TMPDIR" > tmpdir.txt; ${NICE} > nice.txt; touch /etc/toolport-escape 2>/dev/null || echo refused; sleep ${marker}`,
  );
  await until(async () => (await call(tools.output, 'alice', { task_id: id, block: false })).text.includes('refused'), 'the write outside to be refused');
  assert.notEqual(readFileSync(path.join(ws.root, 'tmpdir.txt'), 'utf8').trim(), '/tmp');
  const called = Number((await call(bash, 'alice', { command: NICE })).text);
  const niceness = Number(readFileSync(path.join(ws.root, 'nice.txt'), 'utf8'));
  assert.ok(yieldsTo(niceness, called), `a task at nice ${niceness}, a call at ${called}`);
  assert.equal((await call(tools.stop, 'alice', { task_id: id })).isError, false);
  assert.deepEqual(processesWith(marker), []);
});

test('with a cap of 0 background tasks are switched off, and Bash says so', async (t) => {
  for (const bounds of [{ maxPerCaller: 0 }, { maxTotal: 0 }]) {
    const tools = await setup(t, bounds);
    assert.deepEqual(await call(tools.bash, 'alice', { command: 'true', run_in_background: true }), {
      text: 'Background tasks are switched off on this server: run the command without run_in_background.',
      isError: true,
    });
  }
});

test('a Bash tool made without a place for tasks refuses run_in_background', async (t) => {
  const dir = await temporaryDirectory(t, 'toolport-tasks-');
  const ws = await Workspace.open(dir);
  t.after(() => ws.close());
  const bash = await createBashTool({ workspace: ws, sandbox: false });
  assert.deepEqual(await call(bash, 'alice', { command: 'true', run_in_background: true }), {
    text: 'Background tasks are not available on this server.',
    isError: true,
  });
});

test('draining refuses new tasks; stopping them all leaves no process', async (t) => {
  const tools = await setup(t);
  const marker = trackedMarker(t);
  await startTask(tools, 'alice', `sleep ${marker}`);
  tools.tasks.drain();
  assert.deepEqual(await call(tools.bash, 'bob', { command: 'true', run_in_background: true }), {
    text: 'Background tasks cannot be started: the server is shutting down.',
    isError: true,
  });
  assert.equal(await tools.tasks.drained(50), false);
  await tools.tasks.stopAll();
  assert.equal(await tools.tasks.drained(50), true);
  assert.deepEqual(processesWith(marker), []);
});

test("the first task in a workspace removes the output files a crashed server's tasks left, and nothing else", async (t) => {
  const tools = await setup(t, { maxLifetimeMs: 60_000, retentionMs: 60_000 });
  const dir = path.join(tools.ws.root, '.toolport/tasks');
  mkdirSync(dir, { recursive: true });
  const old = new Date(Date.now() - 3 * 60_000);
  const stale = 'bAAAAAAAAAAAA.output';
  const fresh = 'bBBBBBBBBBBBB.output';
  const notOurs = 'notes.output';
  const linked = 'bCCCCCCCCCCCC.output';
  for (const name of [stale, fresh, notOurs]) writeFileSync(path.join(dir, name), 'left\n');
  writeFileSync(path.join(tools.ws.root, 'kept.txt'), 'kept\n');
  symlinkSync('../../kept.txt', path.join(dir, linked));
  for (const name of [stale, notOurs]) utimesSync(path.join(dir, name), old, old);
  lutimesSync(path.join(dir, linked), old, old);

  const { id, file } = await startTask(tools, 'alice', 'echo started');
  assert.deepEqual(readdirSync(dir).sort(), [fresh, linked, notOurs, path.basename(file)].sort());
  assert.equal(readFileSync(path.join(tools.ws.root, 'kept.txt'), 'utf8'), 'kept\n');
  // Once per workspace: a file gone stale since is left for the next server.
  utimesSync(path.join(dir, fresh), old, old);
  await call(tools.output, 'alice', { task_id: id, block: true });
  await startTask(tools, 'alice', 'echo again');
  assert.ok(existsSync(path.join(dir, fresh)));
});
