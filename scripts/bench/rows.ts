import { CLIENT_CAPABILITIES_KEY, PROTOCOL_VERSION_KEY } from '../../src/mcp/era.js';
import { MODERN_VERSIONS } from '../../src/mcp/protocol-versions.js';
import type { RequestSpec } from './wrk.js';

/** A goal of issue 10: a throughput ratio to reach (`at least`) or a latency ratio to stay under (`at most`). */
export interface Goal {
  text: string;
  bound: 'at least' | 'at most';
  ratio: number;
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
  /** Served only when toolport answers it with something other than 404 (a route still being built). */
  optional?: boolean;
}

// Config's maximum: far above what one slot sends, so the limiter runs on every call but never refuses.
export const HIGH_RATE_LIMIT = 1_000_000;

// The stateless revision: each POST is one request, no initialize, no session.
const MCP_VERSION = MODERN_VERSIONS[0] ?? '2026-07-28';
const JSON_HEADERS = { 'content-type': 'application/json' };
const MCP_HEADERS = { ...JSON_HEADERS, accept: 'application/json, text/event-stream', 'mcp-protocol-version': MCP_VERSION };
const MCP_META = { [PROTOCOL_VERSION_KEY]: MCP_VERSION, [CLIENT_CAPABILITIES_KEY]: {} };

const get: RequestSpec = { method: 'GET', path: '/tools', headers: {} };
const echo: RequestSpec = { method: 'POST', path: '/tools/Echo', headers: JSON_HEADERS, body: '{"text":"hello"}' };
const calls = [1, 2, 3].map((n) => ({ type: 'tool_use', id: `toolu_${n}`, name: 'Echo', input: { text: `hello ${n}` } }));

const atLeast = (ratio: number, text = `${ratio}x`): Goal => ({ text, bound: 'at least', ratio });
const atMost = (ratio: number): Goal => ({ text: `${ratio}x`, bound: 'at most', ratio });

/** The throughput rows of issue 10, in the order the table shows them. */
export const THROUGHPUT_ROWS: readonly ThroughputRow[] = [
  { id: 'get-tools', label: 'GET /tools, no key', request: get, keyed: false, rateLimit: 0, goal: atLeast(0.9) },
  { id: 'get-tools-keyed', label: 'GET /tools, key and rate limit', request: get, keyed: true, rateLimit: HIGH_RATE_LIMIT, goal: atLeast(0.9) },
  { id: 'echo', label: 'POST /tools/Echo, info audit line to a file', request: echo, keyed: false, rateLimit: 0, goal: undefined },
  {
    id: 'echo-keyed',
    label: 'POST /tools/Echo, key, audit line, metrics, rate limit',
    request: echo,
    keyed: true,
    rateLimit: HIGH_RATE_LIMIT,
    goal: atLeast(0.5, '0.5x, then 0.7x'),
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
    goal: atLeast(0.3),
  },
  {
    id: 'calls',
    label: `POST /calls, ${calls.length} Echo tool_use blocks`,
    request: { method: 'POST', path: '/calls', headers: JSON_HEADERS, body: JSON.stringify(calls) },
    keyed: false,
    rateLimit: 0,
    goal: undefined,
    optional: true,
  },
];

/** Bash `true`, one call after another over one kept-alive connection. */
export const BASH_REQUEST: RequestSpec = { method: 'POST', path: '/tools/Bash', headers: JSON_HEADERS, body: '{"command":"true"}' };
export const BASH_GOAL = atMost(1.5);
export const COLD_START_GOAL = atMost(1.5);
/** Issue 19: a tools/call proxied to an upstream takes at most this much of the direct call's median. */
export const UPSTREAM_GOAL = atMost(1.2);

/** The key a raw baseline reply is recorded under: the method and path, and for MCP the JSON-RPC method. */
export function replyKey(request: RequestSpec): string {
  const base = `${request.method} ${request.path}`;
  if (request.path !== '/mcp' || request.body === undefined) return base;
  return `${base} ${(JSON.parse(request.body) as { method: string }).method}`;
}
