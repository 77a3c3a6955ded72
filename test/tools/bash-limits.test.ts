import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { test } from 'node:test';
import type { ToolDef } from '#src/core/types.js';
import { bashIsolationOf, createBashTool } from '#src/tools/bash.js';
import { NO_BASH_LIMITS, type BashLimits } from '#src/os/sandbox/limits.js';
import type { Workspace } from '#src/os/fs/workspace.js';
import { waitFor } from '../support/processes.js';
import { skipWithout } from '../support/require.js';
import { toolContext } from '../support/tool-context.js';
import { temporaryWorkspace } from '../support/workspace.js';

/**
 * Each bound from a real call, as a hostile command tries it: in the bubblewrap sandbox (which
 * must work here: `sandbox: true` fails without it) and without it, under the subreaper. Limits
 * are small so that each test is quick.
 */
const MODES = [
  { name: 'in the sandbox', sandbox: true },
  { name: 'without the sandbox', sandbox: false },
] as const;

const MIB = 1024 ** 2;
// What one call may start: the limit, less the shells and bwrap that run the command.
const PROCESSES = 32;

async function setup(
  t: { after(fn: () => Promise<void> | void): void },
  sandbox: boolean,
  limits: Partial<BashLimits>,
  spares?: number,
): Promise<{ bash: ToolDef; ws: Workspace }> {
  const ws = await temporaryWorkspace(t, 'toolport-bash-limits-');
  return { bash: await createBashTool({ workspace: ws, sandbox, limits: { ...NO_BASH_LIMITS, ...limits }, spares }), ws };
}

async function run(bash: ToolDef, command: string): Promise<{ text: string; isError: boolean }> {
  const result = await bash.execute({ command, timeout: 60_000 }, toolContext());
  const block = result.content[0]!;
  return { text: block.type === 'text' ? block.text : '', isError: result.isError === true };
}

// Forks up to 200 children that wait, and says how many it got; what a fork loop or bomb does, counted.
const FORK_LOOP = `perl -e 'my $n = 0; for (1..200) { my $pid = fork; if (!defined $pid) { print "fork failed after $n: $!\\n"; last } if (!$pid) { sleep 30; exit } $n++ } print "started $n\\n"'`;

function started(text: string): number {
  const match = /started (\d+)/.exec(text);
  assert.ok(match, text);
  return Number(match[1]);
}

