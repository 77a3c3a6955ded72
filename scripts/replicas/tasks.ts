/**
 * The checks of `npm run test:replicas` about background tasks, which live on one replica: the
 * balancer's consistent hash by key sends every call of a key to the replica holding its tasks,
 * an unknown id answers the same whether or not another key has a task by it, and a replica that
 * leaves in a rolling update drains its tasks (a task ends, or is killed at the end of the grace)
 * and leaves no process behind.
 */
import { randomBytes } from 'node:crypto';
import { callTool, check, eventually, killLeftovers, running, secret, skip, type Answer } from './client.js';
import type { Managed } from './fleet.js';

/** Keys that start tasks through the balancer; enough that both replicas almost surely hold some. */
export const TASKERS = ['tasker-1', 'tasker-2', 'tasker-3', 'tasker-4', 'tasker-5', 'tasker-6'] as const;
/** A key with no task, asking for other keys' ids. */
export const STRANGER = 'stranger';
/** TaskOutput calls of each key after it started its task, every one through the balancer. */
const POLLS = 20;
const STARTED = /^Command running in background with ID: (b[\w-]{12})\. /;

/** Where a key's task landed: the index of the replica that holds it. */
export interface Placement {
  label: string;
  id: string;
  replica: number;
}

/** Starts `command` in the background for `label` at `url`; the task id, or the answer when it was refused. */
export async function startTask(url: string, label: string, command: string): Promise<{ id?: string; answer: Answer }> {
  const answer = await callTool(url, label, 'Bash', { command, run_in_background: true });
  return { id: answer.status === 200 && answer.isError === false ? STARTED.exec(answer.text)?.[1] : undefined, answer };
}

/** Indexes of the replicas on which `label`'s TaskOutput, asked directly, finds task `id`. */
async function holders(replicaUrls: readonly string[], label: string, id: string): Promise<number[]> {
  const answers = await Promise.all(replicaUrls.map((r) => callTool(r, label, 'TaskOutput', { task_id: id, block: false })));
  return answers.flatMap((a, i) => (a.status === 200 && a.isError === false ? [i] : []));
}

/** The tool calls of `label` each replica has logged so far. */
function loggedCalls(replicas: readonly Managed[], label: string): number[] {
  return replicas.map((r) => r.lines.filter((l) => l.msg === 'tool call' && l.key === label).length);
}

/**
 * Check 5: each key starts a task through the balancer, then asks for it POLLS times and stops it,
 * all through the balancer: every call finds the task, every call is logged by one replica, and
 * that replica, asked directly, is the only one that knows the task.
 */
