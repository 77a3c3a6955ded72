import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, it } from 'node:test';
import { reaperUnavailableReason, REAPER_SCRIPT, REAPER_SYSCALLS } from '#src/os/proc/reaper.js';
import { UpstreamConfinement } from '#src/upstreams/confinement.js';
import { escapees } from '../fixtures/escapees.js';
import { EVERYTHING } from '../support/everything-server.js';
import { httpClient } from '../support/mcp-clients.js';
import { freePort } from '../support/ports.js';
import { isAlive, processesWith, trackedMarker, waitFor } from '../support/processes.js';
import { pathWithOnly } from '../support/programs.js';
import { kill, startServer, type ServerProcess } from '../support/server-process.js';
import { requireOrSkip } from '../support/require.js';
import { temporaryDirectory, type Cleanup } from '../support/workspace.js';

const PRYING = path.resolve(import.meta.dirname, '../fixtures/upstreams/prying-server.mjs');
const DAEMONIZING = path.resolve(import.meta.dirname, '../fixtures/upstreams/daemonizing-server.mjs');
/** What the supervisor needs: Perl and the reaper's script (the sandbox is not needed). */
const SUPERVISOR = "the reaper's supervisor (Perl)";
const KEY = 'confined-upstream-key-0123456789abcdef';
const SCOPED_KEY = 'scoped-upstream-key-0123456789abcdef';
const AUTH = { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' };

/** Why the upstreams' sandbox cannot run here (the kernel's Landlock older than ABI 6, no perl), or undefined. */
async function sandboxUnavailable(): Promise<string | undefined> {
  const confinement = await UpstreamConfinement.open([]);
  if (typeof confinement === 'string') return confinement;
  await confinement.close();
  return undefined;
}

interface Pried {
  ancestors: number[];
  environ: number[];
  keysFile: string | null;
  signalled: number[];
  tmp: boolean;
  connect: string;
}

/** A server with the prying upstream (see the fixture), a keys file beside its config, and a key in its environment. */
async function pryingServer(t: Cleanup, marker: string, extra: Record<string, string> = {}, entry: Record<string, unknown> = {}): Promise<ServerProcess> {
  const dir = await temporaryDirectory(t);
  const keysFile = path.join(dir, 'keys.json');
  await writeFile(keysFile, JSON.stringify([{ label: 'scoped', key: SCOPED_KEY }]));
  const file = path.join(dir, 'upstreams.json');
  const port = await freePort();
  const pry = { command: process.execPath, args: [PRYING, keysFile, marker], env: { PRY_PORT: String(port) }, ...entry };
  await writeFile(file, JSON.stringify({ mcpServers: { pry } }));
  const server = await startServer({
    PORT: String(port),
    TOOLPORT_UPSTREAMS: file,
    TOOLPORT_API_KEYS: KEY,
    TOOLPORT_API_KEYS_FILE: keysFile,
    TOOLPORT_BASH_SANDBOX: 'false',
    TOOLPORT_SHUTDOWN_GRACE_MS: '100',
    ...extra,
  });
  t.after(() => kill(server));
  return server;
}

/** The `sleep <marker>` processes the fixture started with setsid (its own command line holds the marker too). */
function sleepers(marker: string): number[] {
  return processesWith(marker).filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').startsWith('sleep\0');
    } catch {
      return false;
    }
  });
}

async function pry(server: ServerProcess): Promise<Pried> {
  const response = await fetch(`${server.url}/tools/pry__pry`, { method: 'POST', headers: AUTH, body: '{}' });
  const body = (await response.json()) as { content: Array<{ text: string }>; isError: boolean };
  assert.equal(body.isError, false, JSON.stringify(body));
  return JSON.parse(body.content[0]!.text) as Pried;
}

