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
 * So a ratio compares toolport with the least a server must do to give the same answer.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import http from 'node:http';

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
  if (req.method !== 'POST') {
    req.resume();
    return send(res, replies.get(`${req.method} ${url}`));
  }
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    let message: unknown;
    try {
      message = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      return sendJson(res, 400, { error: 'the body is not JSON' });
    }
    if (url === '/tools/Bash') return runBash(res, message);
    const method = (message as { method?: unknown } | null)?.method;
    send(res, replies.get(url === '/mcp' ? `POST /mcp ${String(method)}` : `POST ${url}`));
  });
});
server.keepAliveTimeout = 72_000;
server.listen(Number(process.env.PORT ?? 0), process.env.HOST ?? '127.0.0.1');
process.on('SIGTERM', () => process.exit(0));