export async function tasksFollowTheirKey(url: string, replicaUrls: readonly string[], replicas: readonly Managed[]): Promise<Placement[]> {
  const marker = `1000.${Date.now() % 100_000}${process.pid}`;
  const placements: Placement[] = [];
  const problems: string[] = [];
  try {
    for (const label of TASKERS) {
      const before = loggedCalls(replicas, label);
      const { id, answer } = await startTask(url, label, `sleep ${marker}`);
      if (id === undefined) {
        problems.push(`${label}: the task did not start: ${answer.status} ${answer.text.slice(0, 120)}`);
        continue;
      }
      const polls = await Promise.all(Array.from({ length: POLLS }, () => callTool(url, label, 'TaskOutput', { task_id: id, block: false })));
      const lost = polls.filter((a) => a.status !== 200 || a.isError !== false || !a.text.includes('<status>running</status>'));
      if (lost.length > 0) problems.push(`${label}: ${lost.length} of ${POLLS} TaskOutput calls did not find the task: ${lost[0]!.text.slice(0, 120)}`);
      // The start and the polls, each logged once; then where they went.
      const logged = await eventually(() => sum(loggedCalls(replicas, label)) - sum(before) === 1 + POLLS, 5_000);
      const where = loggedCalls(replicas, label).map((n, i) => n - before[i]!);
      const replica = where.findIndex((n) => n > 0);
      if (!logged || where.filter((n) => n > 0).length !== 1) problems.push(`${label}: calls logged per replica ${where.join('/')}`);
      const held = await holders(replicaUrls, label, id);
      // The probes' own lines, one on each replica, before the next count starts.
      await eventually(() => sum(loggedCalls(replicas, label)) - sum(before) === 1 + POLLS + replicaUrls.length, 5_000);
      if (held.length !== 1 || held[0] !== replica)
        problems.push(`${label}: its calls went to replica ${replica + 1}, the task is on ${held.map((i) => i + 1).join(' and ') || 'none'}`);
      placements.push({ label, id, replica });
    }
    check(
      `a key's background task started through the balancer is found by each of its ${POLLS} TaskOutput calls there: all of them reach the one replica that holds it`,
      problems.length === 0 && placements.length === TASKERS.length,
      problems.join('; '),
    );
    console.log(`# tasks per replica by the hash of their key: ${replicaUrls.map((_, i) => placements.filter((p) => p.replica === i).length).join(' and ')}`);

    await unknownIdsLookAlike(url, replicaUrls, placements[0]);

    const stops = await Promise.all(
      placements.map(async (p) => ({ p, before: loggedCalls(replicas, p.label), answer: await callTool(url, p.label, 'TaskStop', { task_id: p.id }) })),
    );
    const wrong = stops.filter(({ p, answer }) => answer.status !== 200 || !answer.text.includes(`Successfully stopped task: ${p.id}`));
    const elsewhere = [];
    for (const { p, before } of stops) {
      await eventually(() => sum(loggedCalls(replicas, p.label)) > sum(before), 5_000);
      if (loggedCalls(replicas, p.label).some((n, i) => n !== before[i]! + (i === p.replica ? 1 : 0))) elsewhere.push(p.label);
    }
    const gone = await eventually(() => !running(marker), 5_000);
    check(
      "a key's TaskStop through the balancer reaches the replica holding its task and stops it, and no process of it is left",
      wrong.length === 0 && elsewhere.length === 0 && gone,
      [
        ...wrong.map(({ answer }) => `${answer.status} ${answer.text.slice(0, 120)}`),
        ...elsewhere.map((l) => `${l}'s TaskStop went elsewhere`),
        gone ? '' : 'a sleep is left',
      ]
        .filter(Boolean)
        .join('; '),
    );
  } finally {
    killLeftovers(marker);
  }
  return placements;
}

function sum(counts: readonly number[]): number {
  return counts.reduce((a, b) => a + b, 0);
}

interface RawAnswer {
  status: number;
  contentType: string | null;
  body: string;
}

async function rawCall(url: string, label: string, tool: string, input: Record<string, unknown>): Promise<RawAnswer> {
  const res = await fetch(`${url}/tools/${tool}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${secret(label)}`, 'content-type': 'application/json' },
    body: JSON.stringify(input),
  });
  return { status: res.status, contentType: res.headers.get('content-type'), body: await res.text() };
}

/**
 * Check 6: a key without tasks asks, through the balancer and each replica, for another key's
 * running task and for an id never given: TaskOutput and TaskStop answer both with the same
 * status, type and body (the id aside), wherever the request lands.
 */
async function unknownIdsLookAlike(url: string, replicaUrls: readonly string[], owned: Placement | undefined): Promise<void> {
  const name =
    'an unknown task id gets the same answer (status, type, body) whether or not another key has a task by it, through the balancer and from either replica';
  if (owned === undefined) {
    check(name, false, 'no task to ask for');
    return;
  }
  const never = `b${randomBytes(9).toString('base64url')}`;
  const differences: string[] = [];
  const seen = new Set<string>();
  for (const target of [url, ...replicaUrls]) {
    for (const [tool, input] of [
      ['TaskOutput', { block: false }],
      ['TaskStop', {}],
    ] as const) {
      const theirs = await rawCall(target, STRANGER, tool, { task_id: owned.id, ...input });
      const nobodys = await rawCall(target, STRANGER, tool, { task_id: never, ...input });
      const normalised = { ...nobodys, body: nobodys.body.replaceAll(never, owned.id) };
      if (JSON.stringify(theirs) !== JSON.stringify(normalised))
        differences.push(`${tool} at ${target}: ${JSON.stringify(theirs)} vs ${JSON.stringify(nobodys)}`);
      seen.add(`${tool} ${JSON.stringify(normalised)}`);
    }
  }
  // One answer per tool in all, and it is the catalogued "not found".
  const notFound = [...seen].every((s) => s.includes(`No task found with ID: ${owned.id}`));
  check(name, differences.length === 0 && seen.size === 2 && notFound, differences.join('; ') || [...seen].join('; '));
}

