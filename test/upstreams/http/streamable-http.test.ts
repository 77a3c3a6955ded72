import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer as createHttpServer, type Server } from 'node:http';
import { describe, it } from 'node:test';
import { parseUpstreams } from '#src/upstreams/config.js';
import { Upstream, type UpstreamOptions } from '#src/upstreams/upstream.js';
import { everythingOverHttp } from '../../support/everything-server.js';
import { capturedLog } from '../../support/log-capture.js';
import { freePort } from '../../support/ports.js';
import { until } from '../../support/wait.js';
import type { Cleanup } from '../../support/workspace.js';

async function kill(child: ChildProcess): Promise<void> {
  const exited = once(child, 'exit');
  child.kill('SIGKILL');
  await exited;
}

/** Upstream `h` at `url`, restarting quickly, stopped when the test ends. */
function upstreamAt(t: Cleanup, url: string, options: Partial<UpstreamOptions> = {}) {
  const log = capturedLog();
  const upstream = new Upstream(parseUpstreams(JSON.stringify({ mcpServers: { h: { type: 'http', url } } }), {})[0]!, {
    log: log.logger,
    version: '0.0.0',
    baseEnv: {},
    onTools: () => undefined,
    backoffMs: 20,
    maxBackoffMs: 100,
    ...options,
  });
  t.after(() => upstream.stop());
  return { upstream, log };
}

const echo = (upstream: Upstream) => upstream.call('echo', { message: 'hi' }, { signal: new AbortController().signal });
const ECHOED = { content: [{ type: 'text', text: 'Echo: hi' }] };
// What undici says of a server that is gone depends on whether a pooled connection saw it go first.
const GONE = /^the request failed: (ECONNREFUSED|ECONNRESET|UND_ERR_SOCKET)$/;

describe('an HTTP upstream that goes away', () => {
  it('is noticed by the next call, which says it went away; it is down until the server is back, then serves again', async (t) => {
    const port = await freePort();
    const { child: server } = await everythingOverHttp(t, port);
    const states: string[] = [];
    const { upstream } = upstreamAt(t, `http://127.0.0.1:${port}/mcp`, { onState: (state) => states.push(state) });
    await upstream.start();
    assert.deepEqual(await echo(upstream), ECHOED);
    await kill(server);
    const failure = await echo(upstream).then(
      () => assert.fail('the call succeeded'),
      (err: Error) => err,
    );
    assert.equal(failure.name, 'UpstreamUnavailableError');
    const reason = /^Upstream "h" went away during the call \((.*)\); the call may or may not have taken effect\. toolport is restarting it\.$/.exec(
      failure.message,
    );
    assert.ok(reason, failure.message);
    assert.match(reason[1]!, GONE);
    // Down at once; restarting it (with backoff) fails until the server is back.
    assert.deepEqual(states.slice(0, 3), ['starting', 'ready', 'down']);
    assert.notEqual(upstream.state, 'ready');
    assert.match(upstream.status().reason!, GONE);
    await everythingOverHttp(t, port);
    await until(() => upstream.state === 'ready', 'the upstream to be connected again');
    assert.deepEqual(await echo(upstream), ECHOED);
    assert.ok(upstream.status().restarts >= 1);
  });

  it('and comes back before a call notices has forgotten the session: the call says so, and the upstream reconnects', async (t) => {
    const port = await freePort();
    const { child: server } = await everythingOverHttp(t, port);
    const { upstream } = upstreamAt(t, `http://127.0.0.1:${port}/mcp`);
    await upstream.start();
    await kill(server);
    await everythingOverHttp(t, port);
    await assert.rejects(echo(upstream), {
      name: 'UpstreamUnavailableError',
      // The everything server answers 400 for a session it does not know (the protocol says 404).
      message: 'Upstream "h" went away during the call (the upstream answered HTTP 400); the call may or may not have taken effect. toolport is restarting it.',
    });
    await until(() => upstream.state === 'ready', 'the upstream to be connected again');
    assert.deepEqual(await echo(upstream), ECHOED);
  });

  it('is noticed by the periodic re-list when no call comes', async (t) => {
    // A plain upstream that does not announce list changes, so it is listed again every relistMs.
    const server: Server = createHttpServer(async (req, res) => {
      let body = '';
      for await (const chunk of req) body += String(chunk);
      const message = body === '' ? undefined : (JSON.parse(body) as { id?: number; method: string; params?: { protocolVersion: string } });
      if (message?.method === 'initialize') {
        res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': 's1' });
        const result = { protocolVersion: message.params!.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'h', version: '1' } };
        res.end(JSON.stringify({ jsonrpc: '2.0', id: message.id, result }));
      } else if (message?.method === 'tools/list') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ jsonrpc: '2.0', id: message.id, result: { tools: [{ name: 'echo', inputSchema: { type: 'object' } }] } }));
      } else if (message !== undefined && message.id === undefined) res.writeHead(202).end();
      else res.writeHead(405).end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    t.after(() => {
      server.closeAllConnections();
      server.close();
    });
    const states: string[] = [];
    const { upstream } = upstreamAt(t, `http://127.0.0.1:${port}/mcp`, { relistMs: 20, backoffMs: 60_000, onState: (state) => states.push(state) });
    await upstream.start();
    server.closeAllConnections();
    server.close();
    await until(() => upstream.state === 'down', 'the re-list to find the upstream gone');
    assert.match(upstream.status().reason!, GONE);
    assert.deepEqual(states, ['starting', 'ready', 'down']);
  });
});
