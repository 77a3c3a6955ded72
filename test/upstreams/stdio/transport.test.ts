import assert from 'node:assert/strict';
import path from 'node:path';
import { describe, it } from 'node:test';
import type { JSONRPCMessage } from '@modelcontextprotocol/client';
import { redactor } from '#src/upstreams/redact.js';
import { MAX_UNSENT_BYTES, StdioProcessTransport } from '#src/upstreams/stdio/transport.js';
import { capturedLog } from '../../support/log-capture.js';
import { isAlive, processesWith, trackedMarker, waitFor } from '../../support/processes.js';
import { until } from '../../support/wait.js';
import type { Cleanup } from '../../support/workspace.js';

const HOSTILE = path.resolve(import.meta.dirname, '../../fixtures/upstreams/hostile-server.mjs');
const INITIALIZED: JSONRPCMessage = { jsonrpc: '2.0', method: 'notifications/initialized' };

/** A started transport for `command args`, closed when the test ends; `closed` counts its onclose calls, `messages` what it read. */
async function started(t: Cleanup, command: string, args: string[], secrets: string[] = []) {
  const log = capturedLog();
  const transport = new StdioProcessTransport({
    command,
    args,
    env: { PATH: process.env.PATH ?? '' },
    cwd: undefined,
    log: log.logger,
    redact: redactor(secrets),
  });
  const seen = { closed: 0, messages: [] as JSONRPCMessage[] };
  transport.onclose = () => seen.closed++;
  transport.onmessage = (message) => seen.messages.push(message);
  await transport.start();
  t.after(() => transport.close());
  return { transport, log, seen };
}

describe('StdioProcessTransport', () => {
  it('reads messages however the output is cut into chunks, many in one chunk or one over many', async (t) => {
    // 2,000 messages written in pieces of 7 bytes, then a 512 KiB one (within a notification's bound) in a single write.
    const script = `
      const lines = Array.from({ length: 2000 }, (_, i) => JSON.stringify({ jsonrpc: '2.0', method: 'n', params: { i } }) + '\\n').join('');
      (async () => {
        for (let i = 0; i < lines.length; i += 7) await new Promise((r) => process.stdout.write(lines.slice(i, i + 7), r));
        process.stdout.write(JSON.stringify({ jsonrpc: '2.0', method: 'big', params: { text: 'x'.repeat(1 << 19) } }) + '\\r\\n');
        process.stdin.resume();
      })();`;
    const { seen } = await started(t, process.execPath, ['-e', script]);
    await until(() => seen.messages.length === 2001, 'every message');
    assert.deepEqual(
      seen.messages.slice(0, 2000).map((m) => (m as unknown as { params: { i: number } }).params.i),
      Array.from({ length: 2000 }, (_, i) => i),
    );
    assert.equal((seen.messages[2000] as unknown as { params: { text: string } }).params.text.length, 1 << 19);
  });

  it('ends a process that writes a line without end once it passes what a message may take while nothing is awaited, saying so', async (t) => {
    const { transport, seen } = await started(t, process.execPath, [HOSTILE, 'noline']);
    const pid = transport.pid!;
    await transport.send(INITIALIZED);
    await until(() => seen.closed === 1, 'the transport to close');
    assert.equal(transport.exit, 'sent more than 1 MiB without a line break');
    assert.ok(transport.answers.counters.peakHeldBytes <= 1024 * 1024, 'no more than a notification was kept');
    await waitFor(() => !isAlive(pid), 'the process to end');
  });

  it('ends a process that does not read its input once 8 MiB wait for it; no send waits for it to read', { timeout: 10_000 }, async (t) => {
    const { transport, seen } = await started(t, process.execPath, ['-e', 'process.stdin.pause(); setInterval(() => {}, 1000)']);
    const message: JSONRPCMessage = { jsonrpc: '2.0', method: 'n', params: { text: 'x'.repeat(64 * 1024) } };
    // Every send resolves at once until the bound; none waits for 'drain'.
    const sends = Array.from({ length: (MAX_UNSENT_BYTES / (64 * 1024)) * 2 }, () =>
      transport.send(message).then(
        () => 'sent',
        (err: Error) => err.message,
      ),
    );
    const outcomes = await Promise.all(sends);
    assert.ok(outcomes.filter((o) => o === 'sent').length >= MAX_UNSENT_BYTES / (64 * 1024), 'sends up to the bound succeed');
    assert.equal(outcomes.at(-1), 'the upstream process is not running');
    assert.ok(outcomes.includes('the upstream process did not read its input (more than 8 MiB waited for it)'));
    assert.equal(transport.exit, 'did not read its input (more than 8 MiB waited for it)');
    assert.equal(seen.closed, 1);
  });

  it('ends when the leader exits though a helper holds its output open, and kills what it left in its group', async (t) => {
    const marker = trackedMarker(t);
    const { transport, seen } = await started(t, process.execPath, [HOSTILE, 'holdpipe', marker]);
    await transport.send(INITIALIZED);
    await until(() => seen.closed === 1, 'the transport to close');
    assert.equal(transport.exit, 'exited with status 5');
    await waitFor(() => processesWith(marker).length === 0, 'the helpers to be killed');
  });

  it('logs a long stderr line once, redacted before it is cut, so a secret across the cut never shows', async (t) => {
    const secret = 'tok-0123456789abcdefghijklmnopqrstuvwxyz';
    // The secret starts 20 characters before the 4,096-character cut; the line goes on for 100,000 more.
    const line = `${'a'.repeat(4076)}${secret}${'b'.repeat(100_000)}`;
    const { log, seen } = await started(t, process.execPath, ['-e', `process.stderr.write(${JSON.stringify(line)} + '\\nnext line\\n')`], [secret]);
    await until(() => seen.closed === 1, 'the process to end');
    const logged = log.lines.filter((l) => l.msg === 'upstream stderr').map((l) => l.stderr as string);
    assert.deepEqual(logged, [`${'a'.repeat(4076)}[redacted]${'b'.repeat(10)}…`, 'next line']);
  });
});
