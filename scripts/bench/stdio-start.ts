import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { ROOT } from './options.js';
import { pinned } from './pinning.js';
import { median, type RowSummary } from './report.js';
import type { BenchContext } from './targets.js';

/** One start of an MCP stdio server: wall and CPU time from spawn to the answer of its first message. */
export interface StdioStartSlot {
  target: 'toolport' | 'node';
  round: number;
  answerMs: number | undefined;
  /** The process's own CPU time (user + system) when the answer arrived. */
  cpuMs: number | undefined;
  failures: string[];
}

// What a stateless client (Vercel's AI SDK, the 2026 revision) sends first, with a one-second patience.
const DISCOVER = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'server/discover',
  params: { _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} } },
});

// The baseline: bare node reading one line and answering it, the least any stdio server does.
const BARE_NODE = 'process.stdin.once(\'data\', () => process.stdout.write(\'{"jsonrpc":"2.0","id":1,"result":{}}\\n\'))';

const TICKS_PER_S = 100;

/**
 * `toolport mcp` (dist/cli.js, as a desktop client starts it) or bare node, pinned to the server's
 * CPU: spawn, write `server/discover`, wait for the first line of output.
 */
export async function stdioStartSlot(ctx: BenchContext, target: 'toolport' | 'node', round: number): Promise<StdioStartSlot> {
  const slot: StdioStartSlot = { target, round, answerMs: undefined, cpuMs: undefined, failures: [] };
  const args = target === 'toolport' ? [path.join(ROOT, 'dist/cli.js'), 'mcp'] : ['-e', BARE_NODE];
  const { command, args: argv } = pinned(ctx.pinning.serverCpu, process.execPath, args);
  const started = performance.now();
  const child = spawn(command, argv, {
    cwd: ctx.workspace,
    env: { PATH: process.env.PATH ?? '', HOME: ctx.dir, TOOLPORT_WORKSPACE: ctx.workspace, LOG_LEVEL: 'warn' },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  try {
    const answered = await new Promise<string>((resolve, reject) => {
      let out = '';
      const timer = setTimeout(() => reject(new Error(`${target} gave no answer within 10 s: ${stderr.slice(-300)}`)), 10_000);
      child.stdout.on('data', (chunk: Buffer) => {
        out += chunk.toString();
        if (!out.includes('\n')) return;
        clearTimeout(timer);
        slot.answerMs = performance.now() - started;
        slot.cpuMs = cpuMsOf(child.pid!);
        resolve(out);
      });
      child.on('error', reject);
      child.on('exit', (code) => reject(new Error(`${target} exited with ${code} before answering: ${stderr.slice(-300)}`)));
      child.stdin.write(`${DISCOVER}\n`);
    });
    if (!answered.includes('"result"')) slot.failures.push(`${target} answered server/discover with ${answered.slice(0, 300)}`);
  } catch (err) {
    slot.failures.push((err as Error).message);
  } finally {
    child.kill('SIGTERM');
    await new Promise((resolve) => (child.exitCode !== null ? resolve(undefined) : child.once('exit', resolve)));
  }
  return slot;
}

/** User plus system CPU time of a process, from /proc; `taskset` execs node, so the pid is node's. */
function cpuMsOf(pid: number): number | undefined {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS_PER_S;
  } catch {
    return undefined;
  }
}

/** Most CPU `toolport mcp` may spend before its first answer (issue 17: Vercel's client waits one second in all). */
export const STDIO_START_CPU_GOAL_MS = 250;

/** The row: median wall time to the answer against bare node's, and the median CPU time against the goal. */
export function summariseStdioStart(id: string, label: string, slots: readonly StdioStartSlot[]): RowSummary {
  const of = (target: string, key: 'answerMs' | 'cpuMs', round?: number): number[] =>
    slots.filter((s) => s.target === target && (round === undefined || s.round === round)).flatMap((s) => (s[key] === undefined ? [] : [s[key]]));
  const p50Ms = median(of('toolport', 'answerMs'));
  const baseline = median(of('node', 'answerMs'));
  const cpuMs = median(of('toolport', 'cpuMs'));
  const nodeCpuMs = median(of('node', 'cpuMs'));
  const rounds = [...new Set(slots.map((s) => s.round))];
  const ratios = rounds.flatMap((round) => {
    const [t, b] = [median(of('toolport', 'answerMs', round)), median(of('node', 'answerMs', round))];
    return t !== undefined && b ? [t / b] : [];
  });
  const met = cpuMs === undefined ? undefined : cpuMs <= STDIO_START_CPU_GOAL_MS;
  return {
    id,
    label,
    kind: 'latency',
    p50Ms,
    baseline,
    baselineName: 'bare node answering one line',
    ratio: p50Ms !== undefined && baseline ? p50Ms / baseline : undefined,
    ...(ratios.length > 0 ? { ratioRange: [Math.min(...ratios), Math.max(...ratios)] as [number, number] } : {}),
    note: `CPU ${cpuMs ?? '?'} ms (bare node ${nodeCpuMs ?? '?'} ms); goal ≤ ${STDIO_START_CPU_GOAL_MS} ms CPU${met === undefined ? '' : met ? ' (met)' : ' (not met)'}`,
  };
}
