/**
 * Issue 22's rows on what the tool count costs: toolport started with a plug-in of 10, 100 and
 * 1,000 generated tools (test/fixtures/generated-tools.ts: five properties each, an enum, a nested
 * object, a pattern), and per slot: the time to the first `/healthz`, RSS after start, `GET /tools`
 * in full (identity, and brotli once made) and answered 304, MCP `tools/list`, and one tool's call,
 * each timed sequentially over one kept-alive connection. Each figure of 100 and 1,000 tools is
 * compared with the same figure of 10 tools: a call should not grow with the count.
 */
import { readFile, writeFile } from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import { transform } from 'esbuild';
import { ROOT } from './options.js';
import { rssOf } from './processes.js';
import { median, percentile, type RowSummary } from './report.js';
import { THROUGHPUT_ROWS } from './rows.js';
import { withServer } from './slots.js';
import { nodeStripsTypes, toolportSpec, type BenchContext } from './targets.js';
import type { RequestSpec } from './wrk.js';

const FIXTURE = path.join(ROOT, 'test/fixtures/generated-tools.ts');
const JSON_HEADERS = { 'content-type': 'application/json' };
// Issue 22's goals for 1,000 tools.
const START_GOAL_MS = 1000;
const RSS_GOAL_BYTES_PER_TOOL = 30 * 1024;

/** A row per tool count, selectable with `--only tools-1000`. */
export const TOOL_COUNT_ROWS = [10, 100, 1000].map((count) => ({ id: `tools-${count}`, label: `${count} registered tools`, count }));
export type ToolCountRow = (typeof TOOL_COUNT_ROWS)[number];

const MEASURES = ['list', 'list-br', 'list-304', 'mcp-list', 'call'] as const;
type Measure = (typeof MEASURES)[number];
const MEASURE_LABELS: Record<Measure, string> = {
  list: 'GET /tools, full',
  'list-br': 'GET /tools, brotli',
  'list-304': 'GET /tools, 304',
  'mcp-list': 'MCP tools/list',
  call: 'POST /tools/Generated0000',
};

/** One server started with a row's tools, and what was measured on it. */
export interface ToolCountSlot {
  count: number;
  round: number;
  readyMs: number | undefined;
  rssStartBytes: number | undefined;
  rssEndBytes: number | undefined;
  /** The anthropic list's bytes as sent: identity, gzip, brotli. */
  listBytes: { identity: number; gzip: number; br: number } | undefined;
  latenciesMs: Partial<Record<Measure, number[]>>;
  failures: string[];
}

/** Starts toolport with `row.count` generated tools and measures it; failures are recorded, never thrown. */
export async function toolCountSlot(ctx: BenchContext, row: ToolCountRow, round: number): Promise<ToolCountSlot> {
  const slot: ToolCountSlot = {
    count: row.count,
    round,
    readyMs: undefined,
    rssStartBytes: undefined,
    rssEndBytes: undefined,
    listBytes: undefined,
    latenciesMs: {},
    failures: [],
  };
  const spec = toolportSpec(ctx, `${row.id}-${round}`, { TOOLPORT_PLUGINS: await pluginFile(ctx), GENERATED_TOOLS: String(row.count), LOG_LEVEL: 'warn' });
  const calls = ctx.options.quick ? 5 : 100;
  await withServer(spec, 'toolport', slot.failures, async (server) => {
    slot.readyMs = server.readyMs;
    slot.rssStartBytes = await rssOf(server.pid);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const plain = await send(agent, server.url, { method: 'GET', path: '/tools', headers: {} });
      const gzip = await send(agent, server.url, { method: 'GET', path: '/tools', headers: { 'accept-encoding': 'gzip' } });
      const br = await send(agent, server.url, { method: 'GET', path: '/tools', headers: { 'accept-encoding': 'br' } });
      slot.listBytes = { identity: plain.bytes, gzip: gzip.bytes, br: br.bytes };
      const requests: Record<Measure, { request: RequestSpec; status: number }> = {
        list: { request: { method: 'GET', path: '/tools', headers: {} }, status: 200 },
        'list-br': { request: { method: 'GET', path: '/tools', headers: { 'accept-encoding': 'gzip, deflate, br' } }, status: 200 },
        'list-304': { request: { method: 'GET', path: '/tools', headers: { 'if-none-match': plain.etag } }, status: 304 },
        'mcp-list': { request: THROUGHPUT_ROWS.find((r) => r.id === 'mcp-tools-list')!.request, status: 200 },
        call: { request: { method: 'POST', path: '/tools/Generated0000', headers: JSON_HEADERS, body: '{"id":"ab-1234","mode":"exact"}' }, status: 200 },
      };
      for (const measure of MEASURES) {
        const { request, status } = requests[measure];
        const latencies: number[] = [];
        // A tenth as many unmeasured first, so the JIT and the lazily compiled validators are warm.
        for (let i = 0; i < calls + Math.ceil(calls / 10); i++) {
          const started = performance.now();
          const answer = await send(agent, server.url, request);
          if (i >= Math.ceil(calls / 10)) latencies.push(Math.round((performance.now() - started) * 1000) / 1000);
          if (answer.status !== status) {
            slot.failures.push(`${row.id}: ${request.method} ${request.path} answered ${answer.status}, not ${status}`);
            break;
          }
        }
        slot.latenciesMs[measure] = latencies;
      }
    } finally {
      agent.destroy();
    }
    slot.rssEndBytes = await rssOf(server.pid);
  });
  return slot;
}

