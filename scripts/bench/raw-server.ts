/**
 * The baseline of `npm run bench`: a bare node:http server doing the work of each benchmarked path
 * and nothing more. `node scripts/bench/raw-server.ts REPLIES.json` (Node strips the types; this
 * file imports nothing but node: modules so that it needs no loader) listens on `PORT` and:
 *
 * - `GET <path>`: sends the bytes recorded for it (toolport's own `GET /tools` answer, prebuilt);
 * - `POST <path>`: reads the body, parses it as JSON, and sends the bytes toolport answered to
 *   the same request; for `/mcp` the reply is chosen by the JSON-RPC method, as a raw JSON-RPC
 *   responder would;
 * - `POST /tools/Bash`: runs the body's command with `spawn('bash', ['-c', command])`, collects
 *   its output, and answers a ToolResult when it has exited.
 *
 * So a ratio compares toolport with the least a server must do to give the same answer (`ratio bare`).
 *
 * With `RAW_SAME_WORK=1` it also does the work every toolport call does (`ratio same work`): with
 * `RAW_API_KEY` set, a constant-time check of the bearer key (401 otherwise) and a count per key
 * and minute (the rate limit's); a count per tool (the metrics'); and one audit line per tool
 * call (three for `/calls` with three blocks) as toolport writes it: a pino JSON line at info,
 * gathered into 16 KB batches or every 250 ms and written off the event loop to standard output.
 */
import { spawn } from 'node:child_process';
import { timingSafeEqual } from 'node:crypto';
import { readFileSync, write } from 'node:fs';
import http from 'node:http';
import { hostname } from 'node:os';

/** What toolport answered to one request, recorded by the benchmark before the run. */
interface RecordedReply {
  status: number;
  contentType: string;
  body: string;
}

interface Prepared {
  status: number;
  headers: Record<string, string | number>;
  body: Buffer;
}

const file = process.argv[2];
if (file === undefined) throw new Error('usage: node raw-server.ts REPLIES.json');
const recorded = JSON.parse(readFileSync(file, 'utf8')) as Record<string, RecordedReply>;
const replies = new Map<string, Prepared>();
for (const [key, reply] of Object.entries(recorded)) {
  const body = Buffer.from(reply.body);
  replies.set(key, { status: reply.status, headers: { 'content-type': reply.contentType, 'content-length': body.length }, body });
}

const SAME_WORK = process.env.RAW_SAME_WORK === '1';
const API_KEY = process.env.RAW_API_KEY === undefined ? undefined : Buffer.from(`Bearer ${process.env.RAW_API_KEY}`);
// What toolport's log destination batches (src/infra/log-destination.ts): hand over at 16 KB or every 250 ms.
const LOG_BATCH_BYTES = 16 * 1024;
const LOG_FLUSH_INTERVAL_MS = 250;
const LOG_PREFIX = `{"level":30,"time":`;
const LOG_BINDINGS = `,"pid":${process.pid},"hostname":${JSON.stringify(hostname())}`;

const callsPerKeyAndMinute = new Map<string, number>();
const callsPerTool = new Map<string, number>();
let requestIds = 0;
let lines: string[] = [];
let pendingBytes = 0;
let writing = false;

/** Writes the batch off the event loop, as sonic-boom does; one write at a time. */
function handOver(): void {
  if (pendingBytes === 0 || writing) return;
  const batch = Buffer.from(lines.join(''));
  lines = [];
  pendingBytes = 0;
  writing = true;
  write(1, batch, () => {
    writing = false;
    if (pendingBytes >= LOG_BATCH_BYTES) handOver();
  });
}
if (SAME_WORK) setInterval(handOver, LOG_FLUSH_INTERVAL_MS).unref();

/** One tool call's audit line and counts, with the fields toolport's executor logs for the same call. */
function audit(tool: string, transport: 'rest' | 'calls' | 'mcp', inputBytes?: number): void {
  callsPerTool.set(tool, (callsPerTool.get(tool) ?? 0) + 1);
  const fields = { reqId: `req-${(++requestIds).toString(36)}`, tool, ms: 0.01, outcome: 'ok', inputBytes, key: API_KEY ? 'key-1' : undefined, transport };
  const line = `${LOG_PREFIX}${Date.now()}${LOG_BINDINGS},${JSON.stringify(fields).slice(1, -1)},"msg":"tool call"}\n`;
  lines.push(line);
  pendingBytes += line.length;
  if (pendingBytes >= LOG_BATCH_BYTES) handOver();
}