for (const { name, sandbox } of MODES) {
  test(`Bash ${name}: a fork loop stays under the process limit, and the result names the limit`, async (t) => {
    const { bash } = await setup(t, sandbox, { maxProcesses: PROCESSES });
    const enforced = bashIsolationOf(bash)!.enforced;
    if (!sandbox && !skipWithout(t, 'a process limit without the sandbox', enforced.processes === 'none' ? enforced.notes.join('; ') : undefined)) return;
    assert.notEqual(enforced.processes, 'none', `the sandbox has no way to limit processes here: ${enforced.notes.join('; ')}`);
    const result = await run(bash, FORK_LOOP);
    assert.match(result.text, /fork failed after \d+: Resource temporarily unavailable/);
    assert.ok(started(result.text) < PROCESSES, result.text);
    assert.match(result.text, new RegExp(`\\(A fork failed: the command reached the limit of ${PROCESSES} processes, TOOLPORT_BASH_MAX_PROCESSES\\)`));
  });

  test(`Bash ${name}: four fork loops at once are each held to the limit, which counts per call`, async (t) => {
    const { bash } = await setup(t, sandbox, { maxProcesses: PROCESSES });
    const enforced = bashIsolationOf(bash)!.enforced;
    if (!sandbox && !skipWithout(t, 'a process limit without the sandbox', enforced.processes === 'none' ? enforced.notes.join('; ') : undefined)) return;
    assert.notEqual(enforced.processes, 'none', `the sandbox has no way to limit processes here: ${enforced.notes.join('; ')}`);
    const results = await Promise.all([1, 2, 3, 4].map(() => run(bash, FORK_LOOP)));
    for (const result of results) {
      const n = started(result.text);
      assert.ok(n < PROCESSES, result.text);
      // A count shared by the calls (or by the server's user) would leave most of them far fewer.
      assert.ok(n >= PROCESSES - 8, `each call gets its own limit: ${result.text}`);
    }
  });

  test(`Bash ${name}: a file written past the size limit is cut there, and the result names the limit`, async (t) => {
    const { bash, ws } = await setup(t, sandbox, { maxFileSize: 64 * 1024 });
    const result = await run(bash, 'head -c 1000000 /dev/zero > big; stat -c %s big');
    assert.match(result.text, /^65536\n/);
    assert.match(result.text, /File size limit exceeded/);
    assert.match(result.text, /\(Stopped: a process went past the file size limit of 65536 bytes, TOOLPORT_BASH_MAX_FILE_SIZE\)/);
    const ignored = await run(bash, "trap '' XFSZ; head -c 1000000 /dev/zero > big2; stat -c %s big2");
    assert.match(ignored.text, /^65536\n/, 'a process that ignores SIGXFSZ gets EFBIG instead');
    assert.match(ignored.text, /File too large/);
    assert.match(ignored.text, /TOOLPORT_BASH_MAX_FILE_SIZE/);
    assert.deepEqual((await readdir(ws.root)).sort(), ['big', 'big2']);
  });

  test(`Bash ${name}: a CPU spin past the CPU time limit is stopped, and the result names the limit`, async (t) => {
    const { bash } = await setup(t, sandbox, { maxCpuSeconds: 1 });
    const result = await run(bash, 'while :; do :; done');
    assert.equal(result.isError, true);
    assert.match(result.text, /\(Stopped: a process went past the CPU time limit of 1 s, TOOLPORT_BASH_MAX_CPU_SECONDS or the timeout, whichever is less\)/);
    assert.match(result.text, sandbox ? /\(Exit code 152\)$/ : /\(Killed by signal SIGXCPU\)$/);
  });

  test(`Bash ${name}: a process that maps more than the address-space limit fails to allocate, and the result names the limit`, async (t) => {
    const { bash } = await setup(t, sandbox, { maxAddressSpace: 256 * MIB });
    const result = await run(bash, `perl -e '$x = "x" x (512 * 1024 * 1024); print "allocated\\n"'`);
    assert.doesNotMatch(result.text, /allocated/);
    assert.match(result.text, /Out of memory/);
    assert.match(result.text, /\(A memory allocation failed: each process may map at most 268435456 bytes, TOOLPORT_BASH_MAX_ADDRESS_SPACE\)/);
  });

  test(`Bash ${name}: a command past the memory limit is stopped by the kernel, where a memory cgroup can be made`, async (t) => {
    const { bash } = await setup(t, sandbox, { maxMemory: 64 * MIB });
    const enforced = bashIsolationOf(bash)!.enforced;
    if (!skipWithout(t, 'a memory cgroup per call', enforced.memory === 'none' ? enforced.notes.join('; ') : undefined)) return;
    const result = await run(bash, `perl -e '$x = "x" x (256 * 1024 * 1024); print "allocated\\n"'`);
    assert.doesNotMatch(result.text, /allocated/);
    assert.match(
      result.text,
      /\(Stopped: the command went past the memory limit of 67108864 bytes, TOOLPORT_BASH_MAX_MEMORY, and the kernel killed a process\)/,
    );
  });
}

