import assert from 'node:assert/strict';
import { request } from 'node:http';
import { test } from 'node:test';
import { kill, startServer } from '../support/server-process.js';

const WEBUI = 'https://webui.example';

/** A request as a browser would send it from a page; resolves with status, headers and body text. */
function send(url: string, method: string, route: string, headers: Record<string, string>, body?: string) {
  return new Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }>((resolve, reject) => {
    const req = request(`${url}${route}`, { method, agent: false, headers }, (res) => {
      let text = '';
      res.on('data', (chunk) => (text += String(chunk)));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

test("TOOLPORT_CORS_ORIGINS: the real server answers a listed page's preflight and call, and refuses another page's call", async (t) => {
  const srv = await startServer({ TOOLPORT_CORS_ORIGINS: WEBUI, TOOLPORT_BASH_SANDBOX: 'false' });
  t.after(() => kill(srv));

  const preflight = await send(srv.url, 'OPTIONS', '/tools/Echo', {
    origin: WEBUI,
    'access-control-request-method': 'POST',
    'access-control-request-headers': 'content-type',
  });
  assert.equal(preflight.status, 204);
  assert.equal(preflight.headers['access-control-allow-origin'], WEBUI);
  assert.match(String(preflight.headers['access-control-allow-headers']), /Content-Type/);

  const json = { 'content-type': 'application/json' };
  const listed = await send(srv.url, 'POST', '/tools/Echo', { origin: WEBUI, ...json }, '{"text":"hi"}');
  assert.equal(listed.status, 200);
  assert.deepEqual(JSON.parse(listed.body), { content: [{ type: 'text', text: 'hi' }], isError: false });
  assert.equal(listed.headers['access-control-allow-origin'], WEBUI);

  const other = await send(srv.url, 'POST', '/tools/Echo', { origin: 'https://other.example', ...json }, '{"text":"hi"}');
  assert.equal(other.status, 403);
  assert.equal(JSON.parse(other.body).error.code, 'FORBIDDEN');
  assert.equal(other.headers['access-control-allow-origin'], undefined);
});

test('TOOLPORT_CORS_ORIGINS=* with API keys stops start-up with a message naming the variable', async () => {
  await assert.rejects(
    startServer({ TOOLPORT_CORS_ORIGINS: '*', TOOLPORT_API_KEYS: 'cors-e2e-secret-0123456789', TOOLPORT_BASH_SANDBOX: 'false' }),
    /Invalid TOOLPORT_CORS_ORIGINS: expected exact web origins such as https:\/\/app\.example\.com, not a wildcard: with API keys configured, \* would let any web page send calls with a key, got "\*"/,
  );
});