describe('a stdio upstream in the sandbox, as an attacker', () => {
  for (const signal of ['SIGTERM', 'SIGKILL'] as const) {
    it(`reads no key, signals nothing of the server, and what it started with setsid ends at the server's ${signal}`, async (t) => {
      if (!requireOrSkip(t, "the upstreams' sandbox (Landlock ABI 6 and Perl)", await sandboxUnavailable())) return;
      const marker = trackedMarker(t);
      const server = await pryingServer(t, marker);
      await server.logLine((line) => line.msg === 'stdio upstreams run in the Landlock sandbox');
      const pried = await pry(server);
      assert.ok(pried.ancestors.includes(server.pid), `toolport (${server.pid}) is among its ancestors ${pried.ancestors.join(', ')}`);
      assert.deepEqual(pried.environ, [], "no process's environment with TOOLPORT_API_KEYS was readable");
      assert.equal(pried.keysFile, null, 'the keys file was not readable');
      assert.deepEqual(pried.signalled, [], 'neither its supervisor nor toolport could be signalled');
      assert.equal(pried.tmp, true, 'it wrote its own TMPDIR');
      assert.equal(pried.connect, 'connected', 'it reached the network, as upstreams may by default');
      assert.equal(sleepers(marker).length, 1, 'the process it started with setsid runs');
      server.child.kill(signal);
      await server.exited;
      await waitFor(() => processesWith(marker).length === 0, `the upstream and its setsid process to end after the server's ${signal}`, 10_000);
    });
  }

  it('with "network": false opens no socket', async (t) => {
    if (!requireOrSkip(t, "the upstreams' sandbox (Landlock ABI 6 and Perl)", await sandboxUnavailable())) return;
    const server = await pryingServer(t, trackedMarker(t), {}, { network: false });
    const pried = await pry(server);
    assert.equal(pried.connect, 'EACCES');
    assert.equal(pried.tmp, true);
  });

  it('past TOOLPORT_UPSTREAM_MAX_PROCESSES is stopped with what it started, and restarted, saying why', async (t) => {
    if (!requireOrSkip(t, "the upstreams' sandbox (Landlock ABI 6 and Perl)", await sandboxUnavailable())) return;
    const server = await pryingServer(t, trackedMarker(t), { TOOLPORT_UPSTREAM_MAX_PROCESSES: '60' });
    const many = trackedMarker(t);
    const response = await fetch(`${server.url}/tools/pry__spawn`, { method: 'POST', headers: AUTH, body: JSON.stringify({ count: 80, marker: many }) });
    assert.equal(response.status, 200);
    const lost = await server.logLine((line) => line.msg === 'upstream lost');
    assert.equal(lost.reason, 'the process went past its bound of processes');
    await waitFor(() => processesWith(many).length === 0, 'what it started to end');
    await server.logLine((line) => line.msg === 'upstream connected' && line !== server.lines.find((l) => l.msg === 'upstream connected'));
  });

  it("reads the keys when the sandbox is turned off, what the sandbox prevents; what it started with setsid still ends at the server's SIGTERM", async (t) => {
    // The control: the same attack works unconfined, so the test above cannot pass by a broken fixture.
    if (!requireOrSkip(t, SUPERVISOR, await reaperUnavailableReason())) return;
    const marker = trackedMarker(t);
    const server = await pryingServer(t, marker, { TOOLPORT_UPSTREAM_SANDBOX: 'false' });
    await server.logLine((line) => line.msg === 'upstream connected');
    const pried = await pry(server);
    assert.ok(pried.environ.includes(server.pid), 'the server environment was readable');
    assert.ok(pried.keysFile?.includes(SCOPED_KEY), 'the keys file was readable');
    await waitFor(() => sleepers(marker).length === 1, 'the process it started with setsid to run');
    server.child.kill('SIGTERM');
    await server.exited;
    await waitFor(() => processesWith(marker).length === 0, "the upstream and its setsid process to end after the server's SIGTERM", 10_000);
  });

  it('past TOOLPORT_UPSTREAM_MAX_PROCESSES with the sandbox turned off is stopped with what it started, and restarted, saying why', async (t) => {
    if (!requireOrSkip(t, SUPERVISOR, await reaperUnavailableReason())) return;
    const server = await pryingServer(t, trackedMarker(t), { TOOLPORT_UPSTREAM_SANDBOX: 'false', TOOLPORT_UPSTREAM_MAX_PROCESSES: '60' });
    await server.logLine((line) => line.msg === 'upstream connected');
    const many = trackedMarker(t);
    const response = await fetch(`${server.url}/tools/pry__spawn`, { method: 'POST', headers: AUTH, body: JSON.stringify({ count: 80, marker: many }) });
    assert.equal(response.status, 200);
    const lost = await server.logLine((line) => line.msg === 'upstream lost');
    assert.equal(lost.reason, 'the process went past its bound of processes');
    await waitFor(() => processesWith(many).length === 0, 'what it started to end');
  });
});