test('Bash in the sandbox: writing past /tmp and /dev/shm fails with ENOSPC at their size, and /dev and /run take no writes', async (t) => {
  const { bash } = await setup(t, true, { tmpSize: MIB });
  const writes = ['/tmp', '/dev/shm'].map((dir) => `head -c 3000000 /dev/zero > ${dir}/x; stat -c %s ${dir}/x`).join('; ');
  const result = await run(bash, `${writes}; for dir in /dev /run; do echo x > $dir/x || echo "$dir refused"; done`);
  assert.match(result.text, /^1048576\n1048576\n\/dev refused\n\/run refused\n/);
  assert.match(result.text, /No space left on device/);
  assert.match(result.text, /Read-only file system/);
  assert.match(result.text, /\(A write failed for lack of space: the sandbox's \/tmp and \/dev\/shm hold at most 1048576 bytes each, TOOLPORT_BASH_TMP_SIZE\)/);
});

test('Bash in the sandbox: four calls filling /tmp at once each stop at its size, so together they hold four sizes of memory at most', async (t) => {
  const { bash } = await setup(t, true, { tmpSize: MIB });
  const results = await Promise.all(
    [1, 2, 3, 4].map(() => run(bash, 'head -c 3000000 /dev/zero > /tmp/x; df -B1 --output=size /tmp | tail -1; stat -c %s /tmp/x')),
  );
  for (const result of results) assert.match(result.text, /^ *1048576\n1048576\n/);
});

test('Bash in the sandbox: a command cannot raise its hard limits back', async (t) => {
  const { bash } = await setup(t, true, { maxProcesses: PROCESSES, maxFileSize: 64 * 1024, maxCpuSeconds: 5, maxAddressSpace: 1024 * MIB });
  const result = await run(bash, 'for flag in u f t v; do ulimit -H -$flag unlimited 2>&1 || true; ulimit -H -$flag; done');
  const lines = result.text.split('\n');
  assert.equal(lines.filter((line) => /cannot modify limit: Operation not permitted/.test(line)).length, 4, result.text);
  const hard = lines.filter((line) => /^\d+$/.test(line)).map(Number);
  // RLIMIT_NPROC only where it counts per call; the rest everywhere (KiB for -f and -v).
  assert.deepEqual(hard.slice(-3), [64, 6, 1024 * 1024]);
});

test("Bash keeps a call's cgroups for later calls once empty: thirty calls make no more than a few, and leave no process in them", async (t) => {
  // Without the sandbox, whose cgroup namespace would show the call's cgroup as "/"; without
  // shells started ahead, whose cgroups hold them while they wait.
  const { bash } = await setup(t, false, { maxProcesses: PROCESSES, maxMemory: 64 * MIB }, 0);
  if (
    !skipWithout(t, 'a cgroup per call', bashIsolationOf(bash)!.enforced.processes === 'cgroup' ? undefined : bashIsolationOf(bash)!.enforced.notes.join('; '))
  )
    return;
  // The server's own cgroup in each v1 hierarchy, where the calls' cgroups are made.
  const own = readFileSync('/proc/self/cgroup', 'utf8')
    .split('\n')
    .map((line) => line.split(':'));
  const dirs = ['pids', 'memory'].map((controller) => `/sys/fs/cgroup/${controller}${own.find((f) => f[1] === controller)![2]}`);
  const calls = (): string[] =>
    dirs.flatMap((dir) =>
      readdirSync(dir)
        .filter((entry) => entry.startsWith(`toolport-${process.pid}-`))
        .map((entry) => path.join(dir, entry)),
    );
  const before = new Set(calls());
  for (let round = 0; round < 10; round++) {
    const results = await Promise.all([1, 2, 3].map(() => run(bash, 'sleep 30 & echo "in $(grep -c toolport- /proc/self/cgroup)"')));
    for (const result of results) assert.match(result.text, /^in 2$/, 'each call ran in its pids and memory cgroups');
  }
  const made = calls().filter((dir) => !before.has(dir));
  // Per controller: the ones kept (8), and the ones made while those were still emptying (3 calls at once).
  assert.ok(made.length <= (8 + 3) * 2, `cgroups are reused: ${made.join(', ')}`);
  await waitFor(() => made.every((dir) => readFileSync(path.join(dir, 'cgroup.procs'), 'utf8') === ''), 'no process left in the kept cgroups');
});

test("Bash without the sandbox: a cgroup still charged with a call's files in RAM (/dev/shm) is not reused, so the next call gets its whole memory limit", async (t) => {
  // Without shells started ahead, so that each call takes a cgroup the moment it starts.
  const { bash } = await setup(t, false, { maxProcesses: PROCESSES, maxMemory: 64 * MIB }, 0);
  if (
    !skipWithout(
      t,
      'a memory cgroup per call',
      bashIsolationOf(bash)!.enforced.memory === 'cgroup' ? undefined : bashIsolationOf(bash)!.enforced.notes.join('; '),
    )
  )
    return;
  const own = readFileSync('/proc/self/cgroup', 'utf8')
    .split('\n')
    .map((line) => line.split(':'));
  const memory = `/sys/fs/cgroup/memory${own.find((f) => f[1] === 'memory')![2]}`;
  const emptied = (): boolean =>
    readdirSync(memory)
      .filter((entry) => entry.startsWith(`toolport-${process.pid}-`))
      .every((entry) => readFileSync(path.join(memory, entry, 'cgroup.procs'), 'utf8') === '');
  const shm = `/dev/shm/toolport-test-${process.pid}-${Date.now()}`;
  t.after(() => rm(shm, { force: true }));
  // 40 MiB of a 64 MiB limit left behind in RAM, charged to the cgroup the call ran in.
  const left = await run(bash, `head -c ${40 * MIB} /dev/zero > ${shm} && echo left`);
  assert.match(left.text, /^left$/);
  for (let i = 0; i < 5; i++) {
    await waitFor(emptied, 'the call cgroups to be empty');
    const next = await run(bash, `perl -e '$x = "x" x (16 * 1024 * 1024); print "allocated\\n"'`);
    assert.match(next.text, /^allocated$/, `call ${i + 1} after the one that left 40 MiB in /dev/shm: ${next.text}`);
  }
});
