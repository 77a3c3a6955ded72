import assert from 'node:assert/strict';
import type { KeySpec } from '#src/auth/keyring.js';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { ToolRegistry } from '#src/core/registry.js';
import { buildApp } from '#src/http/app.js';
import { createLogger } from '#src/infra/logger.js';
import { Echo } from '#src/tools/echo.js';
import { scrapeMetrics } from '../support/metrics-text.js';
import { controllableTool, Throws } from '../fixtures/tools.js';

const FULL_KEY = 'parity-full-secret-0123456789';
const SCOPED_KEY = 'parity-scoped-secret-0123456789';
const KEYS: KeySpec[] = [
  { label: 'full', key: FULL_KEY },
  { label: 'narrow', key: SCOPED_KEY, tools: ['Throws'] },
];

/** Each case: a tool, its input, the key; run once over REST and once over MCP. */
const CASES = [
  { name: 'valid call', tool: 'Echo', input: { text: 'hi' }, key: FULL_KEY, expect: { ran: 'ok', isError: false } },
  { name: 'invalid input', tool: 'Echo', input: { text: 1 }, key: FULL_KEY, expect: { refused: 'INVALID_INPUT' } },
  { name: 'unknown tool', tool: 'Nope', input: {}, key: FULL_KEY, expect: { refused: 'TOOL_NOT_FOUND' } },
  { name: 'out of scope', tool: 'Echo', input: { text: 'hi' }, key: SCOPED_KEY, expect: { refused: 'FORBIDDEN' } },
  { name: 'tool throws', tool: 'Throws', input: {}, key: FULL_KEY, expect: { ran: 'threw', isError: true } },
  { name: 'timeout', tool: 'Slow', input: {}, key: FULL_KEY, expect: { ran: 'timeout', isError: true } },
] as const;

type Outcome = { ran: string; isError: boolean; text: string } | { refused: string; message: string };

async function appWithLog() {
  const lines: Record<string, unknown>[] = [];
  const destination = new Writable({
    write(chunk, _enc, done) {
      for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  const registry = new ToolRegistry().register(Echo).register(Throws).register(controllableTool('Slow', 50).tool);
  const app = await buildApp({ registry, apiKeys: KEYS, logger: createLogger('info', { destination, pretty: false }) });
  return { app, lines };
}

async function viaRest(app: FastifyInstance, tool: string, input: unknown, key: string): Promise<Outcome> {
  const res = await app.inject({ method: 'POST', url: `/tools/${tool}`, headers: { authorization: `Bearer ${key}` }, payload: input as object });
  const body = res.json() as { isError: boolean; content: Array<{ text: string }>; error?: { code: string; message: string } };
  if (body.error) return { refused: body.error.code, message: body.error.message };
  assert.equal(res.statusCode, 200);
  return { ran: '', isError: body.isError, text: body.content[0]!.text };
}

async function viaMcp(app: FastifyInstance, tool: string, input: unknown, key: string): Promise<Outcome> {
  const res = await app.inject({
    method: 'POST',
    url: '/mcp',
    // 2025-06-18: invalid input is a JSON-RPC error there, so every refusal shows its catalog code.
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'mcp-protocol-version': '2025-06-18' },
    payload: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: tool, arguments: input } }),
  });
  assert.equal(res.statusCode, 200);
  const body = res.json() as { result?: { isError: boolean; content: Array<{ text: string }> }; error?: { message: string; data: { code: string } } };
  if (body.error) return { refused: body.error.data.code, message: body.error.message };
  return { ran: '', isError: body.result!.isError, text: body.result!.content[0]!.text };
}

/** The audit line without what differs by transport or by run (time, ids, durations, input size). */
function auditOf(line: Record<string, unknown> | undefined): Record<string, unknown> {
  assert.ok(line, 'an audit line');
  const differs = new Set(['time', 'pid', 'hostname', 'reqId', 'transport', 'ms', 'waitMs', 'inputBytes', 'err']);
  return Object.fromEntries(Object.entries(line).filter(([key]) => !differs.has(key)));
}

for (const c of CASES) {
  test(`parity: ${c.name} gives the same outcome, audit line and metric through REST and MCP`, async (t) => {
    const { app, lines } = await appWithLog();
    t.after(() => app.close());
    const rest = await viaRest(app, c.tool, c.input, c.key);
    const restLine = lines.find((l) => l.msg === 'tool call' || l.msg === 'tool call refused');
    lines.length = 0;
    const mcp = await viaMcp(app, c.tool, c.input, c.key);
    const mcpLine = lines.find((l) => l.msg === 'tool call' || l.msg === 'tool call refused');

    assert.deepEqual(mcp, rest);
    if ('refused' in c.expect) assert.equal((rest as { refused: string }).refused, c.expect.refused);
    else assert.equal((rest as { isError: boolean }).isError, c.expect.isError);
    assert.deepEqual(auditOf(mcpLine), auditOf(restLine));
    assert.deepEqual([restLine!.transport, mcpLine!.transport], ['rest', 'mcp']);

    const m = await scrapeMetrics(app, { authorization: `Bearer ${FULL_KEY}` });
    for (const transport of ['rest', 'mcp']) {
      const series =
        'refused' in c.expect
          ? `toolport_rejected_calls_total{reason="${c.expect.refused.toLowerCase()}",transport="${transport}"}`
          : `toolport_tool_calls_total{outcome="${c.expect.ran}",tool="${c.tool}",transport="${transport}"}`;
      assert.equal(m.get(series), 1, series);
    }
  });
}
