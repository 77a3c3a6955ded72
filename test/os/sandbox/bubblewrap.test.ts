import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readlinkSync } from 'node:fs';
import { mkdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import type { ToolDef } from '#src/core/types.js';
import { createBashTool } from '#src/tools/bash.js';
import { bwrapArgs, hiddenPaths, sandboxedBash, sandboxUnavailableReason, type HiddenPaths } from '#src/os/sandbox/bubblewrap.js';
import { Workspace } from '#src/os/fs/workspace.js';
import { escapees } from '../../fixtures/escapees.js';
import { killAll, processesIn, processesWith, uniqueMarker, waitFor } from '../../support/processes.js';
import { requireOrSkip, skipWithout } from '../../support/require.js';
import { toolContext } from '../../support/tool-context.js';
import { temporaryDirectory } from '../../support/workspace.js';

type TestContext = { after(fn: () => Promise<void> | void): void; skip(reason: string): void };

async function workspace(t: TestContext): Promise<Workspace> {
  const dir = await temporaryDirectory(t, 'toolport-sandbox-');
  const ws = await Workspace.open(dir);
  // Ends the sandboxes Bash started ahead in it.
  t.after(() => ws.close());
  return ws;
}

/**
 * A directory for secrets outside /tmp (which the sandbox replaces anyway, so hiding anything
 * there would prove nothing): /var/tmp, a shared directory, so this one is a directory of its own.
 */
async function secretsDirectory(t: TestContext): Promise<string> {
  return temporaryDirectory(t, 'toolport-secrets-', '/var/tmp');
}

/** The sandboxed Bash tool, or undefined after skipping the test with the reason bwrap cannot run here. */
async function sandboxedTool(t: TestContext, secretFiles: string[] = []): Promise<{ bash: ToolDef; ws: Workspace } | undefined> {
  const ws = await workspace(t);
  const reason = await sandboxUnavailableReason(ws.root);
  if (!requireOrSkip(t, 'bubblewrap', reason)) return undefined;
  return { bash: await createBashTool({ workspace: ws, sandbox: true, secretFiles }), ws };
}

async function run(bash: ToolDef, command: string, timeout?: number): Promise<{ text: string; isError: boolean }> {
  const context = toolContext();
  const result = await bash.execute(timeout === undefined ? { command } : { command, timeout }, context);
  const block = result.content[0];
  return { text: block?.type === 'text' ? block.text : '', isError: result.isError === true };
}

test('bwrapArgs mounts / read-only, then a private /tmp and /run, then covers hidden paths, then the workspace writable', () => {
  const hidden: HiddenPaths = { directories: ['/srv/toolport'], files: ['/etc/toolport-keys.json'] };
  const args = bwrapArgs('/srv/toolport/ws', hidden);
  const at = (...option: string[]): number => {
    const i = args.findIndex((_, k) => option.every((o, j) => args[k + j] === o));
    assert.ok(i >= 0, `${option.join(' ')} is present`);
    return i;
  };
  const workspaceBind = at('--bind', '/srv/toolport/ws', '/srv/toolport/ws');
  assert.ok(at('--ro-bind', '/', '/') < at('--tmpfs', '/tmp'));
  assert.ok(at('--tmpfs', '/tmp') < workspaceBind, 'a workspace under /tmp stays visible');
  assert.ok(at('--tmpfs', '/run') < workspaceBind, '/run, and /run/secrets with it, is private');
  assert.ok(at('--tmpfs', '/run') < at('--tmpfs', '/srv/toolport'));
  assert.ok(at('--tmpfs', '/srv/toolport') < workspaceBind, 'a workspace inside a hidden directory stays visible');
  assert.ok(at('--ro-bind', '/dev/null', '/etc/toolport-keys.json') > at('--ro-bind', '/', '/'));
  assert.deepEqual(
    bwrapArgs('/tmp/ws').filter((a) => a === '/dev/null'),
    [],
    'nothing else is covered by default',
  );
  at('--proc', '/proc');
  at('--dev', '/dev');
  at('--chdir', '/srv/toolport/ws');
  at('--unshare-all');
  at('--die-with-parent');
  at('--cap-drop', 'ALL');
  assert.ok(!args.includes('--share-net') && !args.includes('--new-session'));
  assert.deepEqual(sandboxedBash('/tmp/ws', 'ls').args.slice(-4), ['--', 'bash', '-c', 'ls']);
  assert.deepEqual(sandboxedBash('/srv/toolport/ws', 'ls', hidden).args.slice(0, -4), args);
});

test('hiddenPaths hides a secret file with its directory when the directory is its own', async (t) => {
  const ws = await workspace(t);
  const dir = await secretsDirectory(t);
  await writeFile(path.join(dir, 'keys.json'), '[]');
  await symlink(path.join(dir, 'keys.json'), path.join(ws.root, '..', `${path.basename(ws.root)}-link.json`));
  t.after(() => rm(path.join(ws.root, '..', `${path.basename(ws.root)}-link.json`), { force: true }));
  assert.deepEqual(await hiddenPaths(ws.root, [path.join(dir, 'keys.json')]), { directories: [dir], files: [] });
  // A link is followed to the file it names: that is what a command would read.
  assert.deepEqual(await hiddenPaths(ws.root, [path.join(ws.root, '..', `${path.basename(ws.root)}-link.json`)]), { directories: [dir], files: [] });
});

test('hiddenPaths hides the directory a mounted secret is named in, which its rotations replace', async (t) => {
  const ws = await workspace(t);
  const dir = await secretsDirectory(t);
  // A Kubernetes secret volume: keys.json -> ..data/keys.json, ..data -> ..<timestamp>/.
  await mkdir(path.join(dir, '..2026_11_30_1'));
  await writeFile(path.join(dir, '..2026_11_30_1', 'keys.json'), '[]');
  await symlink('..2026_11_30_1', path.join(dir, '..data'));
  await symlink('..data/keys.json', path.join(dir, 'keys.json'));
  assert.deepEqual(await hiddenPaths(ws.root, [path.join(dir, 'keys.json')]), { directories: [dir], files: [] });
});

test('hiddenPaths hides a secret file by itself in a shared directory, or in one that holds the workspace', async (t) => {
  const ws = await workspace(t);
  const shared = `/var/tmp/toolport-keys-${randomBytes(6).toString('hex')}.json`;
  await writeFile(shared, '[]');
  t.after(() => rm(shared, { force: true }));
  assert.deepEqual(await hiddenPaths(ws.root, [shared]), { directories: [], files: [shared] });

  // Covering the workspace's parent would hide what lies around it (a repository's .git, say).
  const dir = await secretsDirectory(t);
  await mkdir(path.join(dir, 'ws'));
  await writeFile(path.join(dir, 'keys.json'), '[]');
  assert.deepEqual(await hiddenPaths(path.join(dir, 'ws'), [path.join(dir, 'keys.json')]), { directories: [], files: [path.join(dir, 'keys.json')] });
});

test('hiddenPaths skips missing files, files under /tmp and files inside the workspace', async (t) => {
  const ws = await workspace(t);
  await writeFile(path.join(ws.root, 'keys.json'), '[]');
  const dir = await secretsDirectory(t);
  const secrets = [path.join(dir, 'missing.json'), path.join(ws.root, 'keys.json'), path.join(ws.root, '..')];
  assert.deepEqual(await hiddenPaths(ws.root, secrets), { directories: [], files: [] });
});

test('sandboxUnavailableReason says how to install bubblewrap when bwrap is missing', async (t) => {
  const ws = await workspace(t);
  const reason = await sandboxUnavailableReason(ws.root, '/nonexistent/bwrap');
  assert.equal(reason, '/nonexistent/bwrap was not found on PATH; install it (Debian/Ubuntu: apt-get install bubblewrap)');
});

test('createBashTool refuses to start with a sandbox asked for when neither bwrap nor the reaper can run', async (t) => {
  const ws = await workspace(t);
  const saved = process.env.PATH;
  t.after(() => (process.env.PATH = saved));
  // The tools look programs up on the PATH they pass on; an empty directory hides bwrap.
  process.env.PATH = ws.root;
  await assert.rejects(createBashTool({ workspace: ws, sandbox: true }), {
    message:
      'TOOLPORT_BASH_SANDBOX=true but no sandbox works here: bubblewrap does not work here: bwrap was not found on PATH; install it (Debian/Ubuntu: apt-get install bubblewrap); ' +
      'Landlock cannot confine commands here: the reaper cannot run: perl was not found on PATH; install it (Debian/Ubuntu: apt-get install perl-base)',
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
  const result = await run(
    tool.bash,
    `test ! -e ${hostFile} && test -z "$(ls -A /run)" && echo "$TMPDIR" && touch /tmp/${path.basename(hostFile)}-inside && echo ok`,
  );
  assert.deepEqual(result, { text: '/tmp\nok', isError: false });
  assert.equal(existsSync(`/tmp/${path.basename(hostFile)}-inside`), false);
});

test('sandboxed Bash gives every call namespaces and a /tmp of its own, one call after another and many at once', async (t) => {
  const tool = await sandboxedTool(t);
  if (!tool) return;
  // What a call sees of itself: its PID, mount and network namespaces, and what is in its /tmp once it has written there.
  const probe =
    'touch /tmp/mine-$$; echo "$(readlink /proc/self/ns/pid) $(readlink /proc/self/ns/mnt) $(readlink /proc/self/ns/net) $(ls /tmp | grep -v "^ws$\\|toolport-" | tr "\\n" " ")"';
  const shape = /^pid:\[\d+\] mnt:\[\d+\] net:\[\d+\] mine-\d+ $/;
  for (let i = 0; i < 6; i++) assert.match((await run(tool.bash, probe)).text, shape, 'only its own file in /tmp');
  // Eight at once, each waiting (through the workspace they share; $$ is 2 in every sandbox) until all eight run, so that
  // their namespaces all exist at the same time: a freed namespace's number can come back.
  const together = `mktemp started-XXXXXXXX >/dev/null; until [ "$(ls started-* | wc -l)" -ge 8 ]; do sleep 0.01; done; ${probe}`;
  const results = (await Promise.all(Array.from({ length: 8 }, () => run(tool.bash, together)))).map((r) => r.text);
  for (const text of results) assert.match(text, shape, 'only its own file in /tmp');
  for (const kind of [0, 1, 2]) {
    const seen = new Set(results.map((text) => text.split(' ')[kind]));
    assert.equal(seen.size, results.length, `a namespace of each kind per call: ${[...seen].join(', ')}`);
  }
});

test('sandboxed Bash starts sandboxes ahead of calls, and closing the workspace ends them', async (t) => {
  const tool = await sandboxedTool(t);
  if (!tool) return;
  const inWorkspace = (): number[] => processesIn(tool.ws.root);
  assert.deepEqual(await run(tool.bash, 'echo first'), { text: 'first', isError: false });
  // The tool's concurrency (4) waits after a call: call reapers, bubblewrap and their shells.
  await waitFor(() => inWorkspace().length >= 4, 'sandboxes to be started ahead');
  await tool.ws.close();
  await waitFor(() => inWorkspace().length === 0, 'no sandbox left once the workspace is closed');
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
  const unconfined = await createBashTool({ workspace: tool.ws, sandbox: false });
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

test('sandboxed Bash kills processes that called setsid or were double-forked when the command ends', async (t) => {
  const tool = await sandboxedTool(t);
  if (!tool) return;
  const marker = uniqueMarker();
  t.after(() => killAll(processesWith(marker)));
  assert.deepEqual(await run(tool.bash, `${escapees(marker)}; echo started`), { text: 'started', isError: false });
  await waitFor(() => processesWith(marker).length === 0, 'every process the command started to be gone');
});

test('sandboxed Bash cannot read the API keys file, nor anything beside it', async (t) => {
  const dir = await secretsDirectory(t);
  const keysFile = path.join(dir, 'keys.json');
  await writeFile(keysFile, '[{"label":"ci","key":"sk-sandbox-test-0123456789"}]');
  await writeFile(path.join(dir, 'keys.json.bak'), 'sk-sandbox-test-0123456789');
  const tool = await sandboxedTool(t, [keysFile]);
  if (!tool) return;
  // Unconfined, the same command reads it: the check itself works.
  const unconfined = await createBashTool({ workspace: tool.ws, sandbox: false });
  assert.match((await run(unconfined, `cat ${keysFile}`)).text, /sk-sandbox-test/);

  const result = await run(tool.bash, `cat ${keysFile}; ls -A ${dir}; grep -r sk-sandbox-test ${dir}; echo end`);
  assert.doesNotMatch(result.text, /sk-sandbox-test/);
  assert.match(result.text, /No such file or directory/);
  assert.match(result.text, /^end$/m);
});

test('sandboxed Bash cannot read a keys file in a shared directory', async (t) => {
  const keysFile = `/var/tmp/toolport-keys-${randomBytes(6).toString('hex')}.json`;
  await writeFile(keysFile, 'sk-sandbox-test-0123456789');
  t.after(() => rm(keysFile, { force: true }));
  const tool = await sandboxedTool(t, [keysFile]);
  if (!tool) return;
  const result = await run(tool.bash, `cat ${keysFile}`);
  assert.equal(result.isError, true);
  assert.doesNotMatch(result.text, /sk-sandbox-test/);
  assert.match(result.text, /Permission denied/);
});

test('sandboxed Bash cannot see /run/secrets', async (t) => {
  const name = `toolport-test-${randomBytes(6).toString('hex')}`;
  const created = !existsSync('/run/secrets');
  try {
    await mkdir(`/run/secrets/${name}`, { recursive: true });
  } catch (err) {
    skipWithout(t, 'a directory in /run/secrets', (err as Error).message);
    return;
  }
  t.after(() => rm(created ? '/run/secrets' : `/run/secrets/${name}`, { recursive: true, force: true }));
  await writeFile(`/run/secrets/${name}/key`, 'sk-sandbox-test-0123456789');
  const tool = await sandboxedTool(t);
  if (!tool) return;
  const result = await run(tool.bash, `ls -A /run | wc -l; cat /run/secrets/${name}/key`);
  assert.equal(result.isError, true);
  assert.doesNotMatch(result.text, /sk-sandbox-test/);
  assert.equal(result.text, `0\n[stderr]\ncat: /run/secrets/${name}/key: No such file or directory\n(Exit code 1)`);
});

test("sandboxed Bash cannot read the server's environment, nor any process's outside the sandbox", async (t) => {
  const tool = await sandboxedTool(t);
  if (!tool) return;
  const marker = uniqueMarker();
  const secret = `sk-environ-${randomBytes(8).toString('hex')}`;
  // A process of the server's user with a secret in its environment, as the server has its keys.
  const holder = spawn('sleep', [marker], { env: { ...process.env, TOOLPORT_API_KEYS: secret }, stdio: 'ignore' });
  t.after(() => holder.kill('SIGKILL'));
  await waitFor(() => processesWith(marker).length === 1, 'the process holding the secret to start');
  const search = `grep -l -a -s ${secret} /proc/[0-9]*/environ; echo searched`;

  const unconfined = await createBashTool({ workspace: tool.ws, sandbox: false });
  assert.match((await run(unconfined, search)).text, new RegExp(`^/proc/${holder.pid}/environ$`, 'm'), 'unconfined, the search finds it');

  assert.deepEqual(await run(tool.bash, search), { text: 'searched', isError: false });
  const direct = await run(tool.bash, `cat /proc/${process.pid}/environ /proc/${holder.pid}/environ`);
  assert.equal(direct.isError, true);
  assert.doesNotMatch(direct.text, new RegExp(secret));
});
