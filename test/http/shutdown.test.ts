import assert from 'node:assert/strict';
import { request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { ToolRegistry } from '#src/core/registry.js';
import { buildApp } from '#src/http/app.js';
import { Echo } from '#src/tools/echo.js';
import { controllableTool } from '../fixtures/tools.js';

async function listening(tools: ReturnType<typeof controllableTool>['tool'][]) {
  const registry = new ToolRegistry().register(Echo);
  for (const tool of tools) registry.register(tool);
  const app = await buildApp({ registry });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as AddressInfo;
  return { app, url: `http://127.0.0.1:${port}` };
}

test('shutdown lets a call in flight finish, while new calls and readiness get 503', async (t) => {
  const slow = controllableTool();
  const { app, url } = await listening([slow.tool]);
  t.after(() => app.close());

  const inFlight = fetch(`${url}/tools/Slow`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  await slow.started;
  const closed = app.toolport.shutdown(60_000);
  assert.equal(app.toolport.draining, true);

  const refused = await app.inject({ method: 'POST', url: '/tools/Echo', payload: { text: 'late' } });
  assert.equal(refused.statusCode, 503);
  assert.deepEqual(refused.json(), {
    content: [{ type: 'text', text: 'The server is shutting down; retry on another instance.' }],
    isError: true,
    error: { code: 'SHUTTING_DOWN', message: 'The server is shutting down; retry on another instance.' },
  });
  assert.equal((await app.inject({ url: '/readyz' })).statusCode, 503);
  assert.equal((await app.inject({ url: '/healthz' })).statusCode, 200);

  slow.release('finished');
  const res = await inFlight;
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), { content: [{ type: 'text', text: 'finished' }], isError: false });
  await closed;
});

test('shutdown aborts calls still running after the grace period, through their signal', async (t) => {
  const slow = controllableTool();
  const { app, url } = await listening([slow.tool]);
  t.after(() => app.close());

  const inFlight = fetch(`${url}/tools/Slow`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  await slow.started;
  const closed = app.toolport.shutdown(10);
  const reason = await slow.aborted;
  assert.match(String(reason), /the server is shutting down/);
  const res = await inFlight;
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), {
    content: [{ type: 'text', text: 'Tool "Slow" was aborted: the server is shutting down.' }],
    isError: true,
  });
  await closed;
});

test('a call whose client disconnects is aborted through its signal', async (t) => {
  const slow = controllableTool();
  const { app, url } = await listening([slow.tool]);
  t.after(() => app.close());

  const req = request(`${url}/tools/Slow`, { method: 'POST', headers: { 'content-type': 'application/json' } });
  req.on('error', () => {});
  req.end('{}');
  await slow.started;
  req.destroy();
  const reason = await slow.aborted;
  assert.match(String(reason), /the client disconnected/);
});

test('a call whose body is still arriving when shutdown begins is refused with 503 and never runs', async (t) => {
  const slow = controllableTool();
  const app = await buildApp({ registry: new ToolRegistry().register(slow.tool) });
  t.after(() => app.close());
  let markHeadersIn!: () => void;
  const headersIn = new Promise<void>((resolve) => (markHeadersIn = resolve));
  // preParsing runs after the onRequest hooks (the draining check among them), before the body is read.
  app.addHook('preParsing', async () => markHeadersIn());
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as AddressInfo;
  let ran = false;
  void slow.started.then(() => (ran = true));

  const response = new Promise<{ status: number; body: string; connection: string | undefined }>((resolve, reject) => {
    const req = request(
      `http://127.0.0.1:${port}/tools/Slow`,
      { method: 'POST', headers: { 'content-type': 'application/json', 'content-length': '2' } },
      (res) => {
        let body = '';
        res.on('data', (chunk) => (body += String(chunk)));
        res.on('end', () => resolve({ status: res.statusCode!, body, connection: res.headers.connection }));
      },
    );
    req.on('error', reject);
    // Headers and half the body now; the rest once the request is past its onRequest hooks and shutdown has begun.
    req.write('{');
    void headersIn.then(() => {
      void app.toolport.shutdown(60_000);
      req.end('}');
    });
  });
  const res = await response;
  assert.equal(res.status, 503);
  assert.equal(JSON.parse(res.body).error.code, 'SHUTTING_DOWN');
  assert.equal(res.connection, 'close');
  assert.equal(ran, false);
});
