import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { connect, type Socket } from 'node:net';
import path from 'node:path';
import { test, type TestContext } from 'node:test';
import { kill, startServer, type ServerProcess } from '../support/server-process.js';
import { until } from '../support/wait.js';
import { requireOrSkip } from '../support/require.js';

// Low enough to exhaust with a few hundred sockets, high enough for the server's own start-up.
const DESCRIPTOR_LIMIT = 160;
// Short deadlines, so the attacker's sockets are reaped within the test.
const SHORT_TIMEOUTS = {
  TOOLPORT_HEADERS_TIMEOUT_MS: '1000',
  TOOLPORT_REQUEST_TIMEOUT_MS: '1000',
  TOOLPORT_IDLE_TIMEOUT_MS: '1000',
  TOOLPORT_KEEP_ALIVE_TIMEOUT_MS: '1000',
};
const HALF_A_HEADER = 'GET /healthz HTTP/1.1\r\nHost: localhost\r\n';
const ECHOED = { content: [{ type: 'text', text: 'still serving' }], isError: false };

const PRLIMIT_MISSING = (() => {
  try {
    execFileSync('prlimit', ['--version'], { stdio: 'ignore' });
    return undefined;
  } catch {
    return 'prlimit (util-linux) is not installed';
  }
})();

async function server(t: TestContext, env: Record<string, string>, prefix: string[] = []): Promise<ServerProcess> {
  const started = await startServer({ ...SHORT_TIMEOUTS, ...env }, { prefix });
  t.after(() => kill(started));
  return started;
}

/** Rejects when `promise` has not settled within `ms`: a deadline, not a wait. */
function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

/** Polls `condition` until it holds, failing after `ms`. */
/**
 * The attacker: `count` connections that each send `payload` (half a request, or nothing) and then
 * nothing more, ever. Resolves `closed` once the server has closed every one of them.
 */
function idleConnections(url: string, count: number, payload: string): { sockets: Socket[]; closed: Promise<void> } {
  const { hostname, port } = new URL(url);
  const sockets: Socket[] = [];
  const closes: Promise<void>[] = [];
  for (let i = 0; i < count; i++) {
    const socket = connect(Number(port), hostname);
    socket.on('error', () => {});
    if (payload !== '') socket.on('connect', () => socket.write(payload));
    closes.push(new Promise((resolve) => socket.once('close', () => resolve())));
    sockets.push(socket);
  }
  return { sockets, closed: Promise.all(closes).then(() => undefined) };
}

/** How many descriptors the process has open (0 once it is gone). */
function openDescriptors(pid: number): number {
  try {
    return readdirSync(`/proc/${pid}/fd`).length;
  } catch {
    return 0;
  }
}

/** A fresh client: /healthz answers 200 and a tool call runs. */
async function assertServing(srv: ServerProcess): Promise<void> {
  const health = await fetch(`${srv.url}/healthz`);
  assert.equal(health.status, 200);
  assert.deepEqual(await health.json(), { status: 'ok' });
  const call = await fetch(`${srv.url}/tools/Echo`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ text: 'still serving' }),
  });
  assert.equal(call.status, 200);
  assert.deepEqual(await call.json(), ECHOED);
}

test('more idle half-open connections than the descriptor limit allows: the server stays up, refuses past its cap, and serves again once they are reaped', async (t) => {
  if (!requireOrSkip(t, 'prlimit', PRLIMIT_MISSING)) return;
  const srv = await server(t, {}, ['prlimit', `--nofile=${DESCRIPTOR_LIMIT}:${DESCRIPTOR_LIMIT}`, '--']);
  const attack = idleConnections(srv.url, DESCRIPTOR_LIMIT * 2, HALF_A_HEADER);
  t.after(() => attack.sockets.forEach((s) => s.destroy()));
  await within(attack.closed, 30_000, 'the server to close every idle connection');

  assert.equal(srv.child.exitCode, null, `the server exited: ${srv.stderr()}`);
  await assertServing(srv);
  const limits = srv.lines.find((l) => l.msg === 'connection limits');
  assert.equal(limits?.descriptorLimit, DESCRIPTOR_LIMIT);
  assert.ok(Number(limits.maxConnections) < DESCRIPTOR_LIMIT, `the derived cap ${String(limits.maxConnections)} stays below the limit`);
  assert.ok(
    srv.lines.some((l) => String(l.msg).startsWith('connections refused')),
    'the cap turned connections away',
  );
});

test('running out of descriptors does not end the process: with the cap set above the limit, accepts fail, and the server recovers', async (t) => {
  if (!requireOrSkip(t, 'prlimit', PRLIMIT_MISSING)) return;
  const srv = await server(t, { TOOLPORT_MAX_CONNECTIONS: '100000' }, ['prlimit', `--nofile=${DESCRIPTOR_LIMIT}:${DESCRIPTOR_LIMIT}`, '--']);
  const attack = idleConnections(srv.url, DESCRIPTOR_LIMIT * 2, '');
  t.after(() => attack.sockets.forEach((s) => s.destroy()));
  // Every descriptor the process may have is taken: the state that used to end it.
  await until(() => srv.child.exitCode !== null || openDescriptors(srv.pid) >= DESCRIPTOR_LIMIT, 'the descriptor table to fill', 20_000, 20);
  await within(attack.closed, 30_000, 'the server to close every idle connection');

  assert.equal(srv.child.exitCode, null, `the server exited: ${srv.stderr()}`);
  await assertServing(srv);
  assert.ok(
    srv.lines.some(
      (l) =>
        l.msg ===
        'TOOLPORT_MAX_CONNECTIONS is above what the descriptor limit (ulimit -n) leaves: connections past it will be refused by the system, and tool calls may fail to open files',
    ),
  );
});

test('a Bash call that outlasts the header, request and idle timeouts still gets its answer', async (t) => {
  const srv = await server(t, { TOOLPORT_HEADERS_TIMEOUT_MS: '300', TOOLPORT_REQUEST_TIMEOUT_MS: '300', TOOLPORT_IDLE_TIMEOUT_MS: '300' });
  const call = fetch(`${srv.url}/tools/Bash`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ command: 'touch started; while [ ! -e release ]; do sleep 0.05; done; echo released' }),
  });
  await until(() => existsSync(path.join(srv.workspace, 'started')), 'the command to start', 10_000, 20);
  // Proof that the deadlines passed while the call ran: idle connections opened after it, one
  // after the other, were each closed by the server.
  for (let i = 0; i < 2; i++) await within(idleConnections(srv.url, 1, '').closed, 10_000, 'an idle connection to be reaped');
  await writeFile(path.join(srv.workspace, 'release'), '');
  const res = await call;
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), { content: [{ type: 'text', text: 'released' }], isError: false });
});