/** A server whose upstream `daemon` leaves a setsid'd and a double-forked `sleep <marker>` behind, with the sandbox turned off. */
async function daemonizingServer(t: Cleanup, marker: string, extra: Record<string, string> = {}): Promise<ServerProcess> {
  const dir = await temporaryDirectory(t);
  const file = path.join(dir, 'upstreams.json');
  await writeFile(file, JSON.stringify({ mcpServers: { daemon: { command: process.execPath, args: [DAEMONIZING, escapees(marker)] } } }));
  const server = await startServer({
    TOOLPORT_UPSTREAMS: file,
    TOOLPORT_API_KEYS: KEY,
    TOOLPORT_UPSTREAM_SANDBOX: 'false',
    TOOLPORT_BASH_SANDBOX: 'false',
    TOOLPORT_SHUTDOWN_GRACE_MS: '100',
    ...extra,
  });
  t.after(() => kill(server));
  await server.logLine((line) => line.msg === 'upstream connected');
  return server;
}

/** The parent of a process, from /proc. */
function parentOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
}

/** The upstream's two daemons, once both run: each a child of the supervisor, which took them in as their parents left. */
async function daemons(marker: string): Promise<number[]> {
  await waitFor(() => sleepers(marker).length === 2, 'the setsid and double-forked daemons to run');
  const pids = sleepers(marker);
  for (const pid of pids)
    assert.equal(readFileSync(`/proc/${parentOf(pid)}/cmdline`, 'utf8'), 'toolport-supervisor\0', `the supervisor is the parent of ${pid}`);
  return pids;
}

async function call(server: ServerProcess, tool: string): Promise<void> {
  await (await fetch(`${server.url}/tools/daemon__${tool}`, { method: 'POST', headers: AUTH, body: '{}' })).body?.cancel();
}

