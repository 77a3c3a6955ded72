import assert from 'node:assert/strict';
import { readdirSync, readlinkSync } from 'node:fs';
import { rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { test, type TestContext } from 'node:test';
import { kill, startServer, type ServerProcess } from '../support/server-process.js';
import { temporaryDirectory } from '../support/workspace.js';

const HOLD = path.resolve(import.meta.dirname, '../fixtures/hold-plugin.ts');
const key = (label: string, tools?: string[]) => ({ label, key: `${label}-secret-0123456789abcdef`, ...(tools && { tools }) });
const ADMIN = key('admin');
const BOT = key('bot');
const NEWCOMER = key('newcomer', ['Echo']);
const INVALID = {
  content: [{ type: 'text', text: 'The API key is not valid.' }],
  isError: true,
  error: { code: 'UNAUTHORIZED', message: 'The API key is not valid.' },
};

/** A directory outside the server's workspace for the keys file; written by rename, as an operator's tools should. */
async function keysDirectory(t: TestContext) {
  const dir = await temporaryDirectory(t, 'toolport-reload-e2e-');
  const file = path.join(dir, 'keys.json');
  const write = async (contents: unknown): Promise<void> => {
    await writeFile(`${file}.new`, typeof contents === 'string' ? contents : JSON.stringify(contents));
    await rename(`${file}.new`, file);
  };
  return { dir, file, write };
}

async function start(t: TestContext, env: Record<string, string>): Promise<ServerProcess> {
  const server = await startServer({ TOOLPORT_PLUGINS: HOLD, TOOLPORT_TOOLS: 'Echo,Hold', TOOLPORT_BASH_SANDBOX: 'false', ...env });
  t.after(() => kill(server));
  return server;
}

function echo(server: ServerProcess, who: { key: string }): Promise<Response> {
  return fetch(`${server.url}/tools/Echo`, {
    method: 'POST',
    headers: { authorization: `Bearer ${who.key}`, 'content-type': 'application/json' },
    body: '{"text":"hi"}',
  });
}

/** Polls `probe` until it gives a value, or fails after `timeoutMs`. */
async function eventually<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Stops the server as an orchestrator would and checks it drained and exited 0: SIGHUP left it whole. */
async function stopsCleanly(server: ServerProcess): Promise<void> {
  server.child.kill('SIGTERM');
  assert.equal(await server.exited, 0);
  assert.ok(server.lines.some((l) => l.msg === 'stopped'));
}

test('SIGHUP reloads the keys file: a removed key is refused from its next request on, its call under way finishes, and the process runs on', async (t) => {
  const keys = await keysDirectory(t);
  await keys.write([ADMIN, BOT]);
  const server = await start(t, { TOOLPORT_API_KEYS_FILE: keys.file });
  // Kept-alive connections on which the key was accepted, and its token remembered.
  const warm = await Promise.all(Array.from({ length: 10 }, () => echo(server, BOT)));
  assert.deepEqual(new Set(warm.map((r) => r.status)), new Set([200]));
  await Promise.all(warm.map((r) => r.arrayBuffer()));

  const release = path.join(keys.dir, 'release');
  const started = server.logLine((l) => l.msg === 'hold started');
  const held = fetch(`${server.url}/tools/Hold`, {
    method: 'POST',
    headers: { authorization: `Bearer ${BOT.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ until: release }),
  });
  await started;

  await keys.write([{ ...ADMIN, tools: ['Echo'] }, NEWCOMER]);
  server.child.kill('SIGHUP');
  const refused = await eventually('the removed key is refused', async () => {
    const res = await echo(server, BOT);
    return res.status === 401 ? res : (await res.arrayBuffer(), undefined);
  });
  assert.equal(refused.headers.get('www-authenticate'), 'Bearer realm="toolport", error="invalid_token"');
  assert.deepEqual(await refused.json(), INVALID);
  const reloaded = await server.logLine((l) => l.msg === 'API keys reloaded');
  assert.deepEqual([reloaded.keyLabels, reloaded.added, reloaded.removed, reloaded.changed], [['admin', 'newcomer'], ['newcomer'], ['bot'], ['admin']]);

  // Many at once, as a client that lost its key would keep trying: every one refused.
  const burst = await Promise.all(Array.from({ length: 100 }, () => echo(server, BOT)));
  assert.deepEqual(new Set(burst.map((r) => r.status)), new Set([401]));
  await Promise.all(burst.map((r) => r.arrayBuffer()));
  assert.equal((await echo(server, NEWCOMER)).status, 200);
  assert.equal((await echo(server, ADMIN)).status, 200);
  const outOfScope = await fetch(`${server.url}/tools/Hold`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ until: release }),
  });
  assert.equal(outOfScope.status, 403);
  assert.equal(((await outOfScope.json()) as { error: { code: string } }).error.code, 'FORBIDDEN');

  await writeFile(release, '');
  const answer = await held;
  assert.equal(answer.status, 200);
  assert.deepEqual(await answer.json(), { content: [{ type: 'text', text: 'released' }], isError: false });
  assert.equal(server.child.exitCode, null);
  assert.equal((await fetch(`${server.url}/healthz`)).status, 200);
  assert.doesNotMatch(JSON.stringify(server.lines), /secret-0123456789/);
  await stopsCleanly(server);
});

test('SIGHUP with a broken keys file keeps the keys in use and logs why in one warning that shows no key', async (t) => {
  const keys = await keysDirectory(t);
  await keys.write([ADMIN, BOT]);
  const server = await start(t, { TOOLPORT_API_KEYS_FILE: keys.file });
  const file = JSON.stringify(keys.file);
  const cases: Array<[unknown, string]> = [
    [`[{"label": "admin",, "key": "${ADMIN.key}"}]`, `Invalid TOOLPORT_API_KEYS_FILE ${file}: it is not valid JSON (line 1, column 20).`],
    [[ADMIN, { ...BOT, key: ADMIN.key }], `Invalid TOOLPORT_API_KEYS_FILE ${file}: entry 2 ("bot") has the same key as entry 1 ("admin").`],
    [
      [ADMIN, key('bot', ['Read'])],
      `Invalid TOOLPORT_API_KEYS_FILE ${file}: entry 2 ("bot"): "tools" names "Read", which is not served (served tools: Echo, Hold).`,
    ],
  ];
  for (const [i, [contents, reason]] of cases.entries()) {
    await keys.write(contents);
    server.child.kill('SIGHUP');
    // One warning per reload, in order: this reload's is the i-th.
    const line = await eventually('the warning', async () => server.lines.filter((l) => l.msg === 'API keys not reloaded; the keys in use are kept')[i]);
    assert.equal(line.level, 40);
    assert.equal(line.reason, reason);
    for (const who of [ADMIN, BOT]) assert.equal((await echo(server, who)).status, 200, `${reason}: ${who.label}`);
  }
  assert.equal(server.lines.filter((l) => l.msg === 'API keys reloaded').length, 0);
  assert.doesNotMatch(JSON.stringify(server.lines), /secret-0123456789/);
  assert.equal(server.child.exitCode, null);
  await stopsCleanly(server);
});

test('SIGHUP without a keys file logs that there is nothing to reload, and the process runs on', async (t) => {
  const server = await start(t, {});
  server.child.kill('SIGHUP');
  const line = await server.logLine((l) => l.msg === 'nothing to reload: no keys file is configured (TOOLPORT_API_KEYS_FILE)');
  assert.equal(line.level, 40);
  const res = await fetch(`${server.url}/tools/Echo`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"text":"still here"}' });
  assert.equal(res.status, 200);
  await stopsCleanly(server);
});

test('SIGHUPs all through start-up never end the server, and one that came after the keys were read reloads them once serving', async (t) => {
  const keys = await keysDirectory(t);
  await keys.write([ADMIN, BOT]);
  const { spawn } = await import('node:child_process');
  const workspace = await temporaryDirectory(t, 'toolport-hup-start-');
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/server.ts'], {
    cwd: path.resolve(import.meta.dirname, '../..'),
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      PORT: '0',
      TOOLPORT_WORKSPACE: workspace,
      TOOLPORT_BASH_SANDBOX: 'false',
      TOOLPORT_API_KEYS_FILE: keys.file,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  t.after(() => child.kill('SIGKILL'));
  let out = '';
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  let exitCode: number | null | undefined;
  void exited.then((code) => (exitCode = code));
  // From the moment serve() holds the workspace open (its first step after reading the
  // configuration, before the keys are read and long before the server listens) until it listens:
  // the keys change on the way, so a reload shows.
  const holdsWorkspace = (): boolean => {
    try {
      return readdirSync(`/proc/${child.pid}/fd`).some((fd) => {
        try {
          return readlinkSync(`/proc/${child.pid}/fd/${fd}`) === workspace;
        } catch {
          return false;
        }
      });
    } catch {
      return false;
    }
  };
  await eventually('the server to open its workspace', async () => (holdsWorkspace() ? true : undefined));
  let sent = 0;
  let changed = false;
  while (!/Server listening at/.test(out)) {
    assert.equal(exitCode, undefined, `the server exited (${exitCode}) after ${sent} SIGHUPs during start-up: ${out.slice(-500)}`);
    child.kill('SIGHUP');
    sent++;
    if (sent === 5) {
      await keys.write([ADMIN]);
      changed = true;
    }
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  assert.ok(sent > 5 && changed, `SIGHUPs sent during start-up: ${sent}`);
  const url = /Server listening at (http:\/\/[^"]+)/.exec(out)![1]!;
  const server = { url } as ServerProcess;
  // Whichever SIGHUP came last before the handlers, the file as it is now is what the server uses.
  await eventually('the bot key to be refused', async () => ((await echo(server, BOT)).status === 401 ? true : undefined));
  assert.equal((await echo(server, ADMIN)).status, 200);
  child.kill('SIGTERM');
  assert.equal(await exited, 0);
});
