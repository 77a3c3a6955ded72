import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { request } from 'node:http';
import path from 'node:path';
import { test } from 'node:test';
import { kill, startServer } from '../support/server-process.js';

/** A request with the Host and Origin headers a browser would send; resolves with status and parsed body. */
function send(url: string, method: string, route: string, headers: Record<string, string>, body?: unknown): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${url}${route}`,
      { method, agent: false, headers: { ...headers, ...(body !== undefined && { 'content-type': 'application/json' }) } },
      (res) => {
        let text = '';
        res.on('data', (chunk) => (text += String(chunk)));
        res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
      },
    );
    req.on('error', reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

const forbidden = (message: string) => ({ content: [{ type: 'text', text: message }], isError: true, error: { code: 'FORBIDDEN', message } });

test('TOOLPORT_ALLOW_UNAUTHENTICATED on 0.0.0.0: a page on a rebinding name cannot run Bash, list tools, or pass as an allowed host', async (t) => {
  const srv = await startServer({
    HOST: '0.0.0.0',
    TOOLPORT_ALLOW_UNAUTHENTICATED: 'true',
    TOOLPORT_ALLOWED_HOSTS: 'toolport.test',
    TOOLPORT_ALLOWED_ORIGINS: 'https://app.example',
  });
  t.after(() => kill(srv));
  const port = new URL(srv.url).port;
  const rebound = `rebind.example:${port}`;
  const marker = path.join(srv.workspace, 'pwned');

  // The page's POST carries its own origin, whatever Host it reached the server under.
  for (const host of [rebound, `toolport.test:${port}`]) {
    const bash = await send(srv.url, 'POST', '/tools/Bash', { host, origin: `http://${rebound}` }, { command: `touch ${marker}` });
    assert.equal(bash.status, 403, host);
    assert.deepEqual(
      bash.body,
      host === rebound
        ? forbidden(
            `Request refused: it has the Host header ${JSON.stringify(host)}, which is not local or allowed. To protect against DNS rebinding, this server answers only to localhost, 127.0.0.1, [::1] or the names in TOOLPORT_ALLOWED_HOSTS.`,
          )
        : forbidden(
            `Request refused: it comes from the web origin "http://${rebound}", which is not local or allowed. This server takes calls without an API key and, to protect against DNS rebinding and cross-site requests, refuses calls from pages of sites not in TOOLPORT_ALLOWED_ORIGINS or TOOLPORT_CORS_ORIGINS.`,
          ),
    );
  }
  assert.equal(existsSync(marker), false, 'the command never ran');
  // A same-origin GET carries no Origin: the Host allowlist refuses it.
  const list = await send(srv.url, 'GET', '/tools', { host: rebound });
  assert.equal(list.status, 403);

  // The allowed name, from the allowed origin, or with no Origin at all (not a browser), is served.
  const allowed = await send(srv.url, 'POST', '/tools/Echo', { host: `toolport.test:${port}`, origin: 'https://app.example' }, { text: 'hi' });
  assert.equal(allowed.status, 200);
  assert.deepEqual(allowed.body, { content: [{ type: 'text', text: 'hi' }], isError: false });
  const plain = await send(srv.url, 'POST', '/tools/Echo', { host: `toolport.test:${port}` }, { text: 'hi' });
  assert.equal(plain.status, 200);
});

test('TOOLPORT_ALLOW_UNAUTHENTICATED on 0.0.0.0 without an allowlist: a cross-site or rebinding page still cannot run Bash', async (t) => {
  const srv = await startServer({ HOST: '0.0.0.0', TOOLPORT_ALLOW_UNAUTHENTICATED: 'true' });
  t.after(() => kill(srv));
  const port = new URL(srv.url).port;
  const marker = path.join(srv.workspace, 'pwned');
  const origin = `http://rebind.example:${port}`;
  const bash = await send(srv.url, 'POST', '/tools/Bash', { host: `rebind.example:${port}`, origin }, { command: `touch ${marker}` });
  assert.equal(bash.status, 403);
  assert.deepEqual(
    bash.body,
    forbidden(
      `Request refused: it comes from the web origin ${JSON.stringify(origin)}, which is not local. This server takes calls without an API key and, to protect against DNS rebinding and cross-site requests, refuses calls from pages of other sites.`,
    ),
  );
  assert.equal(existsSync(marker), false, 'the command never ran');
});
