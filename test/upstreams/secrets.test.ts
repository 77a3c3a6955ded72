import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { ToolRegistry } from '#src/core/registry.js';
import { buildApp } from '#src/http/app.js';
import { parseUpstreams } from '#src/upstreams/config.js';
import { openUpstreams } from '#src/upstreams/open.js';
import type { UpstreamSource } from '#src/upstreams/source.js';
import { capturedLog } from '../support/log-capture.js';
import { Cleanups, temporaryDirectory } from '../support/workspace.js';

const CARELESS = path.resolve(import.meta.dirname, '../fixtures/upstreams/careless-server.mjs');
const TOKEN = 'tok-0123456789abcdef';
const base64 = (text: string) => Buffer.from(text).toString('base64');

// `careless__report` echoes the token everywhere; what a caller gets has it nowhere, in no form.
// "bot-7:" is two groups of base64 in the Basic header: the first is kept, the second is hidden
// with the token (the group before a base64 form is, in case it holds the token's first bits).
const REPORT = {
  content: [
    { type: 'text', text: `Report ready (sent "Authorization: Basic ${base64(`bot-7:${TOKEN}`).slice(0, 4)}[redacted]").` },
    {
      type: 'resource',
      resource: { uri: 'https://api.example.com/reports?token=[redacted]', mimeType: 'text/plain; key=[redacted]', text: 'Fetched with [redacted].' },
      annotations: { audience: ['user'], lastModified: '2025-01-01T00:00:00Z [redacted]' },
    },
    {
      type: 'resource_link',
      uri: 'https://api.example.com/r/[redacted]',
      name: 'report-[redacted]',
      title: 'Report for [redacted]',
      description: 'Made with [redacted]',
      mimeType: 'text/plain; key=[redacted]',
    },
    { type: 'resource', resource: { uri: 'file:///report.txt', mimeType: 'text/plain', blob: base64('token=[redacted]\n') } },
    { type: 'text', text: '[content[4] is an image whose data held a secret; left out]' },
  ],
  structuredContent: { user: 'bot-7', token: '[redacted]', headers: { authorization: 'Bearer [redacted]' }, '[redacted]': 'a key', list: ['x [redacted]'] },
  isError: false,
};
const PROGRESS = { progress: 1, total: 2, message: 'Calling the API with [redacted]' };

/** The token as it is and as base64 at each byte alignment: none may be in what a caller gets. */
function leaked(body: string): string[] {
  const bytes = Buffer.from(TOKEN);
  const forms = [TOKEN, ...[0, 1, 2].map((skip) => bytes.subarray(skip, skip + Math.floor((bytes.length - skip) / 3) * 3).toString('base64'))];
  return forms.filter((form) => body.includes(form));
}

/** The data of each `event: <name>` of a server-sent event stream, parsed. */
function events(body: string, name: string): unknown[] {
  return [...body.matchAll(/^event: (\w+)\ndata: (.*)$/gm)].filter((m) => m[1] === name).map((m) => JSON.parse(m[2]!) as unknown);
}

describe('a careless upstream that echoes its token in every field of a result and in its progress', () => {
  const cleanups = new Cleanups();
  let app: FastifyInstance;
  let source: UpstreamSource;

  before(async () => {
    const dir = await temporaryDirectory(cleanups);
    const file = path.join(dir, 'upstreams.json');
    const text = JSON.stringify({ mcpServers: { careless: { command: process.execPath, args: [CARELESS], env: { API_TOKEN: '${API_TOKEN}' } } } });
    await writeFile(file, text);
    const registry = new ToolRegistry();
    const specs = parseUpstreams(text, { API_TOKEN: TOKEN });
    source = (await openUpstreams(specs, { upstreams: file, upstreamsLock: undefined }, registry, capturedLog().logger, { baseEnv: process.env }))!;
    app = await buildApp({ registry, upstreams: source });
  });
  after(async () => {
    await app.close();
    await source.stop();
    await cleanups.run();
  });

  it('POST /tools/:name answers with the token hidden in text, both resources, their annotations, a text blob and structuredContent, and an image holding it left out', async () => {
    const answer = await app.inject({ method: 'POST', url: '/tools/careless__report', payload: {} });
    assert.equal(answer.statusCode, 200);
    assert.deepEqual(leaked(answer.body), []);
    assert.deepEqual(answer.json(), REPORT);
  });

  it('POST /tools/:name as events hides the token in the progress message too', async () => {
    const answer = await app.inject({ method: 'POST', url: '/tools/careless__report', headers: { accept: 'text/event-stream' }, payload: {} });
    assert.equal(answer.headers['content-type'], 'text/event-stream');
    assert.deepEqual(leaked(answer.body), []);
    assert.deepEqual(events(answer.body, 'progress'), [PROGRESS]);
    assert.deepEqual(events(answer.body, 'result'), [REPORT]);
  });

  it('POST /mcp hides the token in the progress notification and in every field of the result', async () => {
    const call = { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'careless__report', arguments: {}, _meta: { progressToken: 'p1' } } };
    const answer = await app.inject({
      method: 'POST',
      url: '/mcp',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-11-25' },
      payload: JSON.stringify(call),
    });
    assert.equal(answer.headers['content-type'], 'text/event-stream');
    assert.deepEqual(leaked(answer.body), []);
    assert.deepEqual(events(answer.body, 'message'), [
      { jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 'p1', ...PROGRESS } },
      { jsonrpc: '2.0', id: 7, result: REPORT },
    ]);
  });
});
