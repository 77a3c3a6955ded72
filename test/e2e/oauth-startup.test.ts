import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { freePort } from '../support/ports.js';
import { startServer } from '../support/server-process.js';

/** Starts the server and expects it to stop during start-up; resolves to its stderr. */
async function refusedStart(env: Record<string, string>): Promise<string> {
  const error = await startServer({ TOOLPORT_BASH_SANDBOX: 'false', ...env }).then(
    () => assert.fail('the server started'),
    (err: Error) => err,
  );
  const match = /^server exited with 1: ([\s\S]*)$/.exec(error.message);
  assert.ok(match, error.message);
  return match[1]!.trim();
}

async function serveJson(document: (origin: string) => object): Promise<{ origin: string; server: Server }> {
  const server = createServer((req, res) => {
    const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    if (req.url === '/.well-known/openid-configuration') return void res.setHeader('content-type', 'application/json').end(JSON.stringify(document(origin)));
    res.statusCode = 404;
    res.end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

test('an issuer that cannot be reached at start-up stops it, naming TOOLPORT_OAUTH_ISSUER', async () => {
  const issuer = `http://127.0.0.1:${await freePort()}`;
  const stderr = await refusedStart({ TOOLPORT_OAUTH_ISSUER: issuer, TOOLPORT_PUBLIC_URL: 'http://127.0.0.1:3000' });
  assert.match(
    stderr,
    new RegExp(
      `^toolport: TOOLPORT_OAUTH_ISSUER: the metadata of issuer ${issuer} could not be read \\(${issuer}/\\.well-known/oauth-authorization-server: .*ECONNREFUSED`,
    ),
  );
});

test('issuer metadata without a JWKS stops start-up, naming the variable to set', async (t) => {
  const { origin, server } = await serveJson((issuer) => ({ issuer, token_endpoint: `${issuer}/token` }));
  t.after(() => new Promise((resolve) => server.close(resolve)));
  const stderr = await refusedStart({ TOOLPORT_OAUTH_ISSUER: origin, TOOLPORT_PUBLIC_URL: 'http://127.0.0.1:3000' });
  assert.equal(stderr, `toolport: TOOLPORT_OAUTH_ISSUER: the metadata of issuer ${origin} names no jwks_uri; set TOOLPORT_OAUTH_JWKS_URL`);
});

test('metadata that names another issuer stops start-up', async (t) => {
  const { origin, server } = await serveJson(() => ({ issuer: 'https://elsewhere.example.com', jwks_uri: 'https://elsewhere.example.com/jwks' }));
  t.after(() => new Promise((resolve) => server.close(resolve)));
  const stderr = await refusedStart({ TOOLPORT_OAUTH_ISSUER: origin, TOOLPORT_PUBLIC_URL: 'http://127.0.0.1:3000' });
  assert.equal(
    stderr,
    `toolport: TOOLPORT_OAUTH_ISSUER: ${origin}/.well-known/openid-configuration names the issuer "https://elsewhere.example.com", not "${origin}"; set the issuer exactly as the server writes it`,
  );
});

test('a public URL that is not absolute stops start-up, naming TOOLPORT_PUBLIC_URL', async () => {
  const stderr = await refusedStart({ TOOLPORT_OAUTH_ISSUER: 'https://idp.example.com', TOOLPORT_PUBLIC_URL: 'tools.example.com' });
  assert.equal(
    stderr,
    'toolport: Invalid TOOLPORT_PUBLIC_URL: expected an absolute https URL (http only on a loopback host) without query, fragment or credentials, got "tools.example.com"',
  );
});

test('a mapping whose entries name no issuer, with several issuers, stops start-up before any issuer is asked, saying why', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'toolport-mapping-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'oauth.json');
  await writeFile(file, JSON.stringify({ subjects: { alice: { tools: ['Bash'] } } }));
  // Neither issuer listens: the mapping is refused first.
  const issuers = [`http://127.0.0.1:${await freePort()}`, `http://127.0.0.1:${await freePort()}`];
  const stderr = await refusedStart({ TOOLPORT_OAUTH_ISSUER: issuers.join(','), TOOLPORT_PUBLIC_URL: 'http://127.0.0.1:3000', TOOLPORT_OAUTH_MAPPING: file });
  assert.equal(
    stderr,
    `toolport: TOOLPORT_OAUTH_MAPPING: ${file}: subjects["alice"] names no issuer, and 2 issuers are configured (TOOLPORT_OAUTH_ISSUER), so a token of any of them could claim it; ` +
      'with several issuers, put every entry under "issuers": {"<issuer>": {"subjects": {...}}}',
  );
});
