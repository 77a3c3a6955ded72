/**
 * What one caller's worst lines cost another's Bash rules: `npm run bench:bash-rules [-- --checks 2000] [-- --calls 200]`.
 *
 * Two measurements, each alone and then while a hostile caller keeps 16 of the costliest 64 KiB
 * lines it can write in flight (each read to its last character, then refused): the rule check of
 * another caller's `git status --short`, and that caller's whole Bash call through the server
 * (app.inject, sandbox as `auto` finds it), which is issue 30's goal: at most 2x the unloaded p50.
 * Also times one hostile line alone. Prints milliseconds.
 */
import { mkdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { serverPermissions } from '../src/permissions/catalog.js';
import { createToolset } from '../src/assembly/toolset.js';
import { buildApp } from '../src/http/app.js';
import { Workspace } from '../src/os/fs/workspace.js';
import { checkCommandLine, MAX_LINE_BYTES, parseCommandPattern } from '../src/permissions/bash/check.js';

const { values } = parseArgs({ options: { checks: { type: 'string', default: '2000' }, calls: { type: 'string', default: '200' } } });
const checks = Number(values.checks);
const calls = Number(values.calls);
const rules = { allow: ['git status:*', 'echo:*'].map(parseCommandPattern), deny: [parseCommandPattern('rm:*')] };
const HOSTILE = [
  `echo ${'a '.repeat(MAX_LINE_BYTES / 2 - 3)}`,
  `echo "${'\\\\\n'.repeat(MAX_LINE_BYTES / 3 - 4)}"`,
  `echo ${'$x'.repeat(MAX_LINE_BYTES / 2 - 3)}`,
  `echo ${"'a'".repeat(MAX_LINE_BYTES / 3 - 3)}`,
].map((line) => `${line.slice(0, MAX_LINE_BYTES - 2)} \``);

async function timeChecks(line: string, caller: string, count: number): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < count; i++) {
    const start = performance.now();
    await checkCommandLine(line, rules, { caller });
    times.push(performance.now() - start);
  }
  return times.sort((a, b) => a - b);
}

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] as number;
}

function row(label: string, sorted: readonly number[]): string {
  return `${label}: p50 ${percentile(sorted, 50).toFixed(3)} ms, p99 ${percentile(sorted, 99).toFixed(3)} ms (${sorted.length} checks)`;
}

await timeChecks('git status --short', 'warm-up', 200);
const alone = await timeChecks('git status --short', 'other', checks);
const hostileAlone = (await Promise.all(HOSTILE.map((line) => timeChecks(line, 'hostile', 20)))).flat().sort((a, b) => a - b);

let running = true;
let hostileChecks = 0;
async function flood(): Promise<void> {
  for (let i = 0; running; i++) {
    await checkCommandLine(HOSTILE[i % HOSTILE.length] as string, rules, { caller: 'hostile' });
    hostileChecks++;
  }
}
const floods = Array.from({ length: 16 }, () => flood());
const loaded = await timeChecks('git status --short', 'other', checks);
running = false;
await Promise.all(floods);

process.stdout.write(`${row('one hostile 64 KiB line, alone', hostileAlone)}\n`);
process.stdout.write(`${row("another caller's git status, alone", alone)}\n`);
process.stdout.write(`${row(`the same while a hostile caller keeps 16 such lines in flight (${hostileChecks} checked)`, loaded)}\n`);
process.stdout.write(`check: loaded p50 / unloaded p50 ${(percentile(loaded, 50) / percentile(alone, 50)).toFixed(2)}x\n`);

// Through the server: another key's Bash call, alone and while the hostile key floods.
const root = path.join(tmpdir(), `toolport-fairness-${process.pid}`);
await mkdir(path.join(root, 'ws'), { recursive: true });
const workspace = await Workspace.open(path.join(root, 'ws'));
const registry = await createToolset({ workspace: workspace.root, tools: ['Bash'], plugins: [], bashSandbox: 'auto' }, root, undefined, workspace);
const permissions = await serverPermissions({}, registry.list(), []);
const keyRules = { allow: ['Bash(git status:*)', 'Bash(echo:*)'] };
const app = await buildApp({
  registry,
  apiKeys: [
    { label: 'other', key: 'other-key-0123456789abcdef', permissions: keyRules },
    { label: 'hostile', key: 'hostile-key-0123456789abcdef', permissions: keyRules },
  ],
  permissions,
});
const statuses = new Map<string, number>();
async function call(key: string, command: string): Promise<number> {
  const start = performance.now();
  const res = await app.inject({
    method: 'POST',
    url: '/tools/Bash',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    payload: JSON.stringify({ command }),
  });
  const status = `${key.split('-')[0]} ${res.statusCode}`;
  statuses.set(status, (statuses.get(status) ?? 0) + 1);
  return performance.now() - start;
}
async function timeCalls(): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < calls; i++) times.push(await call('other-key-0123456789abcdef', 'git status --short'));
  return times.sort((a, b) => a - b);
}
await timeCalls();
const callsAlone = await timeCalls();
let flooding = true;
let hostileCalls = 0;
async function floodCalls(): Promise<void> {
  for (let i = 0; flooding; i++) {
    await call('hostile-key-0123456789abcdef', HOSTILE[i % HOSTILE.length] as string);
    hostileCalls++;
  }
}
const callFloods = Array.from({ length: 16 }, () => floodCalls());
const callsLoaded = await timeCalls();
flooding = false;
await Promise.all(callFloods);
await app.close();
await workspace.close();
await rm(root, { recursive: true, force: true });
process.stdout.write(`${row("another key's Bash git status through the server, alone", callsAlone)}\n`);
process.stdout.write(`${row(`the same while the hostile key keeps 16 such calls in flight (${hostileCalls} answered)`, callsLoaded)}\n`);
process.stdout.write(`answers: ${[...statuses].map(([status, count]) => `${status}: ${count}`).join(', ')}\n`);
process.stdout.write(`Bash call: loaded p50 / unloaded p50 ${(percentile(callsLoaded, 50) / percentile(callsAlone, 50)).toFixed(2)}x (goal: at most 2x)\n`);
