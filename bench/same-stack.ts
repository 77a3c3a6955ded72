/**
 * The same-stack baseline of `npm run bench`: Fastify 5 doing toolport's per-call duties on each
 * benchmarked path, written as plainly as possible, so that a ratio to it measures toolport's own
 * code rather than the framework both use. `node scripts/bench/same-stack.ts REPLIES.json` listens
 * on `PORT` and does, on every request:
 *
 * - the loopback Host guard (403 for another Host) and an `x-request-id` on the answer;
 * - with `SAME_STACK_API_KEY` set, a Bearer key: its SHA-256 digest cached per header value and
 *   compared in constant time (401 otherwise), then a fixed-window rate limit per key with the
 *   `x-ratelimit-*` headers (`SAME_STACK_RATE_LIMIT` calls a minute, never reached in the bench;
 *   0 or unset: none);
 *
 * and on every tool call: Ajv validation of the input against the tool's schema (Fastify's own
 * route validation for REST), Echo, one pino audit line through pino's asynchronous buffered
 * destination, and a prom-client counter and histogram. The routes:
 *
 * - `GET /tools`: the recorded list bytes, with toolport's caching headers;
 * - `POST /tools/Echo`: the ToolResult;
 * - `POST /mcp`: a plain JSON-RPC responder: `tools/call` runs Echo and answers as toolport does,
 *   `tools/list` sends the recorded answer;
 * - `POST /calls`: a plain turn runner: each `tool_use` block is validated and run, and the
 *   `tool_result` blocks come back in one user message.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Ajv } from 'ajv';
import Fastify from 'fastify';
import { pino } from 'pino';
import { Counter, Histogram } from 'prom-client';

interface RecordedReply {
  status: number;
  contentType: string;
  body: string;
}

const file = process.argv[2];
if (file === undefined) throw new Error('usage: node same-stack.ts REPLIES.json');
const recorded = JSON.parse(readFileSync(file, 'utf8')) as Record<string, RecordedReply>;
const recordedBody = (key: string): Buffer | undefined => (recorded[key] === undefined ? undefined : Buffer.from(recorded[key].body));
const toolsList = recordedBody('GET /tools');
const mcpToolsList = recordedBody('POST /mcp tools/list');

const KEY = process.env.SAME_STACK_API_KEY;
const KEY_DIGEST = KEY === undefined ? undefined : createHash('sha256').update(KEY).digest();
// Calls a minute per key; 0: no limit (as TOOLPORT_RATE_LIMIT=0).
const RATE_LIMIT = Number(process.env.SAME_STACK_RATE_LIMIT ?? 0);
const LOOPBACK_HOST = /^(?:127\.0\.0\.1|localhost|\[::1\])(?::\d+)?$/;
const SERVER_INFO = { 'io.modelcontextprotocol/serverInfo': { name: 'toolport', version: '0.1.0' } };

const ECHO_SCHEMA = {
  type: 'object',
  required: ['text'],
  properties: { text: { type: 'string', description: 'The text to return.' } },
  additionalProperties: false,
} as const;
const validateEcho = new Ajv({ allErrors: false }).compile(ECHO_SCHEMA);

const log = pino({ level: 'info' }, pino.destination({ dest: 1, sync: false, minLength: 4096 }));
const calls = new Counter({ name: 'toolport_tool_calls_total', help: 'Tool calls', labelNames: ['tool', 'outcome', 'transport'] });
const duration = new Histogram({ name: 'toolport_tool_call_duration_seconds', help: 'Tool call duration', labelNames: ['tool'] });

// The digest of each Authorization value seen, as toolport's key cache keeps it; bounded.
const digests = new Map<string, Buffer>();
const windows = new Map<string, { window: number; count: number }>();
let requests = 0;

/** One tool call: Echo, its audit line and its metrics. */
function runEcho(input: { text: string }, reqId: string, transport: string, inputBytes: number | undefined) {
  const started = performance.now();
  const result = { content: [{ type: 'text', text: input.text }], isError: false };
  const seconds = (performance.now() - started) / 1000;
  log.info(
    { reqId, tool: 'Echo', ms: Math.round(seconds * 1e5) / 100, outcome: 'ok', inputBytes, key: KEY === undefined ? undefined : 'bench', transport },
    'tool call',
  );
  calls.inc({ tool: 'Echo', outcome: 'ok', transport });
  duration.observe({ tool: 'Echo' }, seconds);
  return result;
}

