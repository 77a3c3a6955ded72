import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { startServer as startServerProcess, type ServerProcess } from '../support/server-process.js';

const PLUGIN = path.resolve(import.meta.dirname, '../fixtures/e2e-plugin.ts');

/** The real server with the fixture plug-in (its Wait tool), unless `env` names other plug-ins. */
const startServer = (env: Record<string, string>): Promise<ServerProcess> => startServerProcess({ TOOLPORT_PLUGINS: PLUGIN, ...env });

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
