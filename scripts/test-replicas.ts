/**
 * Many replicas with real parts: `npm run test:replicas [-- --skip-build]`.
 *
 * Builds with tsc (unless --skip-build), then starts redis-server, two toolport replicas
 * (`node dist/server.js` on their own ports, sharing Redis and a keys file in which two keys have
 * workspaces of their own) and HAProxy in front, checking /readyz. Then checks, through the
 * balancer and each replica:
 *   1. a key gets exactly TOOLPORT_RATE_LIMIT answers a minute, then 429s, however its calls are spread;
 *   2. two keys with workspaces of their own cannot read each other's files through either replica,
 *      and a Write through one replica is read back through the other;
 *   3. Redis stopped mid-run: nothing answers 5xx, each replica counts a key's calls alone (at
 *      most the limit on each) and says so in toolport_rate_limit_store_errors_total; started
 *      again, the count is shared again;
 *   4. an MCP client (the SDK's v1, 2025-11-25) aborts a Bash call running on one replica, and its
 *      notifications/cancelled goes to the other: passed on through Redis, it kills the command;
 *   5. HAProxy routes by a consistent hash of the Authorization header: a key's background task
 *      started through the balancer is found by every later TaskOutput and TaskStop of that key,
 *      all of which reach the one replica that holds it;
 *   6. an unknown task id gets the same answer whether or not another key has a task by it;
 *   7. a rolling update: under steady load through the balancer one replica gets SIGTERM; no
 *      request fails, a call in flight on it finishes, a background task on it finishes within
 *      the grace, it exits 0, and the other takes the traffic;
 *   8. the replica comes back and takes back its keys (only those); then the other replica leaves
 *      with a task that ignores SIGTERM, kills it at the end of the grace, exits 0, and no process
 *      of the task is left.
 * Prints `ok` or `not ok` per check and exits 1 on any failure. Logs stay in the printed directory
 * when something failed.
 */
import { spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { sandboxUnavailableReason } from '../src/os/sandbox/bubblewrap.js';
import { callTool, check, eventually, failed, killLeftovers, metric, running, secret, tally, type Answer } from './replicas/client.js';
import { freePorts, missingPrograms, ROOT, startHaproxy, startRedis, startToolport, stopAll, type Managed } from './replicas/fleet.js';
import { drainKillsStubbornTask, keyOn, startTask, STRANGER, TASKERS, tasksFollowTheirKey, type Placement } from './replicas/tasks.js';

const LIMIT = 60;
const LOAD_WORKERS = 8;
const TEAMS = ['team-a', 'team-b'] as const;
/** Whether keys may use Bash: only in the sandbox, which a machine may not allow. */
let bash = true;

async function main(): Promise<number> {
  const { values } = parseArgs({ options: { 'skip-build': { type: 'boolean', default: false } } });
  const missing = missingPrograms();
  if (missing) {
    console.log(`not ok - the parts are not here: ${missing}`);
    return 1;
  }
  if (!values['skip-build']) {
    console.log('# building with tsc');
    const built = spawnSync(process.execPath, [path.join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'], {
      cwd: ROOT,
      stdio: 'inherit',
    });
    if (built.status !== 0) throw new Error(`the build failed with status ${built.status}`);
  }

  // Outside /tmp, which Bash's sandbox replaces anyway: what one key cannot see must be hidden from it.
  const base = await mkdtemp('/var/tmp/toolport-replicas-');
  const logs = path.join(base, 'logs');
  await mkdir(logs);
  const dir = (name: string): string => path.join(base, name);
  for (const name of ['server', ...TEAMS]) {
    await mkdir(dir(name));
    await writeFile(path.join(dir(name), 'mine.txt'), `${name} only\n`);
  }
  const sandboxMissing = await sandboxUnavailableReason(base);
  // Keys in more than one workspace may use Bash only in the sandbox (start-up refuses otherwise).
  bash = sandboxMissing === undefined;
  if (!bash) console.log(`# bubblewrap cannot run here, so no key may use Bash: ${sandboxMissing}`);
  const loadKeys = Array.from({ length: LOAD_WORKERS }, (_, i) => `load-${i + 1}`);
  const keys = [
    ...TEAMS.map((team) => ({ label: team, key: secret(team), workspace: dir(team), ...(bash ? {} : { tools: ['Read', 'Write', 'LS', 'Glob', 'Grep'] }) })),
    ...['admin', 'limited', 'while-down', 'counted-alone', 'back-up', 'canceller', ...loadKeys].map((label) => ({
      label,
      key: secret(label),
      tools: bash ? ['Echo', 'Bash'] : ['Echo'],
    })),
    ...[...TASKERS, STRANGER].map((label) => ({ label, key: secret(label), tools: bash ? ['Echo', 'Bash', 'TaskOutput', 'TaskStop'] : ['Echo'] })),
  ];
  const keysFile = path.join(base, 'keys.json');
  await writeFile(keysFile, JSON.stringify(keys, null, 2));

  const [redisPort, balancerPort, ...ports] = (await freePorts(4)) as [number, number, number, number];
  const env = {
    TOOLPORT_WORKSPACE: dir('server'),
    TOOLPORT_API_KEYS_FILE: keysFile,
    TOOLPORT_REDIS_URL: `redis://127.0.0.1:${redisPort}`,
    TOOLPORT_RATE_LIMIT: String(LIMIT),
    TOOLPORT_BASH_SANDBOX: sandboxMissing ? 'false' : 'true',
    TOOLPORT_SHUTDOWN_GRACE_MS: '10000',
  };
  const replicaUrls = ports.map((port) => `http://127.0.0.1:${port}`);
  const url = `http://127.0.0.1:${balancerPort}`;
  try {
    const redis = await startRedis(redisPort, logs);
    const replicas = [await startToolport('replica-1', ports[0], env, logs), await startToolport('replica-2', ports[1], env, logs)];
    await startHaproxy(balancerPort, ports, logs);
    console.log(`# redis :${redisPort}, replicas :${ports.join(' and :')}, haproxy :${balancerPort}; logs in ${logs}`);

    await rateLimitHolds(url, replicaUrls);
    await workspacesStayApart(url, replicaUrls, dir);
    await redisGoesAway(url, replicaUrls, redis, () => startRedis(redisPort, logs));
    await cancellationCrossesReplicas(replicaUrls, replicas);
    const placements = bash ? await tasksFollowTheirKey(url, replicaUrls, replicas) : [];
    if (!bash) console.log('ok - background tasks follow their key through the balancer # SKIP no Bash without the sandbox');
    await rollingUpdate(url, replicaUrls, replicas, placements);
    if (bash) {
      // The update goes on: replica 1 comes back (same port, same settings), then replica 2 leaves.
      replicas[0] = await startToolport('replica-1', ports[0], env, logs);
      await drainKillsStubbornTask(url, replicaUrls, replicas, placements);
    }
  } catch (err) {
    check('the run went to its end', false, err instanceof Error ? err.message : String(err));
  } finally {
    await stopAll();
  }
  if (failed() === 0) await rm(base, { recursive: true, force: true });
  else console.log(`# logs kept in ${logs}`);
  console.log(failed() === 0 ? '# all checks passed' : `# ${failed()} check(s) failed`);
  return failed() === 0 ? 0 : 1;
}

/** Check 1: LIMIT answers, then 429s, whether the calls go one by one through the balancer, all at once, or to each replica in turn. */
async function rateLimitHolds(url: string, replicaUrls: readonly string[]): Promise<void> {
  const targets = [url, ...replicaUrls];
  const answers: Answer[] = [];
  // Half one after another, round the balancer and both replicas; the rest at once.
  for (let i = 0; i < LIMIT / 2; i++) answers.push(await callTool(targets[i % targets.length]!, 'limited', 'Echo', { text: `${i}` }));
  answers.push(
    ...(await Promise.all(Array.from({ length: LIMIT / 2 + 10 }, (_, i) => callTool(targets[i % targets.length]!, 'limited', 'Echo', { text: 'x' })))),
  );
  const counts = tally(answers);
  check(
    `a key with a limit of ${LIMIT} a minute gets exactly ${LIMIT} answers, then 429s, spread over the balancer and both replicas`,
    counts[200] === LIMIT && counts[429] === 10,
    JSON.stringify(counts),
  );
  const refused = answers.find((a) => a.status === 429);
  check(
    'the 429 is RATE_LIMITED in the error-body shape',
    refused?.isError === true && /^Rate limit exceeded: key "limited" may make 60 requests per minute; retry in \d+ s\.$/.test(refused.text),
    refused?.text,
  );
}

/** Check 2: through each replica and the balancer, a team reads its own files and nothing of the other's. */
async function workspacesStayApart(url: string, replicaUrls: readonly string[], dir: (name: string) => string): Promise<void> {
  const leaks: string[] = [];
  let ownOk = true;
  for (const target of [url, ...replicaUrls]) {
    for (const [me, other] of [TEAMS, [...TEAMS].reverse()] as const) {
      const own = await callTool(target, me, 'Read', { file_path: 'mine.txt' });
      if (!own.text.includes(`${me} only`)) ownOk = false;
      const otherFile = path.join(dir(other), 'mine.txt');
      const probes: Array<[string, Record<string, unknown>]> = [
        ['Read', { file_path: otherFile }],
        ['Read', { file_path: `../${other}/mine.txt` }],
        ['Grep', { pattern: `${other} only`, path: dir(other), output_mode: 'content' }],
        ['Glob', { pattern: `../${other}/*` }],
        ...(bash ? [['Bash', { command: `cat ${otherFile} ../${other}/mine.txt; true` }] as [string, Record<string, unknown>]] : []),
      ];
      for (const [tool, input] of probes) {
        const answer = await callTool(target, me, tool, input);
        if (answer.status !== 200 || answer.text.includes(`${other} only`))
          leaks.push(`${me} ${tool} via ${target}: ${answer.status} ${answer.text.slice(0, 120)}`);
      }
    }
  }
  check('each team key reads its own workspace through the balancer and both replicas', ownOk);
  check("no team key reads, greps, globs or cats the other team's files through the balancer or either replica", leaks.length === 0, leaks.join('; '));
  const note = `written through replica 1 at ${Date.now()}`;
  const written = await callTool(replicaUrls[0]!, 'team-a', 'Write', { file_path: 'note.txt', content: note });
  const readBack = await callTool(replicaUrls[1]!, 'team-a', 'Read', { file_path: 'note.txt' });
  check('a Write through one replica is read back through the other (one shared volume)', written.isError === false && readBack.text.includes(note));
}

/** Check 3: with Redis stopped, calls go on and each replica counts alone; started again, counts are shared again. */
async function redisGoesAway(url: string, replicaUrls: readonly string[], redis: Managed, restart: () => Promise<Managed>): Promise<void> {
  const errorsBefore = await Promise.all(replicaUrls.map((r) => metric(r, 'toolport_rate_limit_store_errors_total')));
  redis.child.kill('SIGTERM');
  await redis.exited;
  // Through the balancer, one by one: no failure, and no more than the limit on each replica.
  const answers: Answer[] = [];
  for (let i = 0; i < 2 * LIMIT + 10; i++) answers.push(await callTool(url, 'while-down', 'Echo', { text: `${i}` }));
  const counts = tally(answers);
  const failed = answers.filter((a) => a.status !== 200 && a.status !== 429).length;
  check(
    'with Redis stopped, every call through the balancer is answered: no 5xx, no connection error',
    failed === 0 && (counts[200] ?? 0) <= 2 * LIMIT,
    JSON.stringify(counts),
  );
  // To each replica in turn: each lets the key make the whole limit, which a shared count would not.
  const alone = await Promise.all(
    replicaUrls.map(async (replica) => {
      const each: Answer[] = [];
      for (let i = 0; i < LIMIT + 5; i++) each.push(await callTool(replica, 'counted-alone', 'Echo', { text: `${i}` }));
      return tally(each);
    }),
  );
  check(
    `with Redis stopped, each replica counts a key alone: ${LIMIT} answers on each, then 429s`,
    alone.every((c) => c[200] === LIMIT && c[429] === 5),
    JSON.stringify(alone),
  );
  const errorsAfter = await Promise.all(replicaUrls.map((r) => metric(r, 'toolport_rate_limit_store_errors_total')));
  check(
    'each replica counts what Redis could not in toolport_rate_limit_store_errors_total',
    errorsAfter.every((n, i) => n > errorsBefore[i]!),
    `${errorsBefore.join(',')} -> ${errorsAfter.join(',')}`,
  );

  await restart();
  // Both replicas reconnect within their retry delay (at most 1 s) and the pause after a failure.
  const deadline = Date.now() + 10_000;
  let shared = false;
  while (!shared && Date.now() < deadline) {
    await delay(250);
    shared = (await Promise.all(replicaUrls.map((r) => countsInRedis(r)))).every(Boolean);
  }
  const again: Answer[] = [];
  for (let i = 0; i < LIMIT + 5; i++) again.push(await callTool(url, 'back-up', 'Echo', { text: `${i}` }));
  const countsAgain = tally(again);
  check(
    `with Redis back, the count is shared again: exactly ${LIMIT} answers`,
    countsAgain[200] === LIMIT && countsAgain[429] === 5,
    JSON.stringify(countsAgain),
  );
}

/** True once a replica counts in Redis again: its next Echo leaves the store-error counter alone. */
async function countsInRedis(replicaUrl: string): Promise<boolean> {
  const before = await metric(replicaUrl, 'toolport_rate_limit_store_errors_total');
  await callTool(replicaUrl, 'admin', 'Echo', { text: 'probe' });
  return (await metric(replicaUrl, 'toolport_rate_limit_store_errors_total')) === before;
}

/**
 * Check 4: the SDK's v1 client aborts a Bash call; the call runs on replica 1 and every other
 * message, notifications/cancelled among them, goes to replica 2 (as a balancer may send them).
 * Runs after Redis came back, so the replicas' channel had to subscribe again.
 */
async function cancellationCrossesReplicas(replicaUrls: readonly string[], replicas: readonly Managed[]): Promise<void> {
  const name = "an MCP client's cancellation that reaches the other replica kills the call's command (passed on through Redis)";
  if (!bash) {
    console.log(`ok - ${name} # SKIP no Bash without the sandbox`);
    return;
  }
  const [first, second] = replicaUrls as [string, string];
  const resubscribed = await eventually(() => replicas.every((r) => r.lines.some((l) => l.msg === 'MCP cancellations are shared through Redis again')), 10_000);
  check('with Redis back, each replica shares MCP cancellations through it again', resubscribed);
  const routed = (url: string | URL, init?: RequestInit): Promise<Response> => {
    const target = typeof init?.body === 'string' && init.body.includes('"tools/call"') ? first : second;
    return fetch(new URL(new URL(url).pathname, target), init);
  };
  const client = new Client({ name: 'test-replicas', version: '1.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL('/mcp', second), { fetch: routed, requestInit: { headers: { authorization: `Bearer ${secret('canceller')}` } } }),
  );
  const marker = `1000.${Date.now() % 100_000}${process.pid}`;
  try {
    const controller = new AbortController();
    const call = client.callTool({ name: 'Bash', arguments: { command: `sleep ${marker}` } }, undefined, { signal: controller.signal, timeout: 120_000 });
    call.catch(() => {});
    if (!(await eventually(() => running(marker), 30_000))) {
      check(name, false, 'the command never started');
      return;
    }
    controller.abort(new Error('the user pressed stop'));
    const gone = await eventually(() => !running(marker), 5_000);
    const aborted = await eventually(
      () => replicas[0]!.lines.some((l) => l.msg === 'tool call' && l.key === 'canceller' && l.tool === 'Bash' && l.outcome === 'aborted'),
      5_000,
    );
    check(name, gone && aborted, `command gone: ${gone}; aborted on replica 1: ${aborted}`);
  } finally {
    // Whatever a failure left behind, by pid.
    killLeftovers(marker);
    await client.close();
  }
}

/** Check 7: SIGTERM to replica 1 under steady load through the balancer, with a call and a background task running on it. */
async function rollingUpdate(url: string, replicaUrls: readonly string[], replicas: readonly Managed[], placements: readonly Placement[]): Promise<void> {
  const [leaving] = replicas as [Managed, Managed];
  let loading = true;
  const answers: Answer[] = [];
  const workers = Array.from({ length: LOAD_WORKERS }, async (_, i) => {
    const label = `load-${i + 1}`;
    // Each worker stays well under its key's limit: a call, then a pause.
    for (let n = 0; loading && n < LIMIT - 10; n++) {
      const call =
        n % 2 === 0 || !bash ? callTool(url, label, 'Echo', { text: 'steady' }) : callTool(url, label, 'Bash', { command: 'sleep 0.2; echo steady' });
      answers.push(await call);
      await delay(100);
    }
  });
  await delay(1_500);
  // A call that is surely in flight on the leaving replica when the signal comes.
  const inFlight = bash ? callTool(replicaUrls[0]!, 'admin', 'Bash', { command: 'sleep 1.5; echo finished' }) : undefined;
  // A task on it too: through the balancer for a key the hash puts there (without one, to it directly).
  const taskKey = keyOn(placements, 0);
  const taskMarker = `2.${Date.now() % 100_000}${process.pid}`;
  const task = bash
    ? await startTask(taskKey === undefined ? replicaUrls[0]! : url, taskKey ?? TASKERS[0], `sleep ${taskMarker}; echo task-finished`)
    : undefined;
  await delay(500);
  const signalled = answers.length;
  leaving.child.kill('SIGTERM');
  const exitCode = await leaving.exited;
  const afterExit = answers.length;
  await delay(2_000);
  loading = false;
  await Promise.all(workers);
  const last = await inFlight;

  const failed = answers.filter((a) => a.status !== 200 || a.isError !== false || !a.text.includes('steady'));
  check(
    `under steady load through the balancer, no request fails while a replica leaves (${answers.length} calls)`,
    failed.length === 0 && answers.length > signalled,
    failed
      .slice(0, 3)
      .map((a) => `${a.status} ${a.text.slice(0, 80)}`)
      .join('; '),
  );
  if (last === undefined) console.log('ok - the call in flight on the leaving replica finishes # SKIP no Bash without the sandbox');
  else
    check('the call in flight on the leaving replica finishes', last.status === 200 && last.text === 'finished', `${last.status} ${last.text.slice(0, 120)}`);
  check('the leaving replica exits 0', exitCode === 0, `exit ${exitCode}`);
  if (task === undefined) console.log('ok - a background task on the leaving replica finishes within the grace # SKIP no Bash without the sandbox');
  else {
    const ended = leaving.lines.find((l) => l.msg === 'background task ended' && l.task === task.id);
    check(
      'a background task running on the leaving replica finishes within the grace before it exits, and no process of it is left',
      task.id !== undefined && ended?.status === 'completed' && ended.exitCode === 0 && !running(taskMarker),
      `${task.answer.status} ${task.answer.text.slice(0, 80)}; ${JSON.stringify(ended ?? 'no "background task ended" line')}`,
    );
    // What a rolling update costs a task: it went with its replica, and its key now reaches the other.
    if (taskKey !== undefined && task.id !== undefined) {
      const after = await callTool(url, taskKey, 'TaskOutput', { task_id: task.id, block: false });
      check(
        'once its replica has left, a task\'s key reaches the other replica, which answers "No task found"',
        after.status === 200 && after.isError === true && after.text === `No task found with ID: ${task.id}`,
        `${after.status} ${after.text.slice(0, 120)}`,
      );
    }
  }
  // Once the replica has exited, every answer comes from the other: its own count says so.
  const servedAfter = answers.length - afterExit;
  const before = await metric(replicaUrls[1]!, 'toolport_tool_calls_total');
  const after = tally(await Promise.all(Array.from({ length: 10 }, () => callTool(url, 'admin', 'Echo', { text: 'steady' }))));
  const taken = (await metric(replicaUrls[1]!, 'toolport_tool_calls_total')) - before;
  check(
    'the other replica takes the traffic',
    servedAfter > 0 && after[200] === 10 && taken === 10,
    `${servedAfter} calls answered during the load after the exit; of 10 more, ${taken} counted by the other replica`,
  );
  check(
    'the leaving replica drained before it stopped ("shutting down", then "stopped")',
    leaving.lines.some((l) => l.msg === 'shutting down') && leaving.lines.some((l) => l.msg === 'stopped'),
  );
}

main().then(
  (code) => process.exit(code),
  async (err: unknown) => {
    console.log(`not ok - the run failed: ${err instanceof Error ? err.stack : String(err)}`);
    await stopAll();
    process.exit(1);
  },
);