/** The first key whose task was on `replica`, to start another task there through the balancer. */
export function keyOn(placements: readonly Placement[], replica: number): string | undefined {
  return placements.find((p) => p.replica === replica)?.label;
}

/**
 * Check 8, after replica 1 came back: the keys it held before come back to it, the others stay
 * where they were; then replica 2 gets SIGTERM with a task running that ignores SIGTERM. It drains
 * for the grace, kills the task (SIGKILL, every process of it), says so, and exits 0.
 */
export async function drainKillsStubbornTask(
  url: string,
  replicaUrls: readonly string[],
  replicas: readonly Managed[],
  placements: readonly Placement[],
): Promise<void> {
  const [back, leaving] = replicas as [Managed, Managed];
  const stayName = 'with replica 1 back, the keys it held come back to it and the other keys stay where they were (consistent hashing)';
  if (placements.some((p) => p.replica === 0)) {
    const since = placements.map((p) => loggedCalls(replicas, p.label));
    // The balancer puts the replica back after two passed checks; until then its keys are elsewhere.
    const returned = await eventually(async () => {
      const label = keyOn(placements, 0)!;
      const before = loggedCalls([back], label)[0]!;
      await callTool(url, label, 'Echo', { text: 'back?' });
      return eventually(() => loggedCalls([back], label)[0]! > before, 1_000);
    }, 10_000);
    for (const p of placements) await callTool(url, p.label, 'Echo', { text: 'where?' });
    await eventually(() => placements.every((p, i) => sum(loggedCalls(replicas, p.label)) > sum(since[i]!)), 5_000);
    const moved = placements.filter((p, i) => {
      const now = loggedCalls(replicas, p.label);
      return now[p.replica]! - since[i]![p.replica]! === 0;
    });
    check(stayName, returned && moved.length === 0, moved.map((p) => `${p.label} left replica ${p.replica + 1}`).join('; '));
  } else skip(stayName, 'no key hashed to replica 1');

  const name = 'a replica leaving with a task that ignores SIGTERM drains for the grace, then kills the task and all its processes, and exits 0';
  const label = keyOn(placements, 1);
  const marker = `1000.${Date.now() % 100_000}${process.pid}`;
  try {
    // Through the balancer for a key the hash puts on replica 2; with none, to replica 2 itself.
    const target = label === undefined ? replicaUrls[1]! : url;
    const { id, answer } = await startTask(target, label ?? TASKERS[0], `trap '' TERM; sleep ${marker} & sleep ${marker}; wait`);
    if (id === undefined || !(await eventually(() => running(marker), 30_000))) {
      check(name, false, `the task did not start: ${answer.status} ${answer.text.slice(0, 120)}`);
      return;
    }
    leaving.child.kill('SIGTERM');
    const exitCode = await leaving.exited;
    const ended = leaving.lines.find((l) => l.msg === 'background task ended' && l.task === id);
    const gone = await eventually(() => !running(marker), 5_000);
    check(
      name,
      exitCode === 0 && ended?.status === 'killed' && ended.note === 'stopped because the server is shutting down' && gone,
      `exit ${exitCode}; ${JSON.stringify(ended ?? 'no "background task ended" line')}; processes left: ${!gone}`,
    );
  } finally {
    killLeftovers(marker);
  }
}
