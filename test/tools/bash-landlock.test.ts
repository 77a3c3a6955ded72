/**
 * Bash under Landlock and seccomp, attacked from real calls: what a command must not reach where
 * no namespace can be made (a container under Docker's default profile), and what must still work.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { createServer as createTcpServer, type AddressInfo, type Server } from 'node:net';
import path from 'node:path';
import { test, type TestContext } from 'node:test';
import type { ToolDef } from '#src/core/types.js';
import { createBashTool } from '#src/tools/bash.js';
import { bashIsolationOf } from '#src/tools/bash.js';
import { DEFAULT_BASH_LIMITS, type BashLimits } from '#src/os/sandbox/limits.js';
import { Workspace } from '#src/os/fs/workspace.js';
import { pathWithOnly } from '../support/programs.js';
import { requireOrSkip } from '../support/require.js';
import { toolContext } from '../support/tool-context.js';
import { temporaryDirectory } from '../support/workspace.js';

interface Confined {
  bash: ToolDef;
  ws: Workspace;
}

interface ConfinedOptions {
  secretFiles?: string[];
  hiddenDirectories?: string[];
  limits?: BashLimits;
  network?: boolean;
}

/** The Bash tool under Landlock, or undefined after skipping (failing in CI) with why Landlock cannot run here. */
async function confined(t: TestContext, options: ConfinedOptions = {}): Promise<Confined | undefined> {
  const ws = await Workspace.open(await temporaryDirectory(t, 'toolport-landlock-'));
  t.after(() => ws.close());
  let bash: ToolDef;
  try {
    bash = await createBashTool({ workspace: ws, sandbox: 'landlock', limits: DEFAULT_BASH_LIMITS, ...options });
  } catch (err) {
    requireOrSkip(t, 'Landlock', (err as Error).message);
    return undefined;
  }
  return { bash, ws };
}

async function run(bash: ToolDef, command: string): Promise<{ text: string; isError: boolean }> {
  const result = await bash.execute({ command }, toolContext());
  const block = result.content[0];
  return { text: block?.type === 'text' ? block.text : '', isError: result.isError === true };
}

function secret(): string {
  return `secret-${randomBytes(12).toString('hex')}`;
}

