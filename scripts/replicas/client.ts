/**
 * What the checks of `npm run test:replicas` share: the keys' secrets, a tool call that never
 * throws, a replica's counters, polling with a deadline, and the `ok` / `not ok` lines.
 */
import { spawnSync } from 'node:child_process';
import { setTimeout as delay } from 'node:timers/promises';

/** The secret of the key labelled `label` in the run's keys file. */
export const secret = (label: string): string => `${label}-secret-0123456789abcdef`;

let failures = 0;

/** Prints `ok` or `not ok` for one check and counts the failures. */
export function check(name: string, passed: boolean, detail = ''): void {
  console.log(`${passed ? 'ok' : 'not ok'} - ${name}${detail ? ` (${detail})` : ''}`);
  if (!passed) failures++;
}

/** Prints a check that cannot run here. */
export function skip(name: string, why: string): void {
  console.log(`ok - ${name} # SKIP ${why}`);
}

/** How many checks failed so far. */
export function failed(): number {
  return failures;
}

export interface Answer {
  status: number;
  text: string;
  isError?: boolean;
}

/** A tool call; a connection error answers status 0 rather than throwing. */
export async function callTool(url: string, label: string, tool: string, input: Record<string, unknown>): Promise<Answer> {
  try {
    const res = await fetch(`${url}/tools/${tool}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${secret(label)}`, 'content-type': 'application/json' },
      body: JSON.stringify(input),
    });
    const raw = await res.text();
    let body: { content?: Array<{ text?: string }>; isError?: boolean };
    try {
      body = JSON.parse(raw) as typeof body;
    } catch {
      // Not toolport's answer (the balancer's own error page, say).
      return { status: res.status, text: raw.replace(/\s+/g, ' ').slice(0, 200) };
    }
    return { status: res.status, text: (body.content ?? []).map((c) => c.text ?? '').join('\n'), isError: body.isError };
  } catch (err) {
    return { status: 0, text: String(err) };
  }
}

/** One counter of a replica's /metrics. */
export async function metric(url: string, name: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${secret('admin')}` } })).text();
  return text
    .split('\n')
    .filter((line) => line.startsWith(name))
    .reduce((sum, line) => sum + Number(line.split(' ').at(-1)), 0);
}

export function tally(answers: readonly Answer[]): Record<number, number> {
  const counts: Record<number, number> = {};
  for (const { status } of answers) counts[status] = (counts[status] ?? 0) + 1;
  return counts;
}

/** Whether a process whose command line holds `marker` runs (the sandbox's processes are visible from here). */
export function running(marker: string): boolean {
  return spawnSync('pgrep', ['-f', marker]).status === 0;
}

/** Kills, by pid, whatever processes a failed check left with `marker` in their command line. */
export function killLeftovers(marker: string): void {
  for (const pid of spawnSync('pgrep', ['-f', marker], { encoding: 'utf8' }).stdout.split('\n').filter(Boolean)) {
    try {
      process.kill(Number(pid), 'SIGKILL');
    } catch {
      // Gone meanwhile.
    }
  }
}

/** Polls `condition` every 50 ms; false when it is still false after `timeoutMs`. */
export async function eventually(condition: () => boolean | Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) return false;
    await delay(50);
  }
  return true;
}
