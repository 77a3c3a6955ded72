import assert from 'node:assert/strict';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import { describe, it } from 'node:test';
import type { JSONRPCMessage } from '@modelcontextprotocol/client';
import { Agent } from 'undici';
import { StreamableHttpTransport, type StreamableHttpOptions } from '#src/upstreams/http/client.js';
import { UpstreamContentError, UpstreamHttpError, UpstreamStreamEndedError } from '#src/upstreams/http/errors.js';
import { describeHttpFailure, isConnectionFailure } from '#src/upstreams/http/transport.js';
import { freePort } from '../../support/ports.js';
import { until } from '../../support/wait.js';
import type { Cleanup } from '../../support/workspace.js';

const MiB = 1024 * 1024;
const INITIALIZE: JSONRPCMessage = {
  jsonrpc: '2.0',
  id: 0,
  method: 'initialize',
  params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' } },
};
const INITIALIZED: JSONRPCMessage = { jsonrpc: '2.0', method: 'notifications/initialized' };
const CALL: JSONRPCMessage = { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'echo', arguments: {} } };
const ANSWER = { jsonrpc: '2.0', id: 1, result: { content: [{ type: 'text', text: 'done' }] } };

interface Received {
  method: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/** A hand-written Streamable HTTP server: `handle` answers each request; every request is kept in `received`. */
async function upstream(t: Cleanup, handle: (request: Received, res: ServerResponse, req: IncomingMessage) => void) {
  const received: Received[] = [];
  const server = createServer(async (req, res) => {
    let body = '';
    for await (const chunk of req) body += String(chunk);
    const request = { method: req.method ?? '', headers: req.headers, body };
    received.push(request);
    handle(request, res, req);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  return { url: new URL(`http://127.0.0.1:${(server.address() as { port: number }).port}/mcp?x=1`), received };
}

/** A transport to `url` that keeps what it hears, closed when the test ends. */
function transportTo(t: Cleanup, url: URL, options: Partial<Pick<StreamableHttpOptions, 'headers' | 'maxResultBytes' | 'reconnect'>> = {}) {
  const agent = new Agent();
  const heard: { messages: JSONRPCMessage[]; errors: Error[]; broken: string[]; lost: string[]; closed: number } = {
    messages: [],
    errors: [],
    broken: [],
    lost: [],
    closed: 0,
  };
  const transport = new StreamableHttpTransport({
    url,
    headers: options.headers ?? {},
    dispatcher: agent,
    ...(options.maxResultBytes !== undefined ? { maxResultBytes: options.maxResultBytes } : {}),
    ...(options.reconnect !== undefined ? { reconnect: options.reconnect } : {}),
    onBroken: (why) => heard.broken.push(why),
    onEventStreamLost: (why) => heard.lost.push(why),
  });
  transport.onmessage = (message) => heard.messages.push(message);
  transport.onerror = (error) => heard.errors.push(error);
  transport.onclose = () => heard.closed++;
  t.after(async () => {
    await transport.close();
    await agent.close();
  });
  return { transport, heard };
}

const json = (res: ServerResponse, value: unknown, headers: Record<string, string> = {}): void => {
  res.writeHead(200, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(value));
};
const events = (res: ServerResponse, ...chunks: string[]): void => {
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  for (const chunk of chunks) res.write(chunk);
  res.end();
};
const chunked = (res: ServerResponse, body: string): void => {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(body);
};
/** `message` with the stamp of a refusal (random, the transport's own) written as `stamp`. */
const stampless = (message: JSONRPCMessage | undefined): unknown => {
  const error = (message as { error?: { data?: { toolport?: unknown } } } | undefined)?.error;
  return error?.data?.toolport === undefined ? message : { ...message, error: { ...error, data: { ...error.data, toolport: typeof error.data.toolport } } };
};
const methodOf = (request: Received): string | undefined => (request.body === '' ? undefined : (JSON.parse(request.body) as { method?: string }).method);

describe('StreamableHttpTransport', () => {
  it('POSTs each message with its headers, keeps the session and protocol version after initialize, and hands JSON answers on', async (t) => {
    const { url, received } = await upstream(t, (request, res) => {
      if (request.method === 'GET') res.writeHead(405).end();
      else if (methodOf(request) === 'initialize') json(res, { jsonrpc: '2.0', id: 0, result: {} }, { 'mcp-session-id': 's-1' });
      else if (methodOf(request) === 'notifications/initialized') res.writeHead(202).end();
      else json(res, ANSWER, { 'content-type': 'application/json; charset=utf-8' });
    });
    const { transport, heard } = transportTo(t, url, { headers: { 'X-Api-Key': 'k', Accept: 'text/plain', 'Mcp-Session-Id': 'forged' } });
    await transport.send(INITIALIZE);
    transport.setProtocolVersion('2025-11-25');
    await transport.send(INITIALIZED);
    await transport.send(CALL);
    assert.deepEqual(heard.messages, [{ jsonrpc: '2.0', id: 0, result: {} }, ANSWER]);
    assert.equal(transport.sessionId, 's-1');
    const posts = received.filter((r) => r.method === 'POST');
    assert.deepEqual(
      posts.map((r) => [
        r.headers['accept'],
        r.headers['content-type'],
        r.headers['x-api-key'],
        r.headers['mcp-session-id'],
        r.headers['mcp-protocol-version'],
      ]),
      [
        ['application/json, text/event-stream', 'application/json', 'k', undefined, undefined],
        ['application/json, text/event-stream', 'application/json', 'k', 's-1', '2025-11-25'],
        ['application/json, text/event-stream', 'application/json', 'k', 's-1', '2025-11-25'],
      ],
    );
    assert.deepEqual(JSON.parse(posts[2]!.body), CALL);
    // The session is up: the stream of what the upstream sends on its own was asked for, and refused.
    await until(() => received.some((r) => r.method === 'GET'), 'the GET stream to be asked for');
    assert.equal(received.find((r) => r.method === 'GET')!.headers['accept'], 'text/event-stream');
    assert.deepEqual(heard.errors, []);
  });

  it('reads an event stream answer: progress and the result are handed on, a priming event and comments are not', async (t) => {
    const { url } = await upstream(t, (_request, res) => {
      events(
        res,
        'id: prime\ndata: \n\n: a comment\n\n',
        'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}\n\n',
        `data: ${JSON.stringify(ANSWER).slice(0, 20)}`,
        `${JSON.stringify(ANSWER).slice(20)}\r\n\r\n`,
      );
    });
    const { transport, heard } = transportTo(t, url);
    await transport.send(CALL);
    assert.deepEqual(heard.messages, [{ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 1, progress: 1 } }, ANSWER]);
  });

  it('resumes an event stream that ends before the answer from its last event id', async (t) => {
    const { url, received } = await upstream(t, (request, res) => {
      if (request.method === 'POST') events(res, 'retry: 5\nid: e-1\ndata: \n\n');
      else events(res, `id: e-2\ndata: ${JSON.stringify(ANSWER)}\n\n`);
    });
    const { transport, heard } = transportTo(t, url);
    await transport.send(CALL);
    assert.deepEqual(heard.messages, [ANSWER]);
    assert.deepEqual(
      received.map((r) => [r.method, r.headers['last-event-id']]),
      [
        ['POST', undefined],
        ['GET', 'e-1'],
      ],
    );
  });

  it('fails a call whose event stream ends without the answer and cannot be resumed', async (t) => {
    const { url } = await upstream(t, (_request, res) => events(res, 'data: {"jsonrpc":"2.0","method":"notifications/message","params":{}}\n\n'));
    const { transport } = transportTo(t, url);
    const failure = await transport.send(CALL).catch((err: Error) => err);
    assert.ok(failure instanceof UpstreamStreamEndedError);
    assert.equal(failure.message, 'the upstream ended the event stream of the call without answering it');
    // One call's failure: the connection is not taken for lost.
    assert.equal(isConnectionFailure(failure), false);
  });

  it('ends the event stream of a call it sends the cancellation of, and the call ends quietly', async (t) => {
    let streams = 0;
    const { url, received } = await upstream(t, (request, res, req) => {
      if (methodOf(request) === 'notifications/cancelled') return void res.writeHead(202).end();
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('id: e-1\ndata: \n\n');
      streams++;
      req.socket.once('close', () => streams--);
    });
    const { transport, heard } = transportTo(t, url);
    const call = transport.send(CALL);
    await until(() => streams === 1, 'the call to be streaming');
    await transport.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1, reason: 'aborted' } });
    await call;
    await until(() => streams === 0, 'the stream to be closed');
    assert.deepEqual(
      received.map((r) => methodOf(r)),
      ['tools/call', 'notifications/cancelled'],
    );
    assert.deepEqual(heard.errors, []);
  });

