import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { after, describe, test } from 'node:test';
import { CLIENT_KINDS, stdioClient } from '../support/mcp-clients.js';
import { toolCases } from '../support/mcp-tool-cases.js';
import { killAll, processesWith, uniqueMarker, waitFor } from '../support/processes.js';
import { temporaryDirectory } from '../support/workspace.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const workspace = await temporaryDirectory({ after }, 'toolport-mcp-stdio-');

const env = () => ({ TOOLPORT_WORKSPACE: workspace, TOOLPORT_BASH_SANDBOX: 'false' });

for (const kind of CLIENT_KINDS) {
  describe(`MCP over stdio, ${kind}`, () => {
    toolCases(`${kind} over stdio`, { connect: () => stdioClient(kind, env()), workspace: () => workspace, cancel: 'signal' });
  });
}

/** `toolport mcp` as a bare process: the test writes its stdin and reads its stdout line by line. */
function launch() {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli.ts', 'mcp'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, LOG_LEVEL: 'info', ...env() },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const out: string[] = [];
  let stderr = '';
  createInterface({ input: child.stdout! }).on('line', (line) => out.push(line));
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const send = (message: unknown): void => void child.stdin!.write(`${JSON.stringify(message)}\n`);
  return { child, out, stderr: () => stderr, exited, send };
}

test('toolport mcp writes only JSON-RPC to stdout, logs to stderr, and exits 0 when stdin closes', async () => {
  const run = launch();
  run.send({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'Echo', arguments: { text: 'hi' } } });
  run.child.stdin!.end();
  assert.equal(await run.exited, 0);
  assert.deepEqual(
    run.out.map((line) => JSON.parse(line) as unknown),
    [{ jsonrpc: '2.0', id: 1, result: { content: [{ type: 'text', text: 'hi' }], isError: false } }],
  );
  const logs = run
    .stderr()
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as Record<string, unknown>);
  const audit = logs.find((line) => line.msg === 'tool call');
  assert.deepEqual([audit?.tool, audit?.transport, audit?.outcome], ['Echo', 'stdio', 'ok']);
});

test('SIGTERM aborts a running Bash call (its process dies) and toolport mcp exits 0', async (t) => {
  const marker = uniqueMarker();
  t.after(() => killAll(processesWith(marker)));
  const run = launch();
  t.after(() => run.child.kill('SIGKILL'));
  run.send({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'Bash', arguments: { command: `sleep ${marker}` } } });
  await waitFor(() => processesWith(marker).length > 0, 'the command to start', 30_000);
  run.child.kill('SIGTERM');
  assert.equal(await run.exited, 0);
  await waitFor(() => processesWith(marker).length === 0, 'the command to be killed', 15_000);
  const answer = JSON.parse(run.out.at(-1)!) as { id: number; result: { isError: boolean; content: Array<{ text: string }> } };
  assert.equal(answer.id, 7);
  assert.equal(answer.result.isError, true);
  assert.match(answer.result.content[0]!.text, /abort/i);
});
