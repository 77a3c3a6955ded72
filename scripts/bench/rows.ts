import { CLIENT_CAPABILITIES_KEY, PROTOCOL_VERSION_KEY } from '../../src/mcp/era.js';
import { MODERN_VERSIONS } from '../../src/mcp/protocol-versions.js';
import type { RequestSpec } from './wrk.js';

/** A goal of issues 10 and 22: a throughput ratio to reach (`at least`) or a latency ratio to stay under (`at most`). */
export interface Goal {
  text: string;
  bound: 'at least' | 'at most';
  ratio: number;
  /**
   * Throughput rows: judged on the ratio to the raw server doing the same work, or to the same
   * stack (Fastify doing the same duties, bench/same-stack.ts), rather than to the bare raw server.
   */
  against?: 'same work' | 'same stack';
}

/** A path measured with wrk against toolport and against the raw baseline. */
export interface ThroughputRow {
  id: string;
  label: string;
  request: RequestSpec;
  /** Toolport is started with an API key, and the request carries it. */
  keyed: boolean;
  /** TOOLPORT_RATE_LIMIT: calls per minute (0: off). */
  rateLimit: number;
  goal: Goal | undefined;
  /** Issue 33: toolport's p99 at most this many times the same stack's. */
  p99Goal?: Goal;
  /** Served only when toolport answers it with something other than 404 (a route still being built). */
  optional?: boolean;
  /** More of toolport's environment for this row (files it names are written by `prepare`). */
  env?: (ctx: RowFiles) => Record<string, string>;
  /**
   * Compare with toolport itself under another environment instead of the raw server: a cost
   * that only toolport has (permission rules) measured against the same server without it.
   */
  baseline?: { name: string; env: (ctx: RowFiles) => Record<string, string> };
}

/** Where a row's files live: the bench's temporary directory, and the key of the keyed rows. */
export interface RowFiles {
  dir: string;
  apiKey: string;
  /** The OTLP endpoint the traced rows export to (otlp-sink.ts), once started. */
  otlpTracesUrl?: string;
}

/** The ten rules of the rules row: what an operator would write for an agent that edits docs and runs tests. */
export const TEN_RULES = {
  allow: ['Read(**)', 'Edit(docs/**)', 'Write(docs/**)', 'Bash(npm test)', 'Bash(git status:*)'],
  deny: ['Read(.env)', 'Read(secrets/**)', 'Read(*.pem)', 'Edit(docs/private/**)', 'Bash(curl:*)'],
};

/** The file the Read rows read, in the bench's workspace. */
export const READ_FILE = 'src/notes.txt';

// Config's maximum: far above what one slot sends, so the limiter runs on every call but never refuses.
export const HIGH_RATE_LIMIT = 1_000_000;

// The stateless revision: each POST is one request, no initialize, no session.
const MCP_VERSION = MODERN_VERSIONS[0] ?? '2026-07-28';
const JSON_HEADERS = { 'content-type': 'application/json' };
const MCP_HEADERS = { ...JSON_HEADERS, accept: 'application/json, text/event-stream', 'mcp-protocol-version': MCP_VERSION };
const MCP_META = { [PROTOCOL_VERSION_KEY]: MCP_VERSION, [CLIENT_CAPABILITIES_KEY]: {} };

const get: RequestSpec = { method: 'GET', path: '/tools', headers: {} };
const read: RequestSpec = { method: 'POST', path: '/tools/Read', headers: JSON_HEADERS, body: JSON.stringify({ file_path: READ_FILE }) };
const keysFile = (ctx: RowFiles, permissions?: object): Record<string, string> => ({
  TOOLPORT_API_KEYS_FILE: `${ctx.dir}/keys-${permissions === undefined ? 'plain' : 'rules'}.json`,
});
const echo: RequestSpec = { method: 'POST', path: '/tools/Echo', headers: JSON_HEADERS, body: '{"text":"hello"}' };
const calls = [1, 2, 3].map((n) => ({ type: 'tool_use', id: `toolu_${n}`, name: 'Echo', input: { text: `hello ${n}` } }));

/** Tracing on, exported to the run's OTLP sink, with this sampler. */
function traced(ctx: RowFiles, sampler: string, ratio?: string): Record<string, string> {
  if (ctx.otlpTracesUrl === undefined) throw new Error('a traced row needs the OTLP sink started');
  return {
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: ctx.otlpTracesUrl,
    OTEL_TRACES_SAMPLER: sampler,
    ...(ratio === undefined ? {} : { OTEL_TRACES_SAMPLER_ARG: ratio }),
  };
}

const atLeast = (ratio: number, text = `${ratio}x`): Goal => ({ text, bound: 'at least', ratio });
const atMost = (ratio: number): Goal => ({ text: `${ratio}x`, bound: 'at most', ratio });
// Issue 33: judged against the same stack, the framework both use doing the same duties.
const sameStack = (goal: Goal): Goal => ({ ...goal, against: 'same stack' });

