import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as delay } from 'node:timers/promises';
import { test } from 'node:test';
import { waitFor } from '../support/processes.js';
import { kill, startServer, type LogLine } from '../support/server-process.js';
import { temporaryDirectory } from '../support/workspace.js';

// Clients that ask for progress and never read it, against the real server and `toolport mcp`:
// what they cannot take must not pile up in the server, and must not keep it from stopping.

const ROOT = path.resolve(import.meta.dirname, '../..');
const FLOOD_PLUGIN = path.join(ROOT, 'test/fixtures/progress-plugin.ts');
/** How far the resident memory may rise above its level before the clients came. */
const RSS_GROWTH_BOUND_MIB = 40;
const TOKEN_LIMIT = 256;

/** VmRSS of a process, in MiB. */
function rssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Math.round(Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1]) / 1024);
}

/** Samples a process's RSS every 100 ms until `stop` is called; resolves to the highest sample. */
function sampleRss(pid: number): { stop: () => Promise<number> } {
  let highest = rssMiB(pid);
  let running = true;
  const loop = (async () => {
    while (running) {
      try {
        highest = Math.max(highest, rssMiB(pid));
      } catch {
        return;
      }
      await delay(100);
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return highest;
    },
  };
}

/** A client that sends one request over a raw TCP connection and never reads a byte of the answer. */
function nonReader(port: number, body: string): net.Socket {
  const socket = net.connect(port, '127.0.0.1');
  socket.pause();
  socket.on('error', () => {});
  socket.write(
    `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
  return socket;
}

const floodCall = (id: number, progressToken: string | number, ms = 600_000) =>
  JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'Flood', arguments: { ms }, _meta: { progressToken } } });

const count = (lines: LogLine[], match: (line: LogLine) => boolean): number => lines.filter(match).length;

test(
  `three HTTP clients that never read: 0.9 MB progress tokens are refused, streams at the token limit are dropped and their calls aborted, RSS rises less than ${RSS_GROWTH_BOUND_MIB} MiB`,
  { timeout: 180_000 },
  async (t) => {
    const srv = await startServer({ TOOLPORT_RATE_LIMIT: '0', TOOLPORT_PLUGINS: FLOOD_PLUGIN, TOOLPORT_TOOLS: 'Flood', TOOLPORT_IDLE_TIMEOUT_MS: '1000' });
    t.after(() => kill(srv));
    const port = Number(new URL(srv.url).port);
    const sockets: net.Socket[] = [];
    t.after(() => sockets.forEach((socket) => socket.destroy()));
    const before = rssMiB(srv.pid);
    const sampler = sampleRss(srv.pid);

    // The finding: a 0.9 MB token, repeated in every notification to a client that reads none.
    for (let id = 1; id <= 3; id++) sockets.push(nonReader(port, floodCall(id, 't'.repeat(900_000))));
    await waitFor(
      () => count(srv.lines, (l) => l.msg === 'tool call refused' && l.tool === 'Flood' && l.code === 'INVALID_INPUT') === 3,
      'the three calls with a 0.9 MB token to be refused',
      30_000,
    );
    assert.equal(
      count(srv.lines, (l) => l.msg === 'flood started'),
      0,
      'no call with a 0.9 MB token ran',
    );

    // Tokens at the limit and the largest notifications there are, as fast as the server sends
    // them: each stream fills the socket, is held at its bound, and is dropped by the idle timeout.
    for (let id = 4; id <= 6; id++) sockets.push(nonReader(port, floodCall(id, `${id}`.padEnd(TOKEN_LIMIT, 't'))));
    await waitFor(() => count(srv.lines, (l) => l.msg === 'flood started') === 3, 'the three floods to start', 30_000);
    await waitFor(
      () => count(srv.lines, (l) => l.msg === 'tool call' && l.tool === 'Flood' && l.outcome === 'aborted') === 3,
      'the three calls whose client reads nothing to be aborted',
      120_000,
    );
    assert.equal(
      count(srv.lines, (l) => l.msg === 'flood aborted'),
      3,
      'each flood saw its signal abort',
    );
    const highest = await sampler.stop();
    t.diagnostic(`RSS ${before} MiB before the clients, ${highest} MiB at the highest sample`);
    assert.ok(highest - before < RSS_GROWTH_BOUND_MIB, `RSS rose from ${before} to ${highest} MiB`);
  },
);

test(
  `toolport mcp with a stdout no one reads: 32 floods of progress raise RSS by less than ${RSS_GROWTH_BOUND_MIB} MiB, and SIGTERM ends it within the shutdown grace`,
  { timeout: 120_000 },
  async (t) => {
    const workspace = await temporaryDirectory(t, 'toolport-mcp-streams-');
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli.ts', 'mcp'], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        LOG_LEVEL: 'info',
        TOOLPORT_WORKSPACE: workspace,
        TOOLPORT_PLUGINS: FLOOD_PLUGIN,
        TOOLPORT_TOOLS: 'Flood',
        TOOLPORT_MAX_CONCURRENCY: '64',
        TOOLPORT_SHUTDOWN_GRACE_MS: '1000',
      },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    t.after(() => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    });
    // Standard output is never read: what the server writes stays in the pipe, then in the server.
    child.stdout!.pause();
    const logs: LogLine[] = [];
    createInterface({ input: child.stderr! }).on('line', (text) => {
      try {
        logs.push(JSON.parse(text) as LogLine);
      } catch {
        logs.push({ msg: text });
      }
    });
    let exitCode: number | null | undefined;
    child.once('exit', (code) => (exitCode = code));

    await waitFor(() => logs.some((l) => l.msg === 'serving tools'), 'toolport mcp to start', 30_000);
    const before = rssMiB(child.pid!);
    const sampler = sampleRss(child.pid!);
    const calls = Array.from({ length: 32 }, (_, i) => `${floodCall(i + 1, `${i + 1}`.padEnd(TOKEN_LIMIT, 't'), 8_000)}\n`);
    child.stdin!.write(calls.join(''));
    await waitFor(() => count(logs, (l) => l.msg === 'flood started') === 32, 'the 32 floods to start', 30_000);
    // Each flood reports for 8 s and answers: the answers are written, the progress coalesced.
    await waitFor(() => count(logs, (l) => l.msg === 'tool call' && l.tool === 'Flood' && l.outcome === 'ok') === 32, 'the 32 floods to answer', 60_000);
    const highest = await sampler.stop();
    t.diagnostic(`RSS ${before} MiB before the calls, ${highest} MiB at the highest sample`);
    assert.ok(highest - before < RSS_GROWTH_BOUND_MIB, `RSS rose from ${before} to ${highest} MiB`);

    child.kill('SIGTERM');
    await waitFor(() => exitCode !== undefined, 'toolport mcp to exit after SIGTERM', 30_000);
    assert.equal(exitCode, 1);
    const gaveUp = logs.find((l) => l.msg === 'the output was not taken within the shutdown grace; exiting');
    assert.equal(gaveUp?.graceMs, 1000);
  },
);
