import assert from 'node:assert/strict';
import { existsSync, readlinkSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { pino } from 'pino';
import type { ToolDef } from '../../src/core/types.js';
import { createBashTool } from '../../src/tools/bash.js';
import { bwrapArgs, sandboxedBash, sandboxUnavailableReason } from '../../src/tools/sandbox.js';
import { Workspace } from '../../src/tools/workspace.js';
import { killAll, processesWith, uniqueMarker, waitFor } from '../fixtures/processes.js';

type TestContext = { after(fn: () => Promise<void> | void): void; skip(reason: string): void };

async function workspace(t: TestContext): Promise<Workspace> {
  const dir = await mkdtemp(path.join(tmpdir(), 'toolport-sandbox-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return Workspace.open(dir);
}

/** The sandboxed Bash tool, or undefined after skipping the test with the reason bwrap cannot run here. */
async function sandboxedTool(t: TestContext): Promise<{ bash: ToolDef; ws: Workspace } | undefined> {
  const ws = await workspace(t);
  const reason = await sandboxUnavailableReason(ws.root);
  if (reason !== undefined) {
    t.skip(`bubblewrap does not work on this machine: ${reason}`);
    return undefined;
  }
  return { bash: await createBashTool({ workspace: ws, sandbox: true }), ws };
}

async function run(bash: ToolDef, command: string, timeout?: number): Promise<{ text: string; isError: boolean }> {
  const context = { signal: new AbortController().signal, log: pino({ level: 'silent' }), requestId: 'test' };
  const result = await bash.execute(timeout === undefined ? { command } : { command, timeout }, context);
  const block = result.content[0];
  return { text: block?.type === 'text' ? block.text : '', isError: result.isError === true };
}

test('bwrapArgs mounts / read-only, then a private /tmp and /run, then the workspace writable', () => {
  const args = bwrapArgs('/tmp/ws');
  const at = (...option: string[]): number => {
    const i = args.findIndex((_, k) => option.every((o, j) => args[k + j] === o));
    assert.ok(i >= 0, `${option.join(' ')} is present`);
    return i;
  };
  assert.ok(at('--ro-bind', '/', '/') < at('--tmpfs', '/tmp'));
  assert.ok(at('--tmpfs', '/tmp') < at('--bind', '/tmp/ws', '/tmp/ws'), 'a workspace under /tmp stays visible');
  assert.ok(at('--tmpfs', '/run') < at('--bind', '/tmp/ws', '/tmp/ws'));
  at('--proc', '/proc');
  at('--dev', '/dev');
  at('--chdir', '/tmp/ws');
  at('--unshare-all');
  at('--die-with-parent');
  at('--cap-drop', 'ALL');
  assert.ok(!args.includes('--share-net') && !args.includes('--new-session'));
  assert.deepEqual(sandboxedBash('/tmp/ws', 'ls').args.slice(-4), ['--', 'bash', '-c', 'ls']);
});

test('sandboxUnavailableReason says how to install bubblewrap when bwrap is missing', async (t) => {
  const ws = await workspace(t);
  const reason = await sandboxUnavailableReason(ws.root, '/nonexistent/bwrap');
  assert.equal(reason, '/nonexistent/bwrap was not found on PATH; install it (Debian/Ubuntu: apt-get install bubblewrap)');
});

test('createBashTool refuses to start with the sandbox asked for when bwrap cannot run', async (t) => {
  const ws = await workspace(t);
  const saved = process.env.PATH;
  t.after(() => (process.env.PATH = saved));
  // The tools look programs up on the PATH they pass on; an empty directory hides bwrap.
  process.env.PATH = ws.root;
  await assert.rejects(createBashTool({ workspace: ws, sandbox: true }), {
    message: 'TOOLPORT_BASH_SANDBOX=true but bubblewrap (bwrap) is not available: bwrap was not found on PATH; install it (Debian/Ubuntu: apt-get install bubblewrap)',
  });
});

test('sandboxed Bash can write the workspace but not the rest of the file system', async (t) => {
  const tool = await sandboxedTool(t);
  if (!tool) return;
  const { bash, ws } = tool;
  assert.deepEqual(await run(bash, 'echo made > made.txt && pwd'), { text: ws.root, isError: false });
  assert.equal(await readFile(path.join(ws.root, 'made.txt'), 'utf8'), 'made\n');
  const outside = await run(bash, 'touch /etc/toolport-probe');
  assert.equal(outside.isError, true);
  assert.match(outside.text, /Read-only file system/);
  assert.equal(existsSync('/etc/toolport-probe'), false);
});

test('sandboxed Bash gets a private, empty /tmp and /run', async (t) => {
  const tool = await sandboxedTool(t);
  if (!tool) return;
  const hostFile = path.join(tmpdir(), `toolport-host-${process.pid}`);
  await writeFile(hostFile, 'host');
  t.after(() => rm(hostFile, { force: true }));
  const result = await run(tool.bash, `test ! -e ${hostFile} && test -z "$(ls -A /run)" && echo "$TMPDIR" && touch /tmp/${path.basename(hostFile)}-inside && echo ok`);
  assert.deepEqual(result, { text: '/tmp\nok', isError: false });
  assert.equal(existsSync(`/tmp/${path.basename(hostFile)}-inside`), false);
});

test('sandboxed Bash has no network: a server listening on the host loopback is unreachable', async (t) => {
  const tool = await sandboxedTool(t);
  if (!tool) return;
  const server = createServer((socket) => socket.end('hello\n'));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const { port } = server.address() as AddressInfo;
  const command = `exec 3<>/dev/tcp/127.0.0.1/${port} && head -n 1 <&3`;

  // The same command reaches the server from outside the sandbox, so the probe itself works.
  const unconfined = await createBashTool({ workspace: tool.ws });
  assert.deepEqual(await run(unconfined, command), { text: 'hello', isError: false });

  const confined = await run(tool.bash, command);
  assert.equal(confined.isError, true);
  assert.match(confined.text, /Connection refused/);
});

test('sandboxed Bash runs in its own PID namespace without capabilities', async (t) => {
  const tool = await sandboxedTool(t);
  if (!tool) return;
  const result = await run(tool.bash, 'readlink /proc/self/ns/pid; grep CapEff /proc/self/status');
  assert.equal(result.isError, false);
  const [namespace, caps] = result.text.split('\n');
  assert.match(namespace!, /^pid:\[\d+\]$/);
  assert.notEqual(namespace, readlinkSync('/proc/self/ns/pid'));
  assert.match(caps!, /^CapEff:\s+0+$/);
});

test('sandboxed Bash kills everything inside on timeout, even processes that left the group', async (t) => {
  const tool = await sandboxedTool(t);
  if (!tool) return;
  const marker = uniqueMarker();
  t.after(() => killAll(processesWith(marker)));
  const result = await run(tool.bash, `sleep ${marker} & (sleep ${marker} &); setsid sleep ${marker} & echo started; wait`, 300);
  assert.deepEqual(result, { text: 'started\n(Command timed out after 300 ms and was killed)', isError: true });
  await waitFor(() => processesWith(marker).length === 0, 'every process of the sandbox to be gone');
});
