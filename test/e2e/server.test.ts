import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { test } from 'node:test';
import { Cleanups, temporaryDirectory } from '../support/workspace.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const PLUGIN = path.join(ROOT, 'test/fixtures/e2e-plugin.ts');

interface Server {
  child: ChildProcess;
  url: string;
  /** Resolves with the first log line for which `match` is true. */
  logLine(match: (line: Record<string, unknown>) => boolean): Promise<Record<string, unknown>>;
  exited: Promise<number | null>;
}

/** Starts the real entry point on an ephemeral port and learns the port from its log. */
async function startServer(env: Record<string, string>): Promise<Server> {
  const cleanups = new Cleanups();
  const workspace = await temporaryDirectory(cleanups, 'toolport-e2e-');
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/server.ts'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, PORT: '0', TOOLPORT_WORKSPACE: workspace, TOOLPORT_PLUGINS: PLUGIN, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  void exited.then(() => cleanups.run());
  const watchers: Array<{ match: (l: Record<string, unknown>) => boolean; resolve: (l: Record<string, unknown>) => void }> = [];
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += String(d)));
  createInterface({ input: child.stdout! }).on('line', (text) => {
    const line = JSON.parse(text) as Record<string, unknown>;
    for (const w of watchers.filter((w) => w.match(line))) {
      watchers.splice(watchers.indexOf(w), 1);
      w.resolve(line);
    }
  });
  const logLine = (match: (l: Record<string, unknown>) => boolean) => new Promise<Record<string, unknown>>((resolve) => watchers.push({ match, resolve }));
  const listening = await Promise.race([
    logLine((l) => typeof l.msg === 'string' && l.msg.startsWith('Server listening at')),
    exited.then((code) => {
      throw new Error(`server exited with ${code}: ${stderr}`);
    }),
  ]);
  const url = String(listening.msg).replace('Server listening at ', '');
  return { child, url, logLine, exited };
}

test('the server process serves the tool list and runs a tool over real HTTP', async (t) => {
  const server = await startServer({});
  t.after(() => server.child.kill('SIGKILL'));
  const list = await fetch(`${server.url}/tools`);
  assert.equal(list.status, 200);
  const names = ((await list.json()) as Array<{ name: string }>).map((tool) => tool.name);
  assert.ok(names.includes('Echo') && names.includes('Wait'), names.join());

  const call = await fetch(`${server.url}/tools/Echo`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ text: 'over the wire' }),
  });
  assert.equal(call.status, 200);
  assert.deepEqual(await call.json(), { content: [{ type: 'text', text: 'over the wire' }], isError: false });

  const doc = await fetch(`${server.url}/openapi.json`);
  assert.equal(((await doc.json()) as { openapi: string }).openapi, '3.1.0');
  const docs = await fetch(`${server.url}/docs`);
  assert.equal(docs.status, 200);
  assert.match(await docs.text(), /swagger/i);
});

test('SIGTERM lets a call in flight finish, then the process exits 0', async () => {
  const server = await startServer({});
  const started = server.logLine((l) => l.msg === 'wait started');
  const call = fetch(`${server.url}/tools/Wait`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"ms":300}' });
  await started;
  server.child.kill('SIGTERM');
  const res = await call;
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), { content: [{ type: 'text', text: 'waited 300 ms' }], isError: false });
  assert.equal(await server.exited, 0);
});

test('SIGTERM aborts a call still running after the grace period, then the process exits 0', async () => {
  const server = await startServer({ TOOLPORT_SHUTDOWN_GRACE_MS: '50' });
  const started = server.logLine((l) => l.msg === 'wait started');
  const call = fetch(`${server.url}/tools/Wait`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"ms":600000}' });
  await started;
  server.child.kill('SIGTERM');
  const res = await call;
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), {
    content: [{ type: 'text', text: 'Tool "Wait" was aborted: the server is shutting down.' }],
    isError: true,
  });
  assert.equal(await server.exited, 0);
});

test('a bad variable stops start-up with a message naming it and exit status 1', async () => {
  await assert.rejects(startServer({ PORT: 'eighty' }), /server exited with 1: toolport: Invalid PORT: expected an integer from 0 to 65535, got "eighty"/);
});

test('a plug-in that fails to load stops start-up with a message naming it', async () => {
  await assert.rejects(
    startServer({ TOOLPORT_PLUGINS: './no/such/plugin.js' }),
    /server exited with 1: toolport: Plug-in "\.\/no\/such\/plugin\.js" failed to load: /,
  );
});

test('SIGINT shuts down gracefully too, and the process exits 0', async () => {
  const server = await startServer({});
  const stopped = server.logLine((l) => l.msg === 'stopped');
  server.child.kill('SIGINT');
  await stopped;
  assert.equal(await server.exited, 0);
});
