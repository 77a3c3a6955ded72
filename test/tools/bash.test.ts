import assert from 'node:assert/strict';
import { existsSync, readlinkSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { ToolExecutor } from '#src/core/executor.js';
import { ToolRegistry } from '#src/core/registry.js';
import type { ToolDef, ToolResult } from '#src/core/types.js';
import { createBashTool, DEFAULT_BASH_TIMEOUT_MS, effectiveTimeout, MAX_BASH_TIMEOUT_MS } from '#src/tools/bash.js';
import { KILL_GRACE_MS } from '#src/os/proc/process.js';
import { reaperUnavailableReason } from '#src/os/proc/reaper.js';
import { sandboxUnavailableReason } from '#src/os/sandbox/bubblewrap.js';
import { Workspace } from '#src/os/fs/workspace.js';
import { escapees } from '../fixtures/escapees.js';
import { processesWith, trackedMarker, waitFor } from '../support/processes.js';
import { pathWithOnly } from '../support/programs.js';
import { toolContext } from '../support/tool-context.js';
import { requireOrSkip } from '../support/require.js';
import { temporaryDirectory } from '../support/workspace.js';

/**
 * Bash without the sandbox (TOOLPORT_BASH_SANDBOX=false), under the subreaper when it can run
 * here: the mode whose process handling these tests check. test/tools/sandbox.test.ts checks the sandbox.
 */
async function setup(t: { after(fn: () => Promise<void> | void): void }): Promise<{ bash: ToolDef; ws: Workspace }> {
  const dir = await temporaryDirectory(t, 'toolport-bash-');
  const ws = await Workspace.open(dir);
  return { bash: await createBashTool({ workspace: ws, sandbox: false }), ws };
}

async function run(bash: ToolDef, input: Record<string, unknown>, signal?: AbortSignal): Promise<{ text: string; isError: boolean }> {
  const result: ToolResult = await bash.execute(input, toolContext(signal));
  assert.equal(result.content.length, 1);
  const block = result.content[0]!;
  assert.equal(block.type, 'text');
  return { text: block.type === 'text' ? block.text : '', isError: result.isError === true };
}

const REPLACEMENT_OR_LONE_SURROGATE = /\uFFFD|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

test('Bash runs a command in the workspace root and returns its stdout', async (t) => {
  const { bash, ws } = await setup(t);
  const result = await run(bash, { command: 'echo hello && pwd', description: 'Prints a greeting' });
  assert.deepEqual(result, { text: `hello\n${ws.root}`, isError: false });
});

test('Bash reports a non-zero exit code as an error and shows the code', async (t) => {
  const { bash } = await setup(t);
  const result = await run(bash, { command: 'echo partial; exit 3' });
  assert.deepEqual(result, { text: 'partial\n(Exit code 3)', isError: true });
});

test('Bash returns stderr after stdout under a [stderr] line', async (t) => {
  const { bash } = await setup(t);
  const result = await run(bash, { command: 'echo out; echo oops >&2' });
  assert.deepEqual(result, { text: 'out\n[stderr]\noops', isError: false });
});

test('Bash says (no output) when a command prints nothing', async (t) => {
  const { bash } = await setup(t);
  assert.deepEqual(await run(bash, { command: 'true' }), { text: '(no output)', isError: false });
  assert.deepEqual(await run(bash, { command: 'false' }), { text: '(no output)\n(Exit code 1)', isError: true });
});

test('Bash reports a command killed by a signal as an error', async (t) => {
  const { bash } = await setup(t);
  const result = await run(bash, { command: 'kill -KILL $$' });
  assert.deepEqual(result, { text: '(no output)\n(Killed by signal SIGKILL)', isError: true });
});

test('Bash gives commands an empty stdin, so programs reading it finish at once', async (t) => {
  const { bash } = await setup(t);
  assert.deepEqual(await run(bash, { command: 'cat; echo done', timeout: 5_000 }), { text: 'done', isError: false });
});

test('Bash kills the command and its grandchildren when the timeout passes', async (t) => {
  const { bash } = await setup(t);
  const marker = trackedMarker(t);
  const started = Date.now();
  const result = await run(bash, { command: `sleep ${marker} & (sleep ${marker} &); echo started; wait`, timeout: 300 });
  assert.equal(result.isError, true);
  assert.equal(result.text, 'started\n(Command timed out after 300 ms and was killed)');
  assert.ok(Date.now() - started < KILL_GRACE_MS, 'bash exits on SIGTERM, so no SIGKILL grace is waited for');
  await waitFor(() => processesWith(marker).length === 0, 'the command and its grandchildren to be gone');
});

test('Bash kills background jobs that are still running when the command ends', async (t) => {
  const { bash } = await setup(t);
  const marker = trackedMarker(t);
  const result = await run(bash, { command: `sleep ${marker} > /dev/null & echo left running`, timeout: 5_000 });
  assert.deepEqual(result, { text: 'left running', isError: false });
  await waitFor(() => processesWith(marker).length === 0, 'the background job to be gone');
});

test('Bash without the sandbox kills processes that called setsid or were double-forked when the command ends, as its description says', async (t) => {
  if (!requireOrSkip(t, 'the subreaper (Perl)', await reaperUnavailableReason())) return;
  const { bash } = await setup(t);
  const marker = trackedMarker(t);
  assert.deepEqual(await run(bash, { command: `${escapees(marker)}; echo escaped`, timeout: 5_000 }), { text: 'escaped', isError: false });
  assert.equal(processesWith(marker).length, 0, 'nothing is left when the call returns');
  assert.match(bash.description, /every process it started is killed, including ones that call setsid or daemonise/);
  assert.doesNotMatch(bash.description, /A process that leaves the group/);
});

test('Bash without the sandbox kills processes that called setsid or were double-forked when the call is aborted', async (t) => {
  if (!requireOrSkip(t, 'the subreaper (Perl)', await reaperUnavailableReason())) return;
  const { bash, ws } = await setup(t);
  const marker = trackedMarker(t);
  const controller = new AbortController();
  const pending = run(bash, { command: `${escapees(marker)}; touch ready; wait`, timeout: 60_000 }, controller.signal);
  await waitFor(() => existsSync(path.join(ws.root, 'ready')), 'the escapees to be in place');
  controller.abort(new Error('the server is shutting down'));
  assert.deepEqual(await pending, { text: '(no output)\n(Command was aborted: the server is shutting down)', isError: true });
  assert.equal(processesWith(marker).length, 0, 'nothing is left when the call returns');
});

test('Bash without the sandbox or the subreaper does not kill a process that left the process group with setsid, as its description says', async (t) => {
  // perl taken away: the subreaper cannot run, and only the process group is left.
  await pathWithOnly(t, ['bash', 'setsid', 'sleep', 'cut']);
  const { bash } = await setup(t);
  const marker = trackedMarker(t);
  // Wait inside the command until the child has its own session (field 6 of /proc/PID/stat is the
  // session id), so the command cannot end before the child leaves the group.
  const command = `setsid sleep ${marker} > /dev/null 2>&1 & until [ "$(cut -d' ' -f6 /proc/$!/stat)" = "$!" ]; do :; done; echo escaped`;
  assert.deepEqual(await run(bash, { command, timeout: 5_000 }), { text: 'escaped', isError: false });
  assert.equal(processesWith(marker).length, 1);
  assert.match(bash.description, /A process that leaves the group \(setsid, or a program that daemonises\) is not killed and keeps running after the command/);
  assert.doesNotMatch(bash.description, /cannot keep a server running|every process it started are killed/);
});

test('Bash returns when a background job keeps the output pipe open', async (t) => {
  const { bash } = await setup(t);
  const marker = trackedMarker(t);
  const started = Date.now();
  const result = await run(bash, { command: `sleep ${marker} & echo done`, timeout: 5_000 });
  assert.deepEqual(result, { text: 'done', isError: false });
  assert.ok(Date.now() - started < KILL_GRACE_MS, 'the job holding the pipe is killed, not waited for');
  await waitFor(() => processesWith(marker).length === 0, 'the background job to be gone');
});

test('Bash kills a hanging command and its children when the call is aborted', async (t) => {
  const { bash } = await setup(t);
  const marker = trackedMarker(t);
  const controller = new AbortController();
  const pending = run(bash, { command: `sleep ${marker} & (sleep ${marker} &); wait`, timeout: 60_000 }, controller.signal);
  // bash itself, the backgrounded sleep and the sleep of the subshell.
  await waitFor(() => processesWith(marker).length >= 3, 'the command to start');
  controller.abort(new Error('client went away'));
  const result = await pending;
  assert.deepEqual(result, { text: '(no output)\n(Command was aborted: client went away)', isError: true });
  await waitFor(() => processesWith(marker).length === 0, 'the command and its children to be gone');
});

test('Bash does not start a command when the call is already aborted', async (t) => {
  const { bash, ws } = await setup(t);
  const controller = new AbortController();
  controller.abort(new Error('shutting down'));
  const result = await run(bash, { command: 'touch started' }, controller.signal);
  assert.deepEqual(result, { text: '(no output)\n(Command was aborted: shutting down)', isError: true });
  await assert.rejects(import('node:fs/promises').then((fs) => fs.access(path.join(ws.root, 'started'))));
});

test('Bash caps megabytes of output quickly, keeping head and tail and saying what was left out', async (t) => {
  const { bash } = await setup(t);
  const marker = trackedMarker(t);
  const started = Date.now();
  const result = await run(bash, {
    command: `echo FIRST; yes ${marker} | head -c 30000000; echo; echo LAST`,
    timeout: 20_000,
  });
  assert.equal(result.isError, false);
  assert.ok(result.text.length <= 30_000, `capped text has ${result.text.length} characters`);
  assert.ok(result.text.length > 29_000, 'the budget is used');
  assert.ok(result.text.startsWith(`FIRST\n${marker}\n`));
  assert.ok(result.text.endsWith('\nLAST'));
  assert.match(result.text, /\[\.\.\. \d+ bytes omitted; the output was 30000012 bytes, showing its beginning and end \.\.\.\]/);
  assert.ok(Date.now() - started < 15_000, 'the output is drained, not blocked on');
  await waitFor(() => processesWith(marker).length === 0, 'the producer to be gone');
});

test('Bash drains stdout and stderr together and caps both within the budget', async (t) => {
  const { bash } = await setup(t);
  const result = await run(bash, {
    command: '(yes err | head -c 5000000 >&2) & yes out | head -c 5000000; wait',
    timeout: 20_000,
  });
  assert.equal(result.isError, false);
  assert.ok(result.text.length <= 30_000 + '\n[stderr]\n'.length, `capped text has ${result.text.length} characters`);
  const [stdout, stderr] = result.text.split('\n[stderr]\n');
  assert.ok(stdout!.startsWith('out\nout\n') && stdout!.includes('bytes omitted'));
  assert.ok(stderr!.startsWith('err\nerr\n') && stderr!.includes('bytes omitted'));
});

test('Bash reports output with NUL bytes or invalid UTF-8 as binary instead of dumping it', async (t) => {
  const { bash } = await setup(t);
  assert.deepEqual(await run(bash, { command: "printf 'a\\0b'" }), { text: '[binary output, 3 bytes]', isError: false });
  assert.deepEqual(await run(bash, { command: "printf '\\xff\\xfe\\xfd' >&2" }), {
    text: '[stderr]\n[binary output, 3 bytes]',
    isError: false,
  });
  const big = await run(bash, { command: 'head -c 3000000 /dev/zero' });
  assert.equal(big.text, '[binary output, 3000000 bytes]');
});

test('Bash keeps multi-byte characters intact when they are split across chunks', async (t) => {
  const { bash } = await setup(t);
  // 20,000 euro signs (60,000 bytes) fit the cap and arrive in several pipe reads.
  const whole = await run(bash, { command: "yes '€' | head -n 20000 | tr -d '\\n'" });
  assert.equal(whole.text, '€'.repeat(20_000));

  const capped = await run(bash, { command: "yes '€' | head -n 100000 | tr -d '\\n'" });
  assert.doesNotMatch(capped.text, REPLACEMENT_OR_LONE_SURROGATE);
  const [head, tail] = capped.text.split(/\n\[\.\.\. \d+ bytes omitted[^\n]*\]\n/);
  assert.match(head!, /^€{10000,}$/u);
  assert.match(tail!, /^€{10000,}$/u);
});

test("Bash does not pass the server's own environment variables to commands", async (t) => {
  const { bash } = await setup(t);
  process.env.TOOLPORT_TEST_SECRET = 'hunter2';
  t.after(() => delete process.env.TOOLPORT_TEST_SECRET);
  const result = await run(bash, { command: 'echo "${TOOLPORT_TEST_SECRET-unset}"; env' });
  assert.equal(result.isError, false);
  assert.ok(result.text.startsWith('unset\n'));
  assert.doesNotMatch(result.text, /hunter2|TOOLPORT_TEST_SECRET/);
  const names = result.text
    .split('\n')
    .slice(1)
    .map((line) => line.slice(0, line.indexOf('=')))
    .filter((name) => name !== '' && name !== 'PWD' && name !== 'SHLVL' && name !== '_');
  for (const name of names) assert.ok(['PATH', 'HOME', 'LANG', 'LC_ALL', 'TERM', 'TZ', 'USER', 'SHELL', 'TMPDIR'].includes(name), name);
  assert.match(result.text, /^TERM=dumb$/m);
  assert.match(result.text, /^SHELL=\/bin\/bash$/m);
  assert.match(result.text, /^PATH=.+$/m);
});

test('Bash starts every call in the workspace root: cd does not persist between calls', async (t) => {
  const { bash, ws } = await setup(t);
  assert.deepEqual(await run(bash, { command: 'mkdir sub && cd sub && pwd' }), { text: path.join(ws.root, 'sub'), isError: false });
  assert.deepEqual(await run(bash, { command: 'pwd' }), { text: ws.root, isError: false });
});

test('Bash uses a default timeout of two minutes and lowers larger timeouts to ten minutes', () => {
  assert.equal(effectiveTimeout(undefined), DEFAULT_BASH_TIMEOUT_MS);
  assert.equal(DEFAULT_BASH_TIMEOUT_MS, 120_000);
  assert.equal(effectiveTimeout(250), 250);
  assert.equal(effectiveTimeout(0.5), 1);
  assert.equal(effectiveTimeout(MAX_BASH_TIMEOUT_MS), 600_000);
  assert.equal(effectiveTimeout(10_000_000), 600_000);
});

test('Bash is declared with the input schema and hints of Claude Code, and a deadline above its longest command', async (t) => {
  const { bash } = await setup(t);
  assert.equal(bash.name, 'Bash');
  assert.deepEqual(Object.keys(bash.inputSchema.properties ?? {}), ['command', 'timeout', 'description', 'run_in_background']);
  assert.deepEqual(bash.inputSchema.required, ['command']);
  assert.equal(bash.inputSchema.additionalProperties, false);
  assert.deepEqual(bash.annotations, { title: 'Bash', readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true });
  assert.ok(bash.timeoutMs! > MAX_BASH_TIMEOUT_MS + KILL_GRACE_MS);
  assert.match(bash.description, /NOT confined to the workspace/);
  assert.match(bash.description, /600000/);
});

test('Bash runs in the sandbox by default when bubblewrap works here', async (t) => {
  const dir = await temporaryDirectory(t, 'toolport-bash-');
  const ws = await Workspace.open(dir);
  const unavailable = await sandboxUnavailableReason(ws.root);
  if (!requireOrSkip(t, 'bubblewrap', unavailable)) return;
  const bash = await createBashTool({ workspace: ws });
  assert.match(bash.description, /^- Sandbox: commands run inside a bubblewrap sandbox/m);
  assert.doesNotMatch(bash.description, /NOT confined/);
  const { text } = await run(bash, { command: 'readlink /proc/self/ns/net' });
  assert.notEqual(text, readlinkSync('/proc/self/ns/net'), 'the command has a network namespace of its own');
});

test('Bash runs through the pipeline, which rejects a zero timeout and unknown properties', async (t) => {
  const { bash } = await setup(t);
  const executor = new ToolExecutor({ registry: new ToolRegistry().register(bash) });
  assert.deepEqual(await executor.call('Bash', { command: 'echo ok' }), { content: [{ type: 'text', text: 'ok' }], isError: false });
  await assert.rejects(executor.call('Bash', { command: 'true', timeout: 0 }), { code: 'INVALID_INPUT' });
  await assert.rejects(executor.call('Bash', { command: 'true', cwd: '/' }), { code: 'INVALID_INPUT' });
});

test('Bash reports progress as output arrives, at a bounded rate, when its caller listens', async (t) => {
  const { bash } = await setup(t);
  const reports: Array<{ progress: number; message?: string }> = [];
  const progress = (update: unknown): void => void reports.push(update as { progress: number; message?: string });
  // Chunks 600 ms apart (well over the 250 ms interval), then a burst of 200 lines.
  const command = 'echo one; sleep 0.6; echo two; sleep 0.6; echo three; for i in $(seq 200); do echo $i; done';
  const started = Date.now();
  const result = await bash.execute({ command }, { ...toolContext(), progress });
  const elapsed = Date.now() - started;
  assert.equal(result.isError, false);
  assert.ok(reports.length >= 2, `chunks 600 ms apart are reported apart: ${JSON.stringify(reports)}`);
  // The rate bound itself, whatever the machine's speed: at most one report per 250 ms.
  assert.ok(reports.length <= 1 + Math.floor(elapsed / 250), `${reports.length} reports in ${elapsed} ms`);
  assert.deepEqual(reports[0], { progress: 4, message: '4 bytes of output so far' });
  for (let i = 1; i < reports.length; i++) assert.ok(reports[i]!.progress > reports[i - 1]!.progress, 'progress grows');
});

test('Bash makes no progress reports when no one listens', async (t) => {
  const { bash } = await setup(t);
  const result = await run(bash, { command: 'echo quiet' });
  assert.deepEqual(result, { text: 'quiet', isError: false });
});
