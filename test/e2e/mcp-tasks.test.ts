import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { freePort } from '../support/ports.js';
import { processesWith, trackedMarker, waitFor } from '../support/processes.js';
import { kill, startServer, type ServerProcess } from '../support/server-process.js';
import { until } from '../support/wait.js';
import { Cleanups, temporaryDirectory } from '../support/workspace.js';

// One real server for the file, and the TypeScript SDK's real client (v1, 2025-11-25) with its
// experimental tasks API: task-augmented tools/call, tasks/get, tasks/result, tasks/list, tasks/cancel.
const ALICE_KEY = 'mcp-tasks-alice-secret-0123456789';
const MALLORY_KEY = 'mcp-tasks-mallory-secret-0123456789';
let server: ServerProcess;
const cleanups = new Cleanups();

before(async () => {
  const keysDir = await temporaryDirectory(cleanups, 'toolport-mcp-tasks-keys-');
  const keysFile = path.join(keysDir, 'keys.json');
  await writeFile(
    keysFile,
    JSON.stringify([
      { label: 'alice', key: ALICE_KEY },
      { label: 'mallory', key: MALLORY_KEY },
    ]),
  );
  server = await startServer({
    TOOLPORT_API_KEYS_FILE: keysFile,
    TOOLPORT_BASH_SANDBOX: 'false',
    TOOLPORT_SHUTDOWN_GRACE_MS: '100',
    TOOLPORT_TASKS_PER_CALLER: '2',
    // The SDK waits pollInterval between two tasks/get: short, so the test runs quickly.
    TOOLPORT_TASK_POLL_INTERVAL_MS: '50',
  });
});
after(async () => {
  kill(server);
  await server.exited;
  await cleanups.run();
});