describe('a stdio upstream with the sandbox turned off, under the supervisor, as an attacker', () => {
  it('what it started with setsid and by a double fork ends when toolport stops it, and the server runs on', async (t) => {
    if (!requireOrSkip(t, SUPERVISOR, await reaperUnavailableReason())) return;
    const marker = trackedMarker(t);
    const server = await daemonizingServer(t, marker);
    assert.ok(
      server.lines.some(
        (line) =>
          line.msg ===
          "stdio upstreams run without a sandbox, under the reaper's supervisor: they can read what the server's user can, the server's keys included; what they start ends with them",
      ),
    );
    const pids = await daemons(marker);
    await call(server, 'garble');
    const lost = await server.logLine((line) => line.msg === 'upstream lost');
    assert.match(String(lost.reason), /not a JSON-RPC message/);
    await waitFor(() => !pids.some(isAlive), 'the daemons to end when toolport stopped the upstream');
    assert.equal(server.child.exitCode, null, 'the server runs on');
  });

  it('what it started with setsid and by a double fork ends when it exits by itself', async (t) => {
    if (!requireOrSkip(t, SUPERVISOR, await reaperUnavailableReason())) return;
    const marker = trackedMarker(t);
    const server = await daemonizingServer(t, marker);
    const pids = await daemons(marker);
    await call(server, 'exit');
    const lost = await server.logLine((line) => line.msg === 'upstream lost');
    assert.equal(lost.reason, 'the process exited with status 3');
    await waitFor(() => !pids.some(isAlive), 'the daemons to end when the upstream exited');
  });

  for (const signal of ['SIGTERM', 'SIGKILL'] as const) {
    it(`what it started with setsid and by a double fork ends at the server's ${signal}`, async (t) => {
      if (!requireOrSkip(t, SUPERVISOR, await reaperUnavailableReason())) return;
      const marker = trackedMarker(t);
      const server = await daemonizingServer(t, marker);
      await daemons(marker);
      server.child.kill(signal);
      await server.exited;
      await waitFor(() => processesWith(marker).length === 0, `the upstream and its daemons to end after the server's ${signal}`, 10_000);
    });
  }

  it('where the sandbox cannot run (auto; here no private directory can be made), runs upstreams under the supervisor, and what they start ends with them', async (t) => {
    if (!requireOrSkip(t, SUPERVISOR, await reaperUnavailableReason())) return;
    const marker = trackedMarker(t);
    // A TMPDIR that is a file holds no private directory, as a read-only /tmp would not; tsx,
    // which caches there, is told not to.
    const notADirectory = path.join(await temporaryDirectory(t), 'file');
    await writeFile(notADirectory, '');
    const server = await daemonizingServer(t, marker, { TOOLPORT_UPSTREAM_SANDBOX: 'auto', TMPDIR: notADirectory, TSX_DISABLE_CACHE: '1' });
    const said = server.lines.find(
      (line) =>
        line.msg ===
        "stdio upstreams run without a sandbox, under the reaper's supervisor: they can read what the server's user can, the server's keys included; what they start ends with them",
    );
    assert.match(String(said?.reason), /^no private directory for upstreams can be made/);
    await daemons(marker);
    server.child.kill('SIGKILL');
    await server.exited;
    await waitFor(() => processesWith(marker).length === 0, "the upstream and its daemons to end after the server's SIGKILL", 10_000);
  });

  it('runs upstreams as process groups where Perl is missing, and says once that what they start with setsid can outlive them', async (t) => {
    const marker = trackedMarker(t);
    await pathWithOnly(t, ['sh', 'setsid', 'sleep', 'cut']);
    const server = await daemonizingServer(t, marker);
    const said = server.lines.filter((line) => typeof line.msg === 'string' && line.msg.startsWith('stdio upstreams run without'));
    assert.deepEqual(
      said.map((line) => [line.msg, line.reason]),
      [
        [
          "stdio upstreams run without a sandbox or the reaper's supervisor: they can read what the server's user can, the server's keys included, and what they start with setsid can outlive them",
          'TOOLPORT_UPSTREAM_SANDBOX=false',
        ],
      ],
    );
    assert.match(String(said[0]!.supervisor), /perl was not found/);
    await waitFor(() => sleepers(marker).length === 2, 'the daemons to run');
  });
});

describe('the reference everything server in the sandbox', () => {
  it('lists its tools and answers a call', async (t) => {
    if (!requireOrSkip(t, "the upstreams' sandbox (Landlock ABI 6 and Perl)", await sandboxUnavailable())) return;
    const dir = await temporaryDirectory(t);
    const file = path.join(dir, 'upstreams.json');
    await writeFile(file, JSON.stringify({ mcpServers: { every: { command: process.execPath, args: [EVERYTHING, 'stdio'] } } }));
    const server = await startServer({ TOOLPORT_UPSTREAMS: file, TOOLPORT_BASH_SANDBOX: 'false' });
    t.after(() => kill(server));
    await server.logLine((line) => line.msg === 'stdio upstreams run in the Landlock sandbox');
    const client = await httpClient('v2-legacy', server.url);
    try {
      const { tools } = await client.listTools();
      assert.ok(tools.some((tool) => tool.name === 'every__echo'));
      assert.deepEqual((await client.callTool('every__echo', { message: 'confined' })).content, [{ type: 'text', text: 'Echo: confined' }]);
    } finally {
      await client.close();
    }
  });
});

/** Runs a launch to its end with no input: its exit code, signal and what it wrote. */
function run(file: string, args: readonly string[], env: Record<string, string>, cwd?: string): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, [...args], { env, cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += String(chunk)));
    child.stderr.on('data', (chunk: Buffer) => (output += String(chunk)));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, output }));
  });
}

