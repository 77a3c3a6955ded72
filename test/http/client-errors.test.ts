import assert from 'node:assert/strict';
import { connect } from 'node:net';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { ToolRegistry } from '#src/core/registry.js';
import { buildApp } from '#src/http/app.js';
import { Echo } from '#src/tools/echo.js';

/** Sends raw bytes and resolves with everything the server wrote back before closing. */
async function rawExchange(bytes: string): Promise<string> {
  const app = await buildApp({ registry: new ToolRegistry().register(Echo) });
  await app.listen({ port: 0, host: '127.0.0.1' });
  try {
    const { port } = app.server.address() as AddressInfo;
    return await new Promise((resolve, reject) => {
      let reply = '';
      const socket = connect(port, '127.0.0.1', () => socket.write(bytes));
      socket.on('data', (chunk) => (reply += String(chunk)));
      socket.on('end', () => resolve(reply));
      socket.on('error', reject);
    });
  } finally {
    await app.close();
  }
}

function parse(reply: string): { status: number; body: unknown } {
  const [head = '', body = ''] = reply.split('\r\n\r\n');
  return { status: Number(head.split(' ')[1]), body: JSON.parse(body) };
}

test('request headers over the limit are a 431 in the error-body shape', async () => {
  const reply = parse(await rawExchange(`GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`));
  assert.equal(reply.status, 431);
  const message = 'Request headers are larger than the server accepts.';
  assert.deepEqual(reply.body, { content: [{ type: 'text', text: message }], isError: true, error: { code: 'HEADERS_TOO_LARGE', message } });
});

test('a request that is not valid HTTP is a 400 in the error-body shape', async () => {
  const reply = parse(await rawExchange('NOT HTTP AT ALL\r\n\r\n'));
  assert.equal(reply.status, 400);
  const message = 'The request is not valid HTTP.';
  assert.deepEqual(reply.body, { content: [{ type: 'text', text: message }], isError: true, error: { code: 'BAD_REQUEST', message } });
});
