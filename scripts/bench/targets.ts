import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ROOT, type BenchOptions } from './options.js';
import type { Pinning } from './pinning.js';
import { startServer, stopServer, type ServerSpec } from './processes.js';
import { replyKey, type ThroughputRow } from './rows.js';
import type { RequestSpec } from './wrk.js';

/** What every slot of one run shares. */
export interface BenchContext {
  options: BenchOptions;
  pinning: Pinning;
  /** Temporary directory: logs, wrk scripts, the recorded replies. */
  dir: string;
  /** TOOLPORT_WORKSPACE of every toolport started. */
  workspace: string;
  /** The recorded replies the raw baseline sends (see raw-server.ts). */
  repliesFile: string;
  /** The API key of the keyed rows. */
  apiKey: string;
  /** Where the traced rows export their spans (otlp-sink.ts), when one of them runs. */
  otlpTracesUrl?: string;
}

/** A toolport answer as the raw baseline replays it. */
export interface RecordedReply {
  status: number;
  contentType: string;
  body: string;
}

const RAW_SERVER = path.join(ROOT, 'scripts/bench/raw-server.ts');
const BARE_FASTIFY = path.join(ROOT, 'scripts/bench/bare-fastify.mjs');
const SAME_STACK = path.join(ROOT, 'bench/same-stack.ts');

let slots = 0;
/** A new log file in the run's directory, numbered in the order of the slots. */
export const logFile = (ctx: BenchContext, name: string): string => path.join(ctx.dir, `${String(++slots).padStart(3, '0')}-${name}.log`);

/**
 * `node dist/server.js` as it runs in production, with an info log written to a file: Bash without
 * its sandbox (so that Bash is compared with a bare spawn), a queue deep enough for every
 * connection, also for one caller (a keyed row's connections are all one key's), the rate limit
 * off unless `env` sets it.
 */
export function toolportSpec(ctx: BenchContext, name: string, env: Record<string, string> = {}): ServerSpec {
  return {
    command: process.execPath,
    args: ['dist/server.js'],
    cwd: ROOT,
    env: {
      LOG_LEVEL: 'info',
      TOOLPORT_WORKSPACE: ctx.workspace,
      TOOLPORT_BASH_SANDBOX: 'false',
      TOOLPORT_RATE_LIMIT: '0',
      TOOLPORT_QUEUE_SIZE: String(Math.max(64, ctx.options.connections)),
      TOOLPORT_QUEUE_PER_CALLER: String(Math.max(64, ctx.options.connections)),
      ...env,
    },
    logFile: logFile(ctx, `toolport-${name}`),
    cpu: ctx.pinning.serverCpu,
  };
}

/** Toolport's defaults, for the cold start: only the address, the workspace and the log file are given. */
export function toolportDefaultsSpec(ctx: BenchContext, name: string): ServerSpec {
  return { ...toolportSpec(ctx, name), env: { TOOLPORT_WORKSPACE: ctx.workspace } };
}

/**
 * The raw node:http baseline, replaying the recorded replies: bare, or doing the same work as
 * toolport's call (`sameWork`: the key check when `apiKey` is given, the counts, the audit lines).
 */
export function rawSpec(ctx: BenchContext, name: string, sameWork?: { apiKey: string | undefined }): ServerSpec {
  const env: Record<string, string> =
    sameWork === undefined ? {} : { RAW_SAME_WORK: '1', ...(sameWork.apiKey !== undefined && { RAW_API_KEY: sameWork.apiKey }) };
  return {
    command: process.execPath,
    args: [...typeScriptEntry(RAW_SERVER), ctx.repliesFile],
    cwd: ROOT,
    env,
    logFile: logFile(ctx, `raw-${name}`),
    cpu: ctx.pinning.serverCpu,
  };
}

/**
 * The same-stack baseline (bench/same-stack.ts): Fastify doing toolport's per-call duties plainly;
 * with the key and rate limit of a keyed row when `keyed`.
 */
export function sameStackSpec(ctx: BenchContext, name: string, keyed: { apiKey: string; rateLimit: number } | undefined): ServerSpec {
  const env: Record<string, string> = keyed === undefined ? {} : { SAME_STACK_API_KEY: keyed.apiKey, SAME_STACK_RATE_LIMIT: String(keyed.rateLimit) };
  return {
    command: process.execPath,
    args: [...typeScriptEntry(SAME_STACK), ctx.repliesFile],
    cwd: ROOT,
    env,
    logFile: logFile(ctx, `same-stack-${name}`),
    cpu: ctx.pinning.serverCpu,
  };
}

/** The bare Fastify server of the cold-start comparison. */
export function bareFastifySpec(ctx: BenchContext, name: string): ServerSpec {
  return { command: process.execPath, args: [BARE_FASTIFY], cwd: ROOT, env: {}, logFile: logFile(ctx, `fastify-${name}`), cpu: ctx.pinning.serverCpu };
}

/** The request of a row as sent to both servers: with the key when the row is keyed. */
export function rowRequest(ctx: BenchContext, row: ThroughputRow): RequestSpec {
  return row.keyed ? { ...row.request, headers: { ...row.request.headers, authorization: `Bearer ${ctx.apiKey}` } } : row.request;
}

/**
 * Asks a toolport (no key, rate limit off) each row's request once and writes its answers for the
 * raw baseline to replay. A row marked optional that answers 404 is not served yet; any other
 * answer outside 2xx is a failure of that row, which is then left out.
 */
export async function recordReplies(
  ctx: BenchContext,
  rows: readonly ThroughputRow[],
): Promise<{ served: ThroughputRow[]; notServed: ThroughputRow[]; failures: string[] }> {
  const server = await startServer(toolportSpec(ctx, 'record'));
  const replies: Record<string, RecordedReply> = {};
  const served: ThroughputRow[] = [];
  const notServed: ThroughputRow[] = [];
  const failures: string[] = [];
  try {
    const record = async (request: RequestSpec): Promise<RecordedReply> => {
      const response = await fetch(`${server.url}${request.path}`, { method: request.method, headers: request.headers, body: request.body ?? null });
      return { status: response.status, contentType: response.headers.get('content-type') ?? 'application/octet-stream', body: await response.text() };
    };
    replies['GET /healthz'] = await record({ method: 'GET', path: '/healthz', headers: {} });
    for (const row of rows) {
      const reply = await record(row.request);
      if (row.optional && reply.status === 404) {
        notServed.push(row);
      } else if (reply.status < 200 || reply.status > 299) {
        failures.push(`${row.label}: toolport answered ${reply.status} ${reply.body.slice(0, 300)}`);
      } else {
        replies[replyKey(row.request)] = reply;
        served.push(row);
      }
    }
  } finally {
    await stopServer(server);
  }
  await writeFile(ctx.repliesFile, JSON.stringify(replies, null, 2));
  return { served, notServed, failures };
}

/** Whether this Node runs TypeScript by stripping its types (22.18 and 23.6 on). */
export function nodeStripsTypes(): boolean {
  return typeof (process.features as { typescript?: unknown }).typescript === 'string';
}

/** Node runs TypeScript by stripping its types from 22.18 and 23.6 on; before that, through tsx. */
function typeScriptEntry(file: string): string[] {
  return nodeStripsTypes() ? [file] : ['--import', 'tsx', file];
}
