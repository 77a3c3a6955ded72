import assert from 'node:assert/strict';
import { test } from 'node:test';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import { ToolRegistry } from '#src/core/registry.js';
import { Echo } from '#src/tools/echo.js';
import { generatedTool } from '../../fixtures/generated-tools.js';
import { appWith } from '../../support/app.js';

/** An app whose list is long enough to be worth compressing (about 11 KB). */
async function longListApp() {
  const registry = new ToolRegistry().register(Echo);
  for (let i = 0; i < 10; i++) registry.register(generatedTool(i));
  return { app: await appWith(registry, { docs: false, pressure: false }), registry };
}

/** The headers of an answer, without the ones every answer carries. */
function headersOf(res: { headers: Record<string, unknown> }): Record<string, unknown> {
  return Object.fromEntries(Object.entries(res.headers).filter(([name]) => !['date', 'connection', 'keep-alive', 'x-request-id'].includes(name)));
}

const DECODE = { br: brotliDecompressSync, gzip: gunzipSync };

for (const [coding, suffix, accept] of [
  ['br', 'br', 'gzip, deflate, br'],
  ['gzip', 'gz', 'gzip, br;q=0'],
] as const) {
  test(`GET /tools to a client that accepts ${accept}: the list in ${coding}, with an ETag of its own, and 304 on it`, async (t) => {
    const { app } = await longListApp();
    t.after(() => app.close());
    const plain = await app.inject({ url: '/tools' });
    const tag = String(plain.headers.etag);
    const res = await app.inject({ url: '/tools', headers: { 'accept-encoding': accept } });
    assert.equal(res.statusCode, 200);
    const etag = `${tag.slice(0, -1)}-${suffix}"`;
    assert.deepEqual(headersOf(res), {
      etag,
      'cache-control': 'no-cache',
      vary: 'Accept-Encoding',
      'content-type': 'application/json; charset=utf-8',
      'content-encoding': coding,
      'content-length': String(res.rawPayload.length),
    });
    assert.ok(res.rawPayload.length < plain.rawPayload.length / 4, `${res.rawPayload.length} of ${plain.rawPayload.length} bytes`);
    assert.deepEqual(DECODE[coding](res.rawPayload), plain.rawPayload);
    const again = await app.inject({ url: '/tools', headers: { 'accept-encoding': accept } });
    assert.deepEqual(again.rawPayload, res.rawPayload);

    const revalidated = await app.inject({ url: '/tools', headers: { 'accept-encoding': accept, 'if-none-match': etag } });
    assert.equal(revalidated.statusCode, 304);
    assert.equal(revalidated.body, '');
    assert.deepEqual(headersOf(revalidated), { etag, 'cache-control': 'no-cache', vary: 'Accept-Encoding' });
    // Each coding is its own representation: the tag of one does not revalidate another.
    const identityTag = await app.inject({ url: '/tools', headers: { 'accept-encoding': accept, 'if-none-match': tag } });
    assert.equal(identityTag.statusCode, 200);
    const codedTagPlain = await app.inject({ url: '/tools', headers: { 'if-none-match': etag } });
    assert.equal(codedTagPlain.statusCode, 200);
    assert.equal(codedTagPlain.headers.etag, tag);
    assert.equal(codedTagPlain.headers['content-encoding'], undefined);
  });
}

test('GET /tools compresses every format and strict variant, each with its own tags', async (t) => {
  const { app } = await longListApp();
  t.after(() => app.close());
  const tags = new Set<string>();
  for (const query of ['', '?format=openai', '?format=openai&strict=true', '?format=openai-responses', '?format=openai-responses&strict=true', '?format=mcp']) {
    const plain = await app.inject({ url: `/tools${query}` });
    const br = await app.inject({ url: `/tools${query}`, headers: { 'accept-encoding': 'br' } });
    assert.equal(br.headers['content-encoding'], 'br', query);
    assert.deepEqual(brotliDecompressSync(br.rawPayload), plain.rawPayload, query);
    tags.add(String(plain.headers.etag)).add(String(br.headers.etag));
  }
  assert.equal(tags.size, 12);
});

test('GET /tools: a change of the tools gives new compressed bodies and tags', async (t) => {
  const { app, registry } = await longListApp();
  t.after(() => app.close());
  const before = await app.inject({ url: '/tools', headers: { 'accept-encoding': 'br' } });
  registry.replaceSource('more', [generatedTool(99)]);
  const after = await app.inject({ url: '/tools', headers: { 'accept-encoding': 'br' } });
  assert.notEqual(after.headers.etag, before.headers.etag);
  const names = JSON.parse(brotliDecompressSync(after.rawPayload).toString()) as Array<{ name: string }>;
  assert.equal(names.at(-1)?.name, 'Generated0099');
  const stale = await app.inject({ url: '/tools', headers: { 'accept-encoding': 'br', 'if-none-match': String(before.headers.etag) } });
  assert.equal(stale.statusCode, 200);
});

test('GET /tools sends a list under 1 KB as it is, whatever the client accepts, still saying Vary', async (t) => {
  const app = await appWith([Echo], { docs: false, pressure: false }, t);
  const res = await app.inject({ url: '/tools', headers: { 'accept-encoding': 'br, gzip' } });
  assert.equal(res.statusCode, 200);
  assert.equal(res.headers['content-encoding'], undefined);
  assert.equal(res.headers.vary, 'Accept-Encoding');
  assert.match(String(res.headers.etag), /^"[\w-]{22}"$/);
});