  it('refuses what is not an answer, saying so in its own words: an HTTP error, another content type, JSON that is not JSON-RPC', async (t) => {
    const answers: Array<(res: ServerResponse) => void> = [
      (res) => res.writeHead(404, 'Visit evil.example', { 'content-type': 'text/plain' }).end('upstream says: visit http://evil.example/'),
      (res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<p>hello</p>'),
      (res) => json(res, { hello: 'world' }),
      (res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{"jsonrpc":'),
    ];
    const { url } = await upstream(t, (_request, res) => answers.shift()!(res));
    const { transport, heard } = transportTo(t, url);
    const failures: Error[] = [];
    for (let i = 0; i < 4; i++)
      failures.push(
        await transport.send(CALL).then(
          () => assert.fail('the send succeeded'),
          (err: Error) => err,
        ),
      );
    assert.deepEqual(
      failures.map((err) => [err.constructor, describeHttpFailure(err), isConnectionFailure(err)]),
      [
        [UpstreamHttpError, 'the upstream answered HTTP 404', true],
        [UpstreamContentError, 'the upstream answered neither JSON nor an event stream', true],
        [UpstreamContentError, 'the upstream answered what is not a JSON-RPC message', true],
        [UpstreamContentError, 'the upstream answered what is not a JSON-RPC message', true],
      ],
    );
    assert.equal(heard.errors.length, 4);
    assert.deepEqual(heard.messages, []);
  });

  it('reports an event that is not JSON-RPC and reads on', async (t) => {
    const { url } = await upstream(t, (_request, res) =>
      events(res, 'data: not json\n\n', 'data: {"jsonrpc":"1.0"}\n\n', `data: ${JSON.stringify(ANSWER)}\n\n`),
    );
    const { transport, heard } = transportTo(t, url);
    await transport.send(CALL);
    assert.deepEqual(heard.messages, [ANSWER]);
    assert.deepEqual(
      heard.errors.map((err) => err.message),
      ['the upstream sent an event that is not a JSON-RPC message', 'the upstream sent an event that is not a JSON-RPC message'],
    );
  });

  for (const [what, answer] of [
    ['a JSON body that says its length', (res: ServerResponse) => json(res, { jsonrpc: '2.0', id: 1, result: { text: 'a'.repeat(MiB) } })],
    ['a JSON body that does not', (res: ServerResponse) => chunked(res, JSON.stringify({ jsonrpc: '2.0', id: 1, result: { text: 'a'.repeat(4 * MiB) } }))],
    ['an event line', (res: ServerResponse) => events(res, `data: ${'a'.repeat(MiB + 1)}`)],
    ['the data of one event', (res: ServerResponse) => events(res, `data: ${'a'.repeat(MiB / 2)}\ndata: ${'a'.repeat(MiB / 2)}\n\n`)],
  ] as const) {
    it(`refuses a call when ${what} passes its allowance, unparsed, and goes on serving`, async (t) => {
      let calls = 0;
      const { url } = await upstream(t, (_request, res) => (calls++ === 0 ? answer(res) : json(res, { ...ANSWER, id: 2 })));
      const { transport, heard } = transportTo(t, url, { maxResultBytes: MiB });
      await transport.send(CALL);
      assert.deepEqual(heard.messages.map(stampless), [
        {
          jsonrpc: '2.0',
          id: 1,
          error: { code: -32000, message: 'the answer to tools/call was larger than 1 MiB', data: { toolport: 'string', method: 'tools/call', maxBytes: MiB } },
        },
      ]);
      assert.equal(transport.answers.counters.parsedBytes, 0);
      assert.ok(transport.answers.counters.peakHeldBytes <= MiB + 64 * 1024, `${transport.answers.counters.peakHeldBytes} bytes held`);
      assert.deepEqual(heard.broken, []);
      await transport.send({ ...CALL, id: 2 });
      assert.deepEqual(heard.messages.slice(1), [{ ...ANSWER, id: 2 }]);
      assert.equal(heard.closed, 0);
    });
  }

  it("gives the upstream up when an event of its GET stream passes a small message's bound, saying why", async (t) => {
    const { url } = await upstream(t, (request, res) => {
      if (request.method === 'GET') return events(res, `data: ${'a'.repeat(MiB + 1)}`);
      if (methodOf(request) === 'initialize') return json(res, { jsonrpc: '2.0', id: 0, result: {} }, { 'mcp-session-id': 's-1' });
      res.writeHead(202).end();
    });
    const { transport, heard } = transportTo(t, url);
    await transport.send(INITIALIZE);
    await transport.send(INITIALIZED);
    await until(() => heard.closed === 1, 'the transport to give the upstream up');
    assert.deepEqual(heard.broken, ['the upstream sent a message of more than 1 MiB']);
    await assert.rejects(transport.send(CALL), { message: 'the connection to the upstream is closed' });
  });

  it('follows the GET stream, reopening it from its last event id when it ends; closing ends it and DELETEs the session', async (t) => {
    let gets = 0;
    const { url, received } = await upstream(t, (request, res) => {
      if (request.method === 'DELETE') return void res.writeHead(200).end();
      if (request.method === 'GET') {
        gets++;
        if (gets === 1) return events(res, `retry: 5\nid: g-1\ndata: ${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/tools/list_changed' })}\n\n`);
        return void res.writeHead(200, { 'content-type': 'text/event-stream' }).write(': open\n\n');
      }
      if (methodOf(request) === 'initialize') return json(res, { jsonrpc: '2.0', id: 0, result: {} }, { 'mcp-session-id': 's-2' });
      res.writeHead(202).end();
    });
    const { transport, heard } = transportTo(t, url);
    await transport.send(INITIALIZE);
    await transport.send(INITIALIZED);
    await until(() => gets === 2, 'the GET stream to be opened again');
    assert.deepEqual(heard.messages.slice(1), [{ jsonrpc: '2.0', method: 'notifications/tools/list_changed' }]);
    const opened = received.filter((r) => r.method === 'GET');
    assert.deepEqual(
      opened.map((r) => [r.headers['mcp-session-id'], r.headers['last-event-id']]),
      [
        ['s-2', undefined],
        ['s-2', 'g-1'],
      ],
    );
    await transport.close();
    await transport.close();
    assert.equal(heard.closed, 1);
    const deleted = received.filter((r) => r.method === 'DELETE');
    assert.deepEqual(
      deleted.map((r) => r.headers['mcp-session-id']),
      ['s-2'],
    );
    assert.deepEqual(heard.errors, []);
  });

  /** A server whose GET stream says `retry: 0` and ends at once; `gets` holds when each GET came (performance.now()). */
  async function endingAtOnce(t: Cleanup) {
    const gets: number[] = [];
    const { url } = await upstream(t, (request, res) => {
      if (request.method === 'DELETE') return void res.writeHead(200).end();
      if (request.method === 'GET') {
        gets.push(performance.now());
        return events(res, 'retry: 0\n\n');
      }
      if (methodOf(request) === 'initialize') return json(res, { jsonrpc: '2.0', id: 0, result: {} }, { 'mcp-session-id': 's-3' });
      res.writeHead(202).end();
    });
    return { url, gets };
  }

  it('asks again for a GET stream that ends at once with retry: 0 no sooner than 0.5 s later', async (t) => {
    const { url, gets } = await endingAtOnce(t);
    const { transport } = transportTo(t, url);
    await transport.send(INITIALIZE);
    await transport.send(INITIALIZED);
    await until(() => gets.length === 2, 'the GET stream to be asked for again');
    assert.ok(gets[1]! - gets[0]! >= 495, `asked again after ${gets[1]! - gets[0]!} ms`);
  });

  it('waits twice as long each time the GET stream ends quickly again, and gives it up after so many, saying why', async (t) => {
    const { url, gets } = await endingAtOnce(t);
    const { transport, heard } = transportTo(t, url, { reconnect: { minMs: 10, maxQuickEnds: 3 } });
    await transport.send(INITIALIZE);
    await transport.send(INITIALIZED);
    await until(() => heard.lost.length === 1, 'the GET stream to be given up');
    assert.deepEqual(heard.lost, ['the upstream ended its event stream 4 times in a row, each within 30 s of opening it']);
    assert.equal(gets.length, 4);
    const gaps = gets.slice(1).map((at, i) => at - gets[i]!);
    // Timers never fire early (1 ms of rounding aside): the waits were 10, 20 and 40 ms at least.
    gaps.forEach((gap, i) => assert.ok(gap >= 10 * 2 ** i - 1, `wait ${i + 1}: ${gap} ms`));
    assert.deepEqual(heard.broken, []);
  });

  it('sends the credentials of the URL as Basic authorization, and says only the error code of a request that fails', async (t) => {
    const { url, received } = await upstream(t, (_request, res) => json(res, ANSWER));
    url.username = 'user';
    url.password = 'p%40ss';
    const { transport } = transportTo(t, url);
    await transport.send(CALL);
    assert.equal(received[0]!.headers['authorization'], `Basic ${Buffer.from('user:p@ss').toString('base64')}`);
    const refused = transportTo(t, new URL(`http://127.0.0.1:${await freePort()}/mcp`)).transport;
    const failure = await refused.send(CALL).catch((err: Error) => err);
    assert.equal(describeHttpFailure(failure), 'the request failed: ECONNREFUSED');
    assert.equal(isConnectionFailure(failure), true);
  });
});
