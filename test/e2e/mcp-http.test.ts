import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { CLIENT_KINDS, httpClient } from '../support/mcp-clients.js';
import { toolCases } from '../support/mcp-tool-cases.js';
import { processesWith, trackedMarker, waitFor } from '../support/processes.js';
import { kill, startServer, type ServerProcess } from '../support/server-process.js';
import { Cleanups, temporaryDirectory } from '../support/workspace.js';

// One real server for the file: the SDKs' clients (v1, and v2 in both eras) over Streamable HTTP.
const FULL_KEY = 'mcp-e2e-full-secret-0123456789';
const SCOPED_KEY = 'mcp-e2e-scoped-secret-0123456789';
let server: ServerProcess;
let keysDir: string;
const cleanups = new Cleanups();

before(async () => {
  keysDir = await temporaryDirectory(cleanups, 'toolport-mcp-keys-');
  const keysFile = path.join(keysDir, 'keys.json');
  await writeFile(
    keysFile,
    JSON.stringify([
      { label: 'full', key: FULL_KEY },
      { label: 'reader', key: SCOPED_KEY, tools: ['Read', 'LS'] },
    ]),
  );
  server = await startServer({ TOOLPORT_API_KEYS_FILE: keysFile, TOOLPORT_BASH_SANDBOX: 'false', TOOLPORT_SHUTDOWN_GRACE_MS: '100' });
});
after(async () => {
  kill(server);
  await server.exited;
  await cleanups.run();
});

const auth = (key: string) => ({ authorization: `Bearer ${key}` });

for (const kind of CLIENT_KINDS) {
  describe(`MCP over HTTP, ${kind}`, () => {
    toolCases(`${kind} over HTTP`, {
      connect: () => httpClient(kind, server.url, auth(FULL_KEY)),
      workspace: () => server.workspace,
      cancel: kind === 'v2-modern' ? 'signal' : 'close',
    });

    test(`${kind} over HTTP: a scoped key lists only its tools, and a call of another tool is refused with FORBIDDEN`, async (t) => {
      const client = await httpClient(kind, server.url, auth(SCOPED_KEY));
      t.after(() => client.close());
      const { tools } = await client.listTools();
      assert.deepEqual(
        tools.map((tool) => tool.name),
        ['Read', 'LS'],
      );
      await assert.rejects(client.callTool('Bash', { command: 'echo no' }), (err: { code?: number; message: string }) => {
        assert.equal(err.code, -31002);
        assert.match(err.message, /may not use tool "Bash"/);
        return true;
      });
      const refused = await server.logLine((l) => l.msg === 'tool call refused' && l.key === 'reader' && l.tool === 'Bash');
      assert.equal(refused.transport, 'mcp');
    });

    test(`${kind} over HTTP: without a key the connection is refused with 401`, async () => {
      await assert.rejects(httpClient(kind, server.url), /UNAUTHORIZED|HTTP 401/);
    });
  });
}

// A 2025 client aborting a call sends notifications/cancelled in a POST of its own and leaves the
// call's request open: the server finds the call by the caller's key and the request id.
for (const kind of ['v1', 'v2-legacy'] as const) {
  test(`${kind} over HTTP: aborting a running Bash call through its signal kills its process, while the call's request stays open`, async (t) => {
    const client = await httpClient(kind, server.url, auth(FULL_KEY));
    t.after(() => client.close());
    const marker = trackedMarker(t);
    const controller = new AbortController();
    const call = client.callTool('Bash', { command: `sleep ${marker}` }, { signal: controller.signal });
    call.catch(() => {});
    await waitFor(() => processesWith(marker).length > 0, 'the command to start', 30_000);
    controller.abort(new Error('the user pressed stop'));
    await assert.rejects(call);
    // Bash sends SIGTERM, which ends sleep at once; SIGKILL would follow 2 s later.
    await waitFor(() => processesWith(marker).length === 0, 'the command to be killed', 5_000);
    const line = await server.logLine((l) => l.msg === 'tool call' && l.tool === 'Bash' && l.key === 'full' && l.outcome === 'aborted');
    assert.equal(line.transport, 'mcp');
  });
}

test('POST /mcp without a key is a 401 with WWW-Authenticate, before any MCP processing', async () => {
  const res = await fetch(new URL('/mcp', server.url), {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
  });
  assert.equal(res.status, 401);
  assert.equal(res.headers.get('www-authenticate'), 'Bearer realm="toolport"');
  const body = (await res.json()) as { error: { code: number; data: { code: string } } };
  assert.deepEqual([body.error.code, body.error.data.code], [-31001, 'UNAUTHORIZED']);
});