describe('UpstreamConfinement', () => {
  it("ends what the upstream started with setsid when the upstream exits by itself, and exits with the upstream's status", async (t) => {
    const confinement = await UpstreamConfinement.open([]);
    if (!requireOrSkip(t, "the upstreams' sandbox (Landlock ABI 6 and Perl)", typeof confinement === 'string' ? confinement : undefined)) return;
    if (typeof confinement === 'string') return;
    t.after(() => confinement.close());
    const marker = trackedMarker(t);
    const env = { PATH: process.env.PATH ?? '/usr/bin:/bin' };
    const launch = await confinement.launch('sh', ['-c', `setsid sleep ${marker} </dev/null >/dev/null 2>&1 & sleep 0.2; exit 7`], {
      cwd: undefined,
      env,
      network: true,
    });
    t.after(() => launch.release());
    const { code } = await run(launch.file, launch.args, launch.env);
    assert.equal(code, 7);
    assert.equal(sleepers(marker).length, 0, 'the setsid process ended before the supervisor exited');
  });

  it("hides the secrets, the server's directory is read-only, and the upstream writes its cwd, HOME and TMPDIR", async (t) => {
    const dir = await temporaryDirectory(t);
    const [secrets, cwd, home] = [path.join(dir, 'secrets'), path.join(dir, 'cwd'), path.join(dir, 'home')];
    await Promise.all([mkdir(secrets), mkdir(cwd), mkdir(home)]);
    const keys = path.join(secrets, 'keys.json');
    await writeFile(keys, SCOPED_KEY);
    const beside = path.join(dir, 'beside.txt');
    await writeFile(beside, 'readable');
    const confinement = await UpstreamConfinement.open([keys]);
    if (!requireOrSkip(t, "the upstreams' sandbox (Landlock ABI 6 and Perl)", typeof confinement === 'string' ? confinement : undefined)) return;
    if (typeof confinement === 'string') return;
    t.after(() => confinement.close());
    // touch, not `: >`: sh exits when a special built-in's redirection fails.
    const script = [
      `cat ${keys} 2>/dev/null && echo 'read the keys'`,
      `cat ${beside} >/dev/null || echo 'could not read beside the keys'`,
      `touch ${path.join(process.cwd(), 'upstream-was-here')} 2>/dev/null && echo "wrote the server's directory"`,
      `touch ${path.join(cwd, 'f')} || echo 'could not write its cwd'`,
      `touch ${path.join(home, 'f')} || echo 'could not write its HOME'`,
      `touch "$TMPDIR/f" || echo 'could not write its TMPDIR'`,
      `touch ${path.join(dir, 'f')} 2>/dev/null && echo 'wrote elsewhere'`,
      'echo done',
    ].join('; ');
    const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home };
    const launch = await confinement.launch('sh', ['-c', script], { cwd, env, network: false });
    t.after(() => launch.release());
    assert.deepEqual(await run(launch.file, launch.args, launch.env, cwd), { code: 0, output: 'done\n' });
  });

  it("keeps the server's directory read-only even below the HOME it may write", async (t) => {
    const confinement = await UpstreamConfinement.open([]);
    if (!requireOrSkip(t, "the upstreams' sandbox (Landlock ABI 6 and Perl)", typeof confinement === 'string' ? confinement : undefined)) return;
    if (typeof confinement === 'string') return;
    t.after(() => confinement.close());
    const target = path.join(process.cwd(), 'upstream-was-here');
    const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: path.dirname(process.cwd()) };
    const launch = await confinement.launch('sh', ['-c', `touch ${target} 2>/dev/null && echo wrote; cat package.json >/dev/null && echo read`], {
      cwd: undefined,
      env,
      network: false,
    });
    t.after(() => launch.release());
    assert.deepEqual(await run(launch.file, launch.args, launch.env), { code: 0, output: 'read\n' });
  });

  it("supervised without the sandbox, ends what the upstream started with setsid and a double fork when it exits by itself, and exits with the upstream's status", async (t) => {
    const supervisor = await UpstreamConfinement.supervised('the sandbox is off in this test');
    if (!requireOrSkip(t, SUPERVISOR, typeof supervisor === 'string' ? supervisor : undefined)) return;
    if (typeof supervisor === 'string') return;
    assert.equal(supervisor.confined, false);
    const marker = trackedMarker(t);
    const env = { PATH: process.env.PATH ?? '/usr/bin:/bin' };
    const launch = await supervisor.launch('sh', ['-c', `${escapees(marker)}; exit 7`], { cwd: undefined, env, network: true });
    assert.deepEqual(launch.env, env, 'no private TMPDIR without the sandbox');
    const { code } = await run(launch.file, launch.args, launch.env);
    assert.equal(code, 7);
    assert.deepEqual(sleepers(marker), [], 'the setsid and double-forked processes ended before the supervisor exited');
  });

  it("supervised without the sandbox, the upstream keeps the server's rights: no capability dropped, no_new_privs unset, also with bounds to watch", async (t) => {
    const supervisor = await UpstreamConfinement.supervised('the sandbox is off in this test', { maxProcesses: 100, maxMemory: 1 << 30, tmpSize: 1 << 30 });
    if (!requireOrSkip(t, SUPERVISOR, typeof supervisor === 'string' ? supervisor : undefined)) return;
    if (typeof supervisor === 'string') return;
    assert.deepEqual(supervisor.limits, { maxProcesses: 100, maxMemory: 1 << 30, tmpSize: 0 }, 'no TMPDIR to bound without the sandbox');
    const launch = await supervisor.launch('grep', ['-E', '^(CapBnd|CapEff|NoNewPrivs):', '/proc/self/status'], {
      cwd: undefined,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
      network: true,
    });
    const own = readFileSync('/proc/self/status', 'utf8')
      .split('\n')
      .filter((line) => /^(CapBnd|CapEff|NoNewPrivs):/.test(line));
    assert.deepEqual(await run(launch.file, launch.args, launch.env), { code: 0, output: `${own.join('\n')}\n` });
  });

  it('supervised without the sandbox, refuses "network": false, which only the sandbox can hold', async (t) => {
    const supervisor = await UpstreamConfinement.supervised('TOOLPORT_UPSTREAM_SANDBOX=false');
    if (!requireOrSkip(t, SUPERVISOR, typeof supervisor === 'string' ? supervisor : undefined)) return;
    if (typeof supervisor === 'string') return;
    await assert.rejects(supervisor.launch('sh', ['-c', 'exit 0'], { cwd: undefined, env: {}, network: false }), {
      message: 'cannot run "sh": it has "network": false, and the sandbox that would hold it cannot run here (TOOLPORT_UPSTREAM_SANDBOX=false)',
    });
  });

  it("runs the supervisor's Perl found on the server's PATH, whatever PATH the upstream's own environment sets", async (t) => {
    const supervisor = await UpstreamConfinement.supervised('the sandbox is off in this test');
    if (!requireOrSkip(t, SUPERVISOR, typeof supervisor === 'string' ? supervisor : undefined)) return;
    if (typeof supervisor === 'string') return;
    const launch = await supervisor.launch('/bin/sh', ['-c', 'echo "$PATH"'], { cwd: undefined, env: { PATH: '/nowhere' }, network: true });
    assert.deepEqual(await run(launch.file, launch.args, launch.env), { code: 0, output: '/nowhere\n' });
  });

  it('the supervisor cannot be tried without Perl, and says so', async () => {
    assert.match(String(await UpstreamConfinement.supervised('off', undefined, 'no-such-perl')), /^no-such-perl was not found on PATH/);
  });

  it('a confinement field that cannot be applied stops the command before it runs (126)', async (t) => {
    const syscalls = REAPER_SYSCALLS[process.arch];
    if (!requireOrSkip(t, 'the reaper', syscalls === undefined ? `no system-call numbers for ${process.arch}` : undefined)) return;
    const args = [REAPER_SCRIPT, 'supervise', String(syscalls!.prctl), String(syscalls!.rtSigprocmask), String(syscalls!.capset)];
    const ran = await run('perl', [...args, String(process.pid), '1000', '1', 'landlock 99 1 0 0', '--', 'sh', '-c', 'echo ran'], {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
    });
    assert.equal(ran.code, 126);
    assert.match(ran.output, /^toolport supervisor: Landlock (ABI \d+ is here, and 99 is needed|is not available here)/);
    assert.doesNotMatch(ran.output, /ran/);
  });
});