/** The throughput rows of issue 10, in the order the table shows them. */
export const THROUGHPUT_ROWS: readonly ThroughputRow[] = [
  { id: 'get-tools', label: 'GET /tools, no key', request: get, keyed: false, rateLimit: 0, goal: sameStack(atLeast(0.9)) },
  {
    id: 'get-tools-keyed',
    label: 'GET /tools, key and rate limit',
    request: get,
    keyed: true,
    rateLimit: HIGH_RATE_LIMIT,
    goal: sameStack(atLeast(0.9)),
    p99Goal: sameStack(atMost(1.5)),
  },
  { id: 'echo', label: 'POST /tools/Echo, info audit line to a file', request: echo, keyed: false, rateLimit: 0, goal: sameStack(atLeast(0.85)) },
  {
    id: 'echo-keyed',
    label: 'POST /tools/Echo, key, audit line, metrics, rate limit',
    request: echo,
    keyed: true,
    rateLimit: HIGH_RATE_LIMIT,
    // Issue 33: at least 0.85x the same stack, with a p99 at most 1.5x its.
    goal: sameStack(atLeast(0.85)),
    p99Goal: sameStack(atMost(1.5)),
  },
  // Issue 34: the cost of tracing, against the same server without it.
  {
    id: 'echo-keyed-traced',
    label: 'POST /tools/Echo keyed, every call traced (OTLP/protobuf), against the same without tracing',
    request: echo,
    keyed: true,
    rateLimit: HIGH_RATE_LIMIT,
    goal: atLeast(0.85),
    env: (ctx) => traced(ctx, 'parentbased_always_on'),
    baseline: { name: 'toolport keyed, tracing off', env: () => ({}) },
  },
  {
    id: 'echo-keyed-traced-1pct',
    label: 'POST /tools/Echo keyed, 1% of calls traced (parent-based), against the same without tracing',
    request: echo,
    keyed: true,
    rateLimit: HIGH_RATE_LIMIT,
    goal: atLeast(0.98),
    env: (ctx) => traced(ctx, 'parentbased_traceidratio', '0.01'),
    baseline: { name: 'toolport keyed, tracing off', env: () => ({}) },
  },
  {
    id: 'mcp-tools-list',
    label: `MCP tools/list (POST /mcp, ${MCP_VERSION})`,
    request: {
      method: 'POST',
      path: '/mcp',
      headers: { ...MCP_HEADERS, 'mcp-method': 'tools/list' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: MCP_META } }),
    },
    keyed: false,
    rateLimit: 0,
    goal: atLeast(0.3),
  },
  {
    id: 'mcp-tools-call',
    label: `MCP tools/call Echo (POST /mcp, ${MCP_VERSION})`,
    request: {
      method: 'POST',
      path: '/mcp',
      headers: { ...MCP_HEADERS, 'mcp-method': 'tools/call', 'mcp-name': 'Echo' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'Echo', arguments: { text: 'hello' }, _meta: MCP_META } }),
    },
    keyed: false,
    rateLimit: 0,
    goal: sameStack(atLeast(0.8)),
  },
  {
    id: 'read-rules',
    label: 'POST /tools/Read, key with ten permission rules',
    request: read,
    keyed: true,
    rateLimit: 0,
    goal: atLeast(0.95),
    env: (ctx) => keysFile(ctx, TEN_RULES),
    baseline: { name: 'toolport, same key without rules', env: (ctx) => keysFile(ctx) },
  },
  {
    id: 'calls',
    label: `POST /calls, ${calls.length} Echo tool_use blocks`,
    request: { method: 'POST', path: '/calls', headers: JSON_HEADERS, body: JSON.stringify(calls) },
    keyed: false,
    rateLimit: 0,
    goal: sameStack(atLeast(0.8)),
    optional: true,
  },
];

/** Bash `true`, one call after another over one kept-alive connection. */
export const BASH_REQUEST: RequestSpec = { method: 'POST', path: '/tools/Bash', headers: JSON_HEADERS, body: '{"command":"true"}' };
export const BASH_GOAL = atMost(1.5);
/** Issue 22: the default (sandboxed) Bash at most 2x a bare spawn at p50 (and 3x at p99, read from the table). */
export const BASH_DEFAULT_GOAL = atMost(2.0);
/** Issue 29 point 7: Bash under Landlock and seccomp at most 2x a bare spawn at p50, back to back. */
export const BASH_LANDLOCK_GOAL = atMost(2.0);
/** Issue 29 point 7: and at most 1.5x at p50 when the calls come 100 ms apart. */
export const BASH_LANDLOCK_SPACED_GOAL = atMost(1.5);
/** Issue 22: the time to the first `/healthz` 200 at most 1.3x a bare Fastify server's. */
export const COLD_START_GOAL = atMost(1.3);
/** Issue 19: a tools/call proxied to an upstream takes at most this much of the direct call's median. */
export const UPSTREAM_GOAL = atMost(1.2);

/** The key a raw baseline reply is recorded under: the method and path, and for MCP the JSON-RPC method. */
export function replyKey(request: RequestSpec): string {
  const base = `${request.method} ${request.path}`;
  if (request.path !== '/mcp' || request.body === undefined) return base;
  return `${base} ${(JSON.parse(request.body) as { method: string }).method}`;
}