/**
 * The plug-in as toolport loads it: the fixture itself where Node strips types (22.18 and later),
 * else the fixture with its types removed by esbuild, written once into the run's directory, so
 * that no TypeScript loader is in the start-up being measured.
 */
function pluginFile(ctx: BenchContext): Promise<string> {
  if (nodeStripsTypes()) return Promise.resolve(FIXTURE);
  let file = transpiled.get(ctx.dir);
  if (file === undefined) transpiled.set(ctx.dir, (file = transpile(path.join(ctx.dir, 'generated-tools.mjs'))));
  return file;
}

// By run directory: every slot of a run loads the one file.
const transpiled = new Map<string, Promise<string>>();

async function transpile(file: string): Promise<string> {
  const { code } = await transform(await readFile(FIXTURE, 'utf8'), { loader: 'ts', format: 'esm', target: 'node20' });
  await writeFile(file, code);
  return file;
}

/** The table's lines: per count, start-up and each measure, compared with the same figure at 10 tools. */
export function summariseToolCounts(slots: readonly ToolCountSlot[]): RowSummary[] {
  const counts = [...new Set(slots.map((s) => s.count))].sort((a, b) => a - b);
  const smallest = counts[0];
  const of = (count: number | undefined) => slots.filter((s) => s.count === count);
  const rss = (count: number | undefined) => median(defined(of(count).map((s) => s.rssStartBytes)));
  const summaries: RowSummary[] = [];
  for (const count of counts) {
    const mine = of(count);
    const readyMs = median(defined(mine.map((s) => s.readyMs)));
    const baseReady = median(defined(of(smallest).map((s) => s.readyMs)));
    const rssStart = rss(count);
    const perTool = count === smallest || rssStart === undefined || rss(smallest) === undefined ? undefined : (rssStart - rss(smallest)!) / (count - smallest!);
    const bytes = mine.find((s) => s.listBytes !== undefined)?.listBytes;
    const notes = [
      perTool === undefined ? undefined : `${(perTool / 1024).toFixed(0)} KB RSS a tool over ${smallest}`,
      count >= 1000 && readyMs !== undefined ? `goal < ${START_GOAL_MS} ms: ${readyMs < START_GOAL_MS ? 'met' : 'not met'}` : undefined,
      count >= 1000 && perTool !== undefined ? `goal < 30 KB a tool: ${perTool < RSS_GOAL_BYTES_PER_TOOL ? 'met' : 'not met'}` : undefined,
    ].filter((n) => n !== undefined);
    summaries.push({
      id: `tools-${count}`,
      label: `${count} tools: start to first /healthz${notes.length > 0 ? ` (${notes.join('; ')})` : ''}`,
      kind: 'latency',
      p50Ms: readyMs,
      baseline: baseReady,
      baselineName: `${smallest} tools`,
      ratio: readyMs !== undefined && baseReady ? readyMs / baseReady : undefined,
      rssStartBytes: rssStart,
      rssEndBytes: median(defined(mine.map((s) => s.rssEndBytes))),
    });
    for (const measure of MEASURES) {
      const lat = (ss: readonly ToolCountSlot[], f: (values: number[]) => number | undefined) =>
        median(defined(ss.map((s) => f(s.latenciesMs[measure] ?? []))));
      const p50Ms = lat(mine, median);
      const baseline = lat(of(smallest), median);
      const size =
        bytes === undefined || !measure.startsWith('list') || measure === 'list-304' ? '' : `, ${kb(measure === 'list' ? bytes.identity : bytes.br)}`;
      summaries.push({
        id: `tools-${count}`,
        label: `${count} tools: ${MEASURE_LABELS[measure]}${size}${measure === 'list-br' && bytes !== undefined ? ` (gzip ${kb(bytes.gzip)})` : ''}`,
        kind: 'latency',
        p50Ms,
        p90Ms: lat(mine, (v) => percentile(v, 90)),
        p99Ms: lat(mine, (v) => percentile(v, 99)),
        baseline,
        baselineName: `${smallest} tools`,
        ratio: p50Ms !== undefined && baseline ? p50Ms / baseline : undefined,
      });
    }
  }
  return summaries;
}

function kb(bytes: number): string {
  return `${(bytes / 1024).toFixed(1)} KB`;
}

function defined(values: ReadonlyArray<number | undefined>): number[] {
  return values.filter((v): v is number => v !== undefined);
}

/** One request over `agent`: its status, the bytes of its body as received, and its ETag. */
function send(agent: http.Agent, url: string, request: RequestSpec): Promise<{ status: number; bytes: number; etag: string }> {
  return new Promise((resolve, reject) => {
    const body = request.body ?? '';
    const headers = { ...request.headers, 'content-length': String(Buffer.byteLength(body)) };
    const req = http.request(`${url}${request.path}`, { method: request.method, agent, headers }, (res) => {
      let bytes = 0;
      res.on('data', (chunk: Buffer) => (bytes += chunk.length));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, bytes, etag: String(res.headers.etag ?? '') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}
