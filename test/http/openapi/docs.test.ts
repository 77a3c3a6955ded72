import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ToolRegistry } from '#src/core/registry.js';
import { buildApp } from '#src/http/app.js';
import { Echo } from '#src/tools/echo.js';

async function app(t: { after(fn: () => Promise<unknown>): void }) {
  const built = await buildApp({ registry: new ToolRegistry().register(Echo) });
  t.after(() => built.close());
  return built;
}

test('GET /docs/ serves the API browser, its files, and the app\'s own document', async (t) => {
  const server = await app(t);
  const page = await server.inject({ url: '/docs/' });
  assert.equal(page.statusCode, 200);
  assert.match(page.headers['content-type'] as string, /^text\/html/);
  assert.match(page.body, /swagger-ui/i);
  const css = await server.inject({ url: '/docs/static/swagger-ui.css' });
  assert.equal(css.statusCode, 200);
  assert.match(css.headers['content-type'] as string, /^text\/css/);
  assert.deepEqual((await server.inject({ url: '/docs/json' })).json(), (await server.inject({ url: '/openapi.json' })).json());
  // Every answer carries the app's request id: these routes run the app's hooks.
  assert.ok(css.headers['x-request-id']);
});

test('GET /docs/ files answer a conditional GET with 304 and a HEAD with the length and no body', async (t) => {
  const server = await app(t);
  const css = await server.inject({ url: '/docs/static/swagger-ui.css' });
  const again = await server.inject({ url: '/docs/static/swagger-ui.css', headers: { 'if-none-match': css.headers.etag as string } });
  assert.equal(again.statusCode, 304);
  assert.equal(again.body, '');
  const head = await server.inject({ method: 'HEAD', url: '/docs/static/swagger-ui.css' });
  assert.equal(head.statusCode, 200);
  assert.equal(head.headers['content-length'], String(css.rawPayload.length));
  assert.equal(head.body, '');
});

test('a path below /docs that is not the browser\'s answers 404 in the error-body shape', async (t) => {
  const server = await app(t);
  const res = await server.inject({ url: '/docs/nothing-here' });
  assert.equal(res.statusCode, 404);
  assert.deepEqual(res.json(), {
    content: [{ type: 'text', text: 'Route GET /docs/nothing-here not found.' }],
    isError: true,
    error: { code: 'ROUTE_NOT_FOUND', message: 'Route GET /docs/nothing-here not found.' },
  });
});
