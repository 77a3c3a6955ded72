import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { test, type TestContext } from 'node:test';
import { Cleanups, temporaryDirectory } from '../support/workspace.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const KEY = 'e2e-secret-0123456789abcdef';

interface Run {
  /** Resolves with the port once the server listens, or rejects with its stderr when it exits first. */
  listening: Promise<number>;
  exited: Promise<number | null>;
  stdout: string[];
  /** Resolves with the first log line with this message, past or future. */
  logged(msg: string): Promise<Record<string, unknown>>;
  stderr(): string;
}

/** Starts the real entry point on an ephemeral port with the given environment (and the built-in tools). */
async function start(t: TestContext, env: Record<string, string>): Promise<Run> {
  const cleanups = new Cleanups();
  const workspace = await temporaryDirectory(cleanups, 'toolport-exposure-');
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/server.ts'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, PORT: '0', TOOLPORT_WORKSPACE: workspace, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  t.after(async () => {
    child.kill('SIGKILL');
    await exited;
    await cleanups.run();
  });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += String(d)));
  const stdout: string[] = [];
  const lines = createInterface({ input: child.stdout });
  lines.on('line', (line) => stdout.push(line));
  const logged = (msg: string) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      const find = (): boolean => {
        const line = stdout.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => String(l.msg).startsWith(msg));
        if (line) resolve(line);
        return line !== undefined;
      };
      if (find()) return;
      const onLine = (): void => void (find() && lines.off('line', onLine));
      lines.on('line', onLine);
      void exited.then((code) => reject(new Error(`server exited with ${code}: ${stderr}`)));
    });
  const listening = logged('Server listening at').then((line) => Number(/:(\d+)$/.exec(String(line.msg))![1]));
  // A test that expects the server to exit never awaits this.
  listening.catch(() => {});
  return { listening, exited, stdout, logged, stderr: () => stderr };
}

test('on 0.0.0.0 with no API keys the server refuses to start, exits 1 and names the three ways out', async (t) => {
  const run = await start(t, { HOST: '0.0.0.0' });
  assert.equal(await run.exited, 1);
  const message = run.stderr();
  assert.match(message, /^toolport: Refusing to serve Bash, TaskStop, Write, Edit without authentication on 0\.0\.0\.0, which is not a loopback address: /);
  assert.match(message, /set TOOLPORT_API_KEYS \(or TOOLPORT_API_KEYS_FILE\)/);
  assert.match(message, /narrow TOOLPORT_TOOLS to read-only tools \(here: Echo, TaskOutput, Read, Glob, Grep, LS\)/);
  assert.match(message, /set TOOLPORT_ALLOW_UNAUTHENTICATED=true/);
  assert.equal(message.split('\n').filter(Boolean).length, 1, 'one line');
});

test('on 0.0.0.0 with TOOLPORT_API_KEYS the server starts and refuses a call without the key', async (t) => {
  const run = await start(t, { HOST: '0.0.0.0', TOOLPORT_API_KEYS: KEY });
  const port = await run.listening;
  const url = `http://127.0.0.1:${port}`;

  const anonymous = await fetch(`${url}/tools/Echo`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"text":"hi"}' });
  assert.equal(anonymous.status, 401);
  assert.equal(anonymous.headers.get('www-authenticate'), 'Bearer realm="toolport"');
  assert.equal(((await anonymous.json()) as { error: { code: string } }).error.code, 'UNAUTHORIZED');

  const authorised = await fetch(`${url}/tools/Echo`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` },
    body: '{"text":"hi"}',
  });
  assert.equal(authorised.status, 200);
  assert.deepEqual(await authorised.json(), { content: [{ type: 'text', text: 'hi' }], isError: false });
  assert.equal((await fetch(`${url}/healthz`)).status, 200);

  const serving = await run.logged('serving tools');
  assert.deepEqual(serving.keyLabels, ['key-1']);
  assert.doesNotMatch(run.stdout.join('\n'), new RegExp(KEY));
});

test('on 0.0.0.0 with TOOLPORT_ALLOW_UNAUTHENTICATED=true the server starts and warns', async (t) => {
  const run = await start(t, { HOST: '0.0.0.0', TOOLPORT_ALLOW_UNAUTHENTICATED: 'true' });
  const warning = await run.logged('serving tools that are not read-only without authentication');
  assert.equal(warning.level, 40);
  assert.deepEqual([...(warning.tools as string[])].sort(), ['Bash', 'Edit', 'TaskStop', 'Write']);
});

test('a bad keys file stops start-up with exit 1 and a message that does not show the key', async (t) => {
  const file = path.join(ROOT, 'test/fixtures/keys/short-key.json');
  const run = await start(t, { TOOLPORT_API_KEYS_FILE: file });
  assert.equal(await run.exited, 1);
  assert.equal(
    run.stderr(),
    `toolport: Invalid TOOLPORT_API_KEYS_FILE "${file}": entry 1 ("ci-bot"): the key is shorter than 16 characters (use a long random secret, e.g. \`openssl rand -hex 32\`).\n`,
  );
});

test('a keys file inside the workspace stops start-up: the file tools could read every key', async (t) => {
  const file = path.join(ROOT, 'test/fixtures/keys/valid.json');
  const run = await start(t, { TOOLPORT_API_KEYS_FILE: file, TOOLPORT_WORKSPACE: ROOT });
  assert.equal(await run.exited, 1);
  assert.equal(
    run.stderr(),
    `toolport: Invalid TOOLPORT_API_KEYS_FILE: ${JSON.stringify(file)} is inside the workspace (TOOLPORT_WORKSPACE), where the file tools can read it; keep it outside\n`,
  );
});