/** A TCP server on the loopback address that counts the connections it gets. */
async function listening(t: TestContext): Promise<{ port: number; connections: () => number }> {
  let count = 0;
  const server: Server = createTcpServer((socket) => {
    count++;
    socket.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { port: (server.address() as AddressInfo).port, connections: () => count };
}

test('Landlock: the start-up mode is the Landlock sandbox, under the subreaper, with no network', async (t) => {
  const tool = await confined(t);
  if (!tool) return;
  const isolation = bashIsolationOf(tool.bash)!;
  assert.deepEqual([isolation.mode, isolation.mechanism, isolation.reaping, isolation.network], ['sandbox', 'landlock', 'subreaper', false]);
  assert.match(tool.bash.description, /Sandbox: commands run under Landlock and seccomp/);
});

test("Landlock: a command reads no other process's environment, the server's included, and can neither signal nor trace it", async (t) => {
  const tool = await confined(t);
  if (!tool) return;
  const value = secret();
  // Stands in for the server and an upstream: a process of the same user with a secret in its environment.
  const holder = spawn('sleep', ['60'], { env: { ...process.env, TOOLPORT_API_KEYS: value }, stdio: 'ignore' });
  t.after(() => holder.kill('SIGKILL'));
  const pids = `${process.pid} ${holder.pid}`;
  const { text } = await run(
    tool.bash,
    [
      `for pid in ${pids}; do cat /proc/$pid/environ; cat /proc/$pid/maps; ls -l /proc/$pid/fd/ | head -3; done 2>&1 | grep -c 'Permission denied'`,
      // Decoded here, so that the command's own text (in its own environment) does not hold it.
      `v=$(echo ${Buffer.from(value).toString('base64')} | base64 -d); echo "environ matches: $(grep -a -l -s -r "$v" /proc/[0-9]*/environ | wc -l)"`,
      `for pid in 1 ${pids}; do kill -0 $pid 2>/dev/null && echo "signalled $pid"; done`,
      // PTRACE_ATTACH (16), by its x86-64 (101) or arm64 (117) number.
      `for pid in ${pids}; do perl -e 'my $n = { x86_64 => 101, aarch64 => 117 }->{(POSIX::uname())[4]} // 101; print syscall($n, 16, $ARGV[0], 0, 0) < 0 ? "ptrace refused\\n" : "ptrace attached\\n"' -MPOSIX $pid; done`,
      'echo done',
    ].join('; '),
  );
  assert.ok(!text.includes(value), text);
  assert.ok(!text.includes('signalled'), text);
  assert.match(text, /^\d+\n/);
  assert.ok(Number(text.split('\n')[0]) >= 4, text);
  assert.match(text, /environ matches: 0/);
  assert.equal(text.match(/ptrace refused/g)?.length, 2, text);
  assert.match(text, /done$/);
});

test("Landlock: a command cannot read the keys file, even in a directory it may read, nor another key's workspace by path or by search", async (t) => {
  // A directory on PATH is readable; the keys file in it is carved out.
  const bin = await pathWithOnly(t, ['bash', 'cat', 'grep', 'ls', 'find', 'echo', 'sleep', 'perl']);
  const keys = secret();
  const keysFile = path.join(bin, 'keys.json');
  await writeFile(keysFile, JSON.stringify([{ label: 'a', key: keys }]));
  const other = await temporaryDirectory(t, 'toolport-landlock-other-', '/var/tmp');
  const marker = secret();
  await writeFile(path.join(other, 'notes.txt'), marker);
  const tool = await confined(t, { secretFiles: [keysFile], hiddenDirectories: [other] });
  if (!tool) return;
  const { text } = await run(
    tool.bash,
    `cat ${keysFile}; cat ${other}/notes.txt; ls ${other}; grep -r -s -l -e ${keys} -e ${marker} ${bin} ${other} /var/tmp /etc /tmp /home /run; find / -name notes.txt 2>/dev/null | grep -c ${path.basename(other)}; cat ${bin}/bash > /dev/null && echo programs run`,
  );
  assert.ok(!text.includes(keys) && !text.includes(marker), text);
  assert.match(text, new RegExp(`cat: ${keysFile}: Permission denied`));
  assert.match(text, new RegExp(`cat: ${other}/notes.txt: Permission denied`));
  assert.match(text, /programs run/);
});

test('Landlock: no connection leaves the call, to TCP, UDP or a Unix socket by path, and nothing listens', async (t) => {
  const tool = await confined(t);
  if (!tool) return;
  const tcp = await listening(t);
  const socketDir = await temporaryDirectory(t, 'toolport-landlock-sock-');
  const socketPath = path.join(socketDir, 'service.sock');
  let unixConnections = 0;
  const unix = createTcpServer((socket) => {
    unixConnections++;
    socket.destroy();
  });
  await new Promise<void>((resolve) => unix.listen(socketPath, resolve));
  t.after(() => new Promise<void>((resolve) => unix.close(() => resolve())));
  const { text } = await run(
    tool.bash,
    [
      `(exec 3<>/dev/tcp/127.0.0.1/${tcp.port}) 2>&1`,
      `(echo x > /dev/udp/127.0.0.1/${tcp.port}) 2>&1`,
      `node -e 'const net = require("net"); net.connect(${tcp.port}, "127.0.0.1").on("error", (e) => console.log("tcp", e.code)); net.connect(${JSON.stringify(socketPath)}).on("error", (e) => console.log("unix", e.code)); net.createServer().listen(0).on("error", (e) => console.log("listen", e.code))'`,
    ].join('; '),
  );
  assert.match(text, /socket: Permission denied/);
  assert.match(text, /tcp EACCES/);
  assert.match(text, /unix EACCES/);
  assert.match(text, /listen EACCES/);
  assert.equal(tcp.connections(), 0);
  assert.equal(unixConnections, 0);
});

test('Landlock: with TOOLPORT_BASH_NETWORK=all a command reaches a server on the host', async (t) => {
  const tool = await confined(t, { network: true });
  if (!tool) return;
  const tcp = await listening(t);
  const { text, isError } = await run(tool.bash, `exec 3<>/dev/tcp/127.0.0.1/${tcp.port} && echo connected`);
  assert.deepEqual({ text, isError }, { text: 'connected', isError: false });
  assert.equal(tcp.connections(), 1);
});

test('Landlock: a command writes the workspace and a private TMPDIR and HOME of its own, never /tmp, and each call gets a new one', async (t) => {
  const tool = await confined(t);
  if (!tool) return;
  const first = await run(tool.bash, 'echo made > made.txt && echo "$TMPDIR $HOME" && ls -A "$TMPDIR" && touch "$TMPDIR/left" && (echo x > /tmp/escape) 2>&1');
  const [dirs = '', error = ''] = first.text.split('\n');
  const [tmpdir, home] = dirs.split(' ');
  assert.equal(tmpdir, home);
  assert.match(error, /\/tmp\/escape: Permission denied/);
  assert.ok(existsSync(path.join(tool.ws.root, 'made.txt')));
  const second = await run(tool.bash, 'echo "$TMPDIR"; ls -A "$TMPDIR"; ls ' + tmpdir + ' 2>&1');
  const [again = '', ...rest] = second.text.split('\n');
  assert.notEqual(again, tmpdir);
  assert.match(rest.join('\n'), /Permission denied|No such file or directory/);
  await waitForGone(tmpdir!);
});

async function waitForGone(dir: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (existsSync(dir)) {
    if (Date.now() > deadline) assert.fail(`${dir} was not removed after its call`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

test('Landlock: a call that fills its private directory past TOOLPORT_BASH_TMP_SIZE is stopped, and the result says so', async (t) => {
  const limits = { ...DEFAULT_BASH_LIMITS, tmpSize: 4 * 1024 * 1024 };
  const tool = await confined(t, { limits });
  if (!tool) return;
  const { text, isError } = await run(tool.bash, 'for i in $(seq 64); do head -c 1048576 /dev/zero > "$TMPDIR/f$i"; sleep 0.01; done; echo finished');
  assert.equal(isError, true);
  assert.ok(!text.includes('finished'), text);
  assert.match(text, /\(Stopped: the command's private directory \(TMPDIR, HOME\) went past 4194304 bytes, TOOLPORT_BASH_TMP_SIZE\)/);
});

test('Landlock: new namespaces and System V shared memory are refused; git and node work in the workspace', async (t) => {
  const tool = await confined(t);
  if (!tool) return;
  const refused = await run(
    tool.bash,
    '(unshare -U true) 2>&1; (unshare -n true) 2>&1; perl -e \'print syscall(29, 0, 4096, 01000) < 0 ? "shmget refused\\n" : "shmget\\n"\'',
  );
  assert.match(refused.text, /unshare failed: Operation not permitted[\s\S]*unshare failed: Operation not permitted/);
  if (process.arch === 'x64') assert.match(refused.text, /shmget refused/);
  await mkdir(path.join(tool.ws.root, 'src'));
  const good = await run(
    tool.bash,
    'git init -q . && git -c user.name=a -c user.email=a@example.com commit -q --allow-empty -m first && git log --oneline | wc -l && node -e "console.log(require(\'os\').cpus().length > 0)"',
  );
  assert.deepEqual(good, { text: '1\ntrue', isError: false });
});

test("Landlock: another call's command is in no process's arguments, so a call cannot read it from /proc", async (t) => {
  const tool = await confined(t);
  if (!tool) return;
  const value = secret();
  const encoded = Buffer.from(value).toString('base64');
  const holder = run(tool.bash, `echo ${value} > /dev/null; sleep 30; true`);
  const { text } = await run(
    tool.bash,
    `echo ${encoded} | base64 -d > "$TMPDIR/p"; for i in $(seq 100); do n=$(cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' ' | grep -c sleep); [ "$n" -gt 0 ] && break; sleep 0.05; done; cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' '\\n' | grep -c -F -f "$TMPDIR/p"; echo "sleeping: $n"`,
  );
  tool.ws.close();
  await holder;
  assert.match(text, /^0\nsleeping: [1-9]/, text);
});
