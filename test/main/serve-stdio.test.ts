import assert from 'node:assert/strict';
import path from 'node:path';
import { PassThrough, Writable } from 'node:stream';
import { test } from 'node:test';
import { serveMcpStdio } from '#src/main/serve-stdio.js';
import { temporaryDirectory } from '../support/workspace.js';

const FLOOD_PLUGIN = path.resolve(import.meta.dirname, '../fixtures/progress-plugin.ts');

async function workspace(t: { after: (fn: () => Promise<void>) => void }): Promise<string> {
  return temporaryDirectory(t, 'toolport-stdio-');
}

/** Runs `toolport mcp` in-process over these input lines; resolves to the exit code and the output lines. */
async function run(env: Record<string, string>, lines: unknown[]): Promise<{ code: number; out: Record<string, unknown>[] }> {
  const input = new PassThrough();
  const output = new PassThrough();
  let text = '';
  output.on('data', (chunk: Buffer) => (text += chunk.toString()));
  const done = serveMcpStdio({ LOG_LEVEL: 'silent', TOOLPORT_BASH_SANDBOX: 'false', ...env }, input, output);
  input.end(lines.map((line) => `${JSON.stringify(line)}\n`).join(''));
  const code = await done;
  return {
    code,
    out: text
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as Record<string, unknown>),
  };
}

test('toolport mcp answers each line through the gateway and exits 0 when the input ends', async (t) => {
  const ws = await workspace(t);
  const { code, out } = await run({ TOOLPORT_WORKSPACE: ws, TOOLPORT_TOOLS: 'Echo,Read' }, [
    { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } } },
    { jsonrpc: '2.0', method: 'notifications/initialized' },
    { jsonrpc: '2.0', id: 2, method: 'tools/list' },
    { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'Echo', arguments: { text: 'hi' } } },
  ]);
  assert.equal(code, 0);
  assert.equal(out.length, 3, 'one line per request, none for the notification');
  assert.equal((out[0]!.result as { protocolVersion: string }).protocolVersion, '2025-06-18');
  assert.deepEqual(
    (out[1]!.result as { tools: Array<{ name: string }> }).tools.map((tool) => tool.name),
    ['Echo', 'Read'],
  );
  assert.deepEqual(out[2], { jsonrpc: '2.0', id: 3, result: { content: [{ type: 'text', text: 'hi' }], isError: false } });
});

test('toolport mcp with a bad configuration resolves to 1 and writes nothing to the protocol stream', async () => {
  const { code, out } = await run({ TOOLPORT_TOOL_TIMEOUT_MS: 'soon' }, []);
  assert.equal(code, 1);
  assert.deepEqual(out, []);
});

test('after SIGTERM, output the reader does not take within the shutdown grace is given up: exit(1) ends the process', async (t) => {
  const ws = await workspace(t);
  const input = new PassThrough();
  // A reader that never reads: every write stays pending, as on a pipe no one reads.
  let wrote!: () => void;
  const written = new Promise<void>((resolve) => (wrote = resolve));
  const output = new Writable({
    write(_chunk, _encoding, _callback) {
      wrote();
    },
  });
  const exits: number[] = [];
  const done = serveMcpStdio(
    { LOG_LEVEL: 'silent', TOOLPORT_BASH_SANDBOX: 'false', TOOLPORT_WORKSPACE: ws, TOOLPORT_PLUGINS: FLOOD_PLUGIN, TOOLPORT_SHUTDOWN_GRACE_MS: '50' },
    input,
    output,
    (code) => void exits.push(code),
  );
  input.write(
    `${JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'Flood', arguments: { ms: 600_000 }, _meta: { progressToken: 'p' } } })}\n`,
  );
  await written;
  process.emit('SIGTERM');
  assert.equal(await done, 1);
  assert.deepEqual(exits, [1]);
  assert.ok(output.writableLength > 0, 'the answer was still waiting for the reader');
});

test("after SIGTERM, a reader that takes the output gets the aborted call's answer, and the exit code is 0", async (t) => {
  const ws = await workspace(t);
  const input = new PassThrough();
  const output = new PassThrough();
  let text = '';
  let wrote!: () => void;
  const written = new Promise<void>((resolve) => (wrote = resolve));
  output.on('data', (chunk: Buffer) => {
    text += chunk.toString();
    wrote();
  });
  const exits: number[] = [];
  const done = serveMcpStdio(
    { LOG_LEVEL: 'silent', TOOLPORT_BASH_SANDBOX: 'false', TOOLPORT_WORKSPACE: ws, TOOLPORT_PLUGINS: FLOOD_PLUGIN, TOOLPORT_SHUTDOWN_GRACE_MS: '60000' },
    input,
    output,
    (code) => void exits.push(code),
  );
  input.write(
    `${JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'Flood', arguments: { ms: 600_000 }, _meta: { progressToken: 'p' } } })}\n`,
  );
  await written;
  process.emit('SIGTERM');
  assert.equal(await done, 0);
  assert.deepEqual(exits, []);
  const last = JSON.parse(text.trim().split('\n').at(-1)!) as { id: number; result: { isError: boolean } };
  assert.deepEqual([last.id, last.result.isError], [1, true]);
});