/** The key check and the rate limit's count; false (and a 401 sent) when the key is wrong. */
function admitted(req: http.IncomingMessage, res: http.ServerResponse): boolean {
  if (API_KEY === undefined) return true;
  const given = Buffer.from(req.headers.authorization ?? '');
  if (given.length !== API_KEY.length || !timingSafeEqual(given, API_KEY)) {
    sendJson(res, 401, { error: 'unauthorized' });
    return false;
  }
  const window = `bench ${Math.floor(Date.now() / 60_000)}`;
  callsPerKeyAndMinute.set(window, (callsPerKeyAndMinute.get(window) ?? 0) + 1);
  return true;
}

/** The audit lines of one request: one per tool it calls. */
function auditCalls(url: string, message: unknown, inputBytes: number): void {
  if (url.startsWith('/tools/')) return audit(url.slice('/tools/'.length), 'rest', inputBytes);
  if (url === '/calls' && Array.isArray(message)) {
    for (const block of message as { name?: unknown }[]) audit(String(block.name), 'calls');
    return;
  }
  const rpc = message as { method?: unknown; params?: { name?: unknown } } | null;
  if (url === '/mcp' && rpc?.method === 'tools/call') audit(String(rpc.params?.name), 'mcp');
}

function send(res: http.ServerResponse, reply: Prepared | undefined): void {
  if (reply === undefined) {
    res.writeHead(404, { 'content-length': 0 });
    res.end();
    return;
  }
  res.writeHead(reply.status, reply.headers);
  res.end(reply.body);
}

function sendJson(res: http.ServerResponse, status: number, value: unknown): void {
  const body = JSON.stringify(value);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

/** What a bare Bash tool does: spawn, collect stdout and stderr, answer once the process has exited. */
function runBash(res: http.ServerResponse, input: unknown): void {
  const command = (input as { command?: unknown } | null)?.command;
  if (typeof command !== 'string') return sendJson(res, 400, { error: 'command must be a string' });
  // stdin from /dev/null, as toolport does: libuv's pipes are socket pairs, and bash with a socket
  // on stdin takes itself for an ssh session and reads ~/.bashrc first (100 ms with pyenv's there).
  const child = spawn('bash', ['-c', command], { stdio: ['ignore', 'pipe', 'pipe'] });
  const chunks: Buffer[] = [];
  child.stdout.on('data', (chunk: Buffer) => chunks.push(chunk));
  child.stderr.on('data', (chunk: Buffer) => chunks.push(chunk));
  child.on('close', (code) => {
    const output = Buffer.concat(chunks).toString('utf8');
    sendJson(res, 200, { content: [{ type: 'text', text: output === '' ? '(no output)' : output }], isError: code !== 0 });
  });
}

const server = http.createServer((req, res) => {
  const url = req.url ?? '/';
  if (SAME_WORK && url !== '/healthz' && !admitted(req, res)) {
    req.resume();
    return;
  }
  if (req.method !== 'POST') {
    req.resume();
    return send(res, replies.get(`${req.method} ${url}`));
  }
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    let message: unknown;
    try {
      message = JSON.parse(body.toString('utf8'));
    } catch {
      return sendJson(res, 400, { error: 'the body is not JSON' });
    }
    if (url === '/tools/Bash') return runBash(res, message);
    if (SAME_WORK) auditCalls(url, message, body.length);
    const method = (message as { method?: unknown } | null)?.method;
    send(res, replies.get(url === '/mcp' ? `POST /mcp ${String(method)}` : `POST ${url}`));
  });
});
server.keepAliveTimeout = 72_000;
server.listen(Number(process.env.PORT ?? 0), process.env.HOST ?? '127.0.0.1');
process.on('SIGTERM', () => {
  // What waits is written before the exit, as toolport's destination does.
  if (pendingBytes > 0) process.stdout.write(lines.join(''), () => process.exit(0));
  else process.exit(0);
});