const app = Fastify({ genReqId: () => `req-${(++requests).toString(36)}`, keepAliveTimeout: 72_000 });

app.addHook('onRequest', (request, reply, done) => {
  if (!LOOPBACK_HOST.test(request.headers.host ?? '')) {
    void reply.code(403).send({ error: 'forbidden host' });
    return;
  }
  void reply.header('x-request-id', request.id);
  if (KEY_DIGEST === undefined || request.url === '/healthz') return done();
  const header = request.headers.authorization ?? '';
  let digest = digests.get(header);
  if (digest === undefined) {
    digest = createHash('sha256')
      .update(header.startsWith('Bearer ') ? header.slice(7) : '')
      .digest();
    if (digests.size >= 1024) digests.clear();
    digests.set(header, digest);
  }
  if (!timingSafeEqual(digest, KEY_DIGEST)) {
    void reply.code(401).send({ error: 'unauthorized' });
    return;
  }
  if (RATE_LIMIT === 0) return done();
  const now = Date.now();
  const window = Math.floor(now / 60_000);
  let counter = windows.get(header);
  if (counter === undefined || counter.window !== window) windows.set(header, (counter = { window, count: 0 }));
  counter.count++;
  void reply.header('x-ratelimit-limit', RATE_LIMIT);
  void reply.header('x-ratelimit-remaining', Math.max(0, RATE_LIMIT - counter.count));
  void reply.header('x-ratelimit-reset', Math.ceil(((window + 1) * 60_000 - now) / 1000));
  if (counter.count > RATE_LIMIT) {
    void reply.code(429).send({ error: 'rate limited' });
    return;
  }
  done();
});

app.get('/healthz', async () => ({ status: 'ok' }));

app.get('/tools', (_request, reply) => {
  void reply.header('etag', '"list"').header('cache-control', 'no-cache').header('vary', 'Accept-Encoding');
  void reply.type('application/json; charset=utf-8').send(toolsList);
});

app.post('/tools/Echo', { schema: { body: ECHO_SCHEMA } }, (request) =>
  Promise.resolve(runEcho(request.body as { text: string }, request.id, 'rest', Number(request.headers['content-length']))),
);

app.post('/mcp', (request, reply) => {
  const message = request.body as { id?: unknown; method?: unknown; params?: { name?: unknown; arguments?: unknown } };
  if (message.method === 'tools/list') return reply.type('application/json; charset=utf-8').send(mcpToolsList);
  if (message.method !== 'tools/call' || message.params?.name !== 'Echo') {
    return reply.send({ jsonrpc: '2.0', id: message.id ?? null, error: { code: -32601, message: 'Method not found' } });
  }
  const input = message.params.arguments;
  if (!validateEcho(input)) {
    return reply.send({ jsonrpc: '2.0', id: message.id, result: { content: [{ type: 'text', text: 'Invalid input' }], isError: true } });
  }
  const result = runEcho(input as { text: string }, request.id, 'mcp', undefined);
  return reply.send({ jsonrpc: '2.0', id: message.id, result: { ...result, resultType: 'complete', _meta: SERVER_INFO } });
});

app.post('/calls', (request, reply) => {
  const blocks = request.body as { type: string; id: string; name: string; input: unknown }[];
  const content = blocks.map((block) => {
    if (block.name !== 'Echo' || !validateEcho(block.input)) {
      return { type: 'tool_result', tool_use_id: block.id, content: [{ type: 'text', text: 'Invalid input' }], is_error: true };
    }
    const result = runEcho(block.input as { text: string }, request.id, 'calls', undefined);
    return { type: 'tool_result', tool_use_id: block.id, content: result.content, is_error: result.isError };
  });
  return reply.send({ role: 'user', content });
});

await app.listen({ port: Number(process.env.PORT ?? 0), host: process.env.HOST ?? '127.0.0.1' });
process.on('SIGTERM', () => {
  log.flush(() => process.exit(0));
});