async function connect(key: string): Promise<Client> {
  const client = new Client({ name: 'toolport-tasks-e2e', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL('/mcp', server.url), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
  return client;
}

/** Starts a call as a task through the SDK's stream, and returns its id once created (the stream goes on in `rest`). */
async function startTask(client: Client, command: string): Promise<{ taskId: string; rest: Promise<Array<{ type: string }>> }> {
  const stream = client.experimental.tasks.callToolStream({ name: 'Bash', arguments: { command } }, undefined, { task: { ttl: 60_000 } });
  const first = await stream.next();
  assert.equal(first.value?.type, 'taskCreated');
  const taskId = (first.value as { task: { taskId: string } }).task.taskId;
  const rest = (async () => {
    const seen: Array<{ type: string }> = [];
    for await (const message of stream) seen.push(message);
    return seen;
  })();
  return { taskId, rest };
}

describe('MCP tasks with the SDK client (2025-11-25)', () => {
  test('the server declares tasks and every tool says taskSupport optional', async (t) => {
    const client = await connect(ALICE_KEY);
    t.after(() => client.close());
    assert.deepEqual(client.getServerCapabilities()?.tasks, { list: {}, cancel: {}, requests: { tools: { call: {} } } });
    const { tools } = await client.listTools();
    const bash = tools.find((tool) => tool.name === 'Bash');
    assert.deepEqual(bash?.execution, { taskSupport: 'optional' });
  });

  test('callToolStream runs Bash as a task: taskCreated, status polls, then the result', async (t) => {
    const client = await connect(ALICE_KEY);
    t.after(() => client.close());
    const messages = [];
    for await (const message of client.experimental.tasks.callToolStream({ name: 'Bash', arguments: { command: 'echo from-a-task' } }, undefined, {
      task: {},
    })) {
      messages.push(message);
    }
    assert.equal(messages[0]?.type, 'taskCreated');
    const last = messages.at(-1) as { type: string; result: { content: Array<{ type: string; text: string }>; isError?: boolean } };
    assert.equal(last.type, 'result');
    assert.match(last.result.content[0]!.text, /from-a-task/);
    const taskId = (messages[0] as { task: { taskId: string } }).task.taskId;
    assert.equal((await client.experimental.tasks.getTask(taskId)).status, 'completed');
    const listed = await client.experimental.tasks.listTasks();
    assert.ok(listed.tasks.some((task) => task.taskId === taskId));
  });

  test('an agent runs a dev server as a task, reads its log until it listens, curls it from a foreground Bash, cancels the task, and no process is left', async (t) => {
    const client = await connect(ALICE_KEY);
    t.after(() => client.close());
    const marker = trackedMarker(t);
    const port = await freePort();
    const script = `require('node:http').createServer((q, s) => s.end('hello from the dev server\\n')).listen(${port}, '127.0.0.1', () => console.log('listening on ${port}'));\n`;
    assert.equal((await client.callTool({ name: 'Write', arguments: { file_path: 'dev-server.js', content: script } })).isError, false);
    const { taskId, rest } = await startTask(client, `node dev-server.js ${marker} > dev-server.log 2>&1`);
    const text = (result: Awaited<ReturnType<Client['callTool']>>): string => (result.content as Array<{ type: string; text?: string }>)[0]?.text ?? '';
    await until(
      async () => text(await client.callTool({ name: 'Read', arguments: { file_path: 'dev-server.log' } })).includes(`listening on ${port}`),
      'the dev server to listen',
      30_000,
    );
    assert.equal((await client.experimental.tasks.getTask(taskId)).status, 'working');
    const curled = await client.callTool({ name: 'Bash', arguments: { command: `curl -s http://127.0.0.1:${port}/` } });
    assert.deepEqual(curled.content, [{ type: 'text', text: 'hello from the dev server' }]);
    assert.equal(curled.isError, false);
    assert.equal((await client.experimental.tasks.cancelTask(taskId)).status, 'cancelled');
    await waitFor(() => processesWith(marker).length === 0, 'the dev server to end', 30_000);
    assert.equal((await rest).at(-1)?.type, 'error', 'the SDK reports a cancelled task as an error');
  });

  test('cancelTask stops the running command: the task is cancelled and its process is gone', async (t) => {
    const client = await connect(ALICE_KEY);
    t.after(() => client.close());
    const marker = trackedMarker(t);
    const { taskId, rest } = await startTask(client, `sleep ${marker}`);
    await waitFor(() => processesWith(marker).length > 0, 'the command to start', 30_000);
    const cancelled = await client.experimental.tasks.cancelTask(taskId);
    assert.equal(cancelled.status, 'cancelled');
    await waitFor(() => processesWith(marker).length === 0, 'the command to end', 30_000);
    const seen = await rest;
    assert.equal(seen.at(-1)?.type, 'error', 'the SDK reports a cancelled task as an error');
    assert.equal((await client.experimental.tasks.getTask(taskId)).status, 'cancelled');
  });

  test('another key using a stolen task id gets exactly the error of a random id; it sees none of them', async (t) => {
    const alice = await connect(ALICE_KEY);
    const mallory = await connect(MALLORY_KEY);
    t.after(() => Promise.all([alice.close(), mallory.close()]));
    const marker = trackedMarker(t);
    const { taskId, rest } = await startTask(alice, `sleep ${marker}`);
    const errorOf = async (call: Promise<unknown>): Promise<{ code: number; message: string; data: unknown }> => {
      try {
        await call;
      } catch (err) {
        assert.ok(err instanceof McpError, String(err));
        return { code: err.code, message: err.message, data: err.data };
      }
      assert.fail('expected an error');
    };
    const stolen = await errorOf(mallory.experimental.tasks.getTask(taskId));
    const random = await errorOf(mallory.experimental.tasks.getTask('task_AAAAAAAAAAAAAAAAAAAAAA'));
    assert.deepEqual(stolen, random);
    assert.equal(stolen.code, -32602);
    assert.deepEqual(await errorOf(mallory.experimental.tasks.cancelTask(taskId)), random);
    assert.deepEqual((await mallory.experimental.tasks.listTasks()).tasks, []);
    assert.equal((await alice.experimental.tasks.getTask(taskId)).status, 'working', "the owner's task runs on");
    await alice.experimental.tasks.cancelTask(taskId);
    await rest;
  });

  test('a key at its cap is refused TOO_MANY_TASKS while another key still runs tasks and calls, and REST sees the same tasks', async (t) => {
    const alice = await connect(ALICE_KEY);
    const mallory = await connect(MALLORY_KEY);
    t.after(() => Promise.all([alice.close(), mallory.close()]));
    const marker = trackedMarker(t);
    const first = await startTask(alice, `sleep ${marker}`);
    const second = await startTask(alice, `sleep ${marker}`);
    const third = await alice.experimental.tasks.callToolStream({ name: 'Bash', arguments: { command: 'echo no' } }, undefined, { task: {} }).next();
    assert.equal(third.value?.type, 'error');
    const refusal = (third.value as { error: McpError }).error;
    assert.equal(refusal.code, -31011);
    assert.deepEqual(refusal.data, { code: 'TOO_MANY_TASKS', details: { limit: 2 } });
    // Another key is not held up: a task of its own, and a plain call, both answer.
    const other: Array<{ type: string }> = [];
    for await (const message of mallory.experimental.tasks.callToolStream({ name: 'Bash', arguments: { command: 'echo other' } }, undefined, { task: {} }))
      other.push(message);
    assert.equal(other.at(-1)?.type, 'result');
    const plain = await mallory.callTool({ name: 'Bash', arguments: { command: 'echo plain' } });
    assert.equal(plain.isError, false);
    // The store is the REST one too: the same key finds its MCP task at /tasks/{id}.
    const rest = await fetch(new URL(`/tasks/${first.taskId}`, server.url), { headers: { authorization: `Bearer ${ALICE_KEY}` } });
    assert.equal(rest.status, 200);
    assert.equal(((await rest.json()) as { status: string }).status, 'working');
    const stolen = await fetch(new URL(`/tasks/${first.taskId}`, server.url), { headers: { authorization: `Bearer ${MALLORY_KEY}` } });
    assert.equal(stolen.status, 404);
    for (const { taskId } of [first, second]) await alice.experimental.tasks.cancelTask(taskId);
    await Promise.all([first.rest, second.rest]);
  });
});
