import type { Logger } from 'pino';
import { Type } from 'typebox';
import { checkBashRules } from '../permissions/bash/permission.js';
import { defineTool } from '../core/define-tool.js';
import { describeAbortReason, errorResult, textResult } from '../core/result.js';
import type { ToolContext, ToolDef, ToolResult } from '../core/types.js';
import { MAX_OUTPUT_CHARS, OutputCapture } from './output-cap.js';
import { chooseBashIsolation, logBashIsolation, type BashIsolation, type BashOutcome, type BashSandboxSetting } from '../os/sandbox/isolation.js';
import { DEFAULT_BASH_LIMITS, type BashLimits } from '../os/sandbox/limits.js';
import { limitNotes, LimitSigns } from '../os/sandbox/limit-notes.js';
import { KILL_GRACE_MS } from '../os/proc/process.js';
import type { Workspace } from '../os/fs/workspace.js';
import type { BackgroundTasks } from './tasks/background-tasks.js';
import { createTaskFile, sweepStaleTaskFiles, TASKS_DIRECTORY, type TaskFile } from './tasks/task-file.js';

export const DEFAULT_BASH_TIMEOUT_MS = 120_000;
export const MAX_BASH_TIMEOUT_MS = 600_000;
// Each call is a process tree; a few at once is what one workspace and one machine can take.
const BASH_CONCURRENCY = 4;

export interface BashToolOptions {
  workspace: Workspace;
  /**
   * Run commands inside the bubblewrap sandbox: `auto` (the default) when a trial run at start-up
   * works, `true` always (an Error when it cannot), `false` never.
   */
  sandbox?: BashSandboxSetting;
  /** Files the server reads secrets or configuration from (the API keys file); the sandbox hides them. */
  secretFiles?: readonly string[];
  /** Sandboxed commands may use the network (default: none). */
  network?: boolean;
  /** Directories the sandbox hides whole: the other keys' workspaces. */
  hiddenDirectories?: readonly string[];
  /** Bounds on each call's processes, memory, files, CPU time and /tmp (default: `DEFAULT_BASH_LIMITS`). */
  limits?: BashLimits;
  /** Where to say, once, which mode runs and why. */
  log?: Logger;
  /**
   * Shells (in the sandbox: sandboxes) started ahead of calls, each used once, so that starting
   * one is off the call's path (default: the tool's concurrency; 0 starts each with its call).
   */
  spares?: number;
  /** Where `run_in_background` commands are kept (shared by every workspace's Bash); without, they are refused. */
  tasks?: BackgroundTasks;
}

// How each Bash tool made here runs, for start-up checks that need to know (see `bashIsolationOf`).
const ISOLATIONS = new WeakMap<ToolDef, BashIsolation>();

/** How a Bash tool made by `createBashTool` runs commands; undefined for any other tool. */
export function bashIsolationOf(tool: ToolDef): BashIsolation | undefined {
  return ISOLATIONS.get(tool);
}

const inputSchema = Type.Object(
  {
    command: Type.String({ description: 'The command to execute.' }),
    timeout: Type.Optional(
      Type.Number({
        minimum: 1,
        description: `Optional timeout in milliseconds (default ${DEFAULT_BASH_TIMEOUT_MS}, max ${MAX_BASH_TIMEOUT_MS}; larger values are lowered to the max).`,
      }),
    ),
    description: Type.Optional(
      Type.String({
        description: "Clear, concise description of what this command does in 5-10 words, in active voice. Example: 'Lists files in current directory'.",
      }),
    ),
    run_in_background: Type.Optional(
      Type.Boolean({
        description: 'Set to true to run this command in the background. Use TaskOutput to read the output later.',
      }),
    ),
  },
  { additionalProperties: false },
);

/** The timeout a call runs under: the default when none is given, never above the maximum. */
export function effectiveTimeout(requested: number | undefined): number {
  if (requested === undefined) return DEFAULT_BASH_TIMEOUT_MS;
  return Math.min(MAX_BASH_TIMEOUT_MS, Math.max(1, Math.ceil(requested)));
}

/**
 * The Bash tool, with Claude Code's name and input. Each call runs `bash -c` in a fresh process
 * group in the workspace root; see the description for what it can reach. How it runs (the
 * sandbox, or unconfined under the subreaper) is decided here, once; with `sandbox: true` an
 * Error explains why the sandbox does not work.
 */
export async function createBashTool(options: BashToolOptions): Promise<ToolDef> {
  const root = options.workspace.root;
  const isolation = await chooseBashIsolation({
    workspaceRoot: root,
    setting: options.sandbox ?? 'auto',
    secretFiles: options.secretFiles,
    hiddenDirectories: options.hiddenDirectories,
    network: options.network,
    limits: options.limits ?? DEFAULT_BASH_LIMITS,
    spares: options.spares ?? BASH_CONCURRENCY,
  });
  options.workspace.onClose(() => isolation.close());
  if (options.log) logBashIsolation(options.log, isolation);

  const tool = defineTool({
    name: 'Bash',
    description: describe(isolation),
    inputSchema,
    annotations: { title: 'Bash', readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
    // Above the longest command plus the kill grace, so the pipeline's deadline never cuts one short.
    timeoutMs: MAX_BASH_TIMEOUT_MS + KILL_GRACE_MS + 13_000,
    maxConcurrency: BASH_CONCURRENCY,
    rules: { specifier: 'command' },
    async execute({ command, timeout, run_in_background: background }, context) {
      await checkBashRules(context, command);
      if (background === true) return startInBackground(options, isolation, command, context);
      const timeoutMs = effectiveTimeout(timeout);
      const stdout = new OutputCapture();
      const stderr = new OutputCapture();
      const signs = new LimitSigns();
      const progress = context.progress ? outputProgress(context.progress) : undefined;
      const outcome = await isolation.run(withTraceContext(command, context.trace?.carrier), {
        cwd: root,
        timeoutMs,
        signal: context.signal,
        onStdout: progress
          ? (chunk) => {
              stdout.write(chunk);
              progress(chunk.length);
            }
          : (chunk) => stdout.write(chunk),
        onStderr: progress
          ? (chunk) => {
              stderr.write(chunk);
              signs.write(chunk);
              progress(chunk.length);
            }
          : (chunk) => {
              stderr.write(chunk);
              signs.write(chunk);
            },
      });
      const notes = limitNotes({
        ...outcome,
        signs,
        cgroup: outcome.cgroup,
        limits: isolation.limits,
        processesLimited: isolation.enforced.processes !== 'none',
        tmpLimited: isolation.enforced.tmp === 'tmpfs',
      });
      return formatResult(outcome, stdout, stderr, timeoutMs, notes);
    },
  });
  ISOLATIONS.set(tool, isolation);
  return tool;
}

// A task yields the CPU to calls: a build or a task that prints without end must not slow every
// caller's Echo and Bash (a nice value of 10 weighs about a tenth of the server's 0).
const TASK_NICENESS = 10;

/**
 * Starts `command` as a background task under the same isolation and limits as a call, bounded by
 * the task's lifetime instead of the call's timeout, and answers at once with Claude Code's words.
 */
async function startInBackground(options: BashToolOptions, isolation: BashIsolation, command: string, context: ToolContext): Promise<ToolResult> {
  const { tasks, workspace } = options;
  const { caller, log } = context;
  if (tasks === undefined) return errorResult('Background tasks are not available on this server.');
  const refused = tasks.refusal(caller);
  if (refused !== undefined) return errorResult(refused);
  const id = tasks.newId();
  // The first task in a workspace clears what a crashed server's tasks left there.
  const removed = await sweepStaleTaskFiles(workspace, tasks.bounds.maxLifetimeMs + tasks.bounds.retentionMs);
  if (removed > 0) log.info({ removed, directory: TASKS_DIRECTORY }, 'removed output files of tasks an earlier server left');
  let file: TaskFile;
  try {
    file = await createTaskFile(workspace, id);
  } catch (err) {
    // A command may have put something else where the tasks' directory goes.
    // The code alone: the message names the server's descriptor paths (/proc/self/fd/...).
    const code = (err as NodeJS.ErrnoException).code ?? 'an unexpected error';
    return errorResult(`Could not make the output file of the task in ${TASKS_DIRECTORY} (${code}): is something other than a directory there?`);
  }
  try {
    tasks.start(
      caller,
      id,
      command,
      file,
      (signal, timeoutMs, onOutput) =>
        isolation.run(withTraceContext(command, context.trace?.carrier), {
          cwd: workspace.root,
          timeoutMs,
          signal,
          onStdout: onOutput,
          onStderr: onOutput,
          // Bounded by the task's lifetime, not a call's timeout: a dev server may run for hours.
          cpuSeconds: isolation.limits.maxCpuSeconds === 0 ? 0 : Math.ceil(timeoutMs / 1000),
          niceness: TASK_NICENESS,
        }),
      log,
    );
  } catch (err) {
    return errorResult((err as Error).message);
  }
  return textResult(`Command running in background with ID: ${id}. Output is being written to: ${file.relativePath}`);
}

/** Characters of a W3C traceparent or tracestate that a shell reads as themselves inside single quotes. */
const TRACE_VALUE = /^[\x20-\x26\x28-\x7e]*$/;

/**
 * The command with the call's trace context in its environment, as OpenTelemetry passes context to
 * a child process (TRACEPARENT, TRACESTATE), so an instrumented command joins the trace. Set by the
 * command line itself, on its first line, because some isolations start their shells before the
 * call; only while tracing is on and the call's trace is sampled or continued.
 */
function withTraceContext(command: string, carrier: Readonly<Record<string, string>> | undefined): string {
  const parent = carrier?.['traceparent'];
  if (parent === undefined || !TRACE_VALUE.test(parent)) return command;
  const state = carrier?.['tracestate'];
  const exports = state !== undefined && state !== '' && TRACE_VALUE.test(state) ? `TRACEPARENT='${parent}' TRACESTATE='${state}'` : `TRACEPARENT='${parent}'`;
  return `export ${exports}; ${command}`;
}

/** Shortest gap between two progress reports of one command: output can arrive in thousands of chunks a second. */
const PROGRESS_INTERVAL_MS = 250;

/**
 * A progress report as output arrives, at most one per `PROGRESS_INTERVAL_MS`: how many bytes the
 * command has written so far (stdout and stderr). The output itself stays for the result.
 */
function outputProgress(report: (update: { progress: number; message: string }) => void): (bytes: number) => void {
  let total = 0;
  let lastAt = -Infinity;
  return (bytes) => {
    total += bytes;
    const now = performance.now();
    if (now - lastAt < PROGRESS_INTERVAL_MS) return;
    lastAt = now;
    report({ progress: total, message: `${total} bytes of output so far` });
  };
}

/** stdout, then stderr under a `[stderr]` line, then the limits the command ran into, then notes on how it ended. */
function formatResult(outcome: BashOutcome, stdout: OutputCapture, stderr: OutputCapture, timeoutMs: number, limitNotes: readonly string[]): ToolResult {
  if (outcome.spawnError) return errorResult(`Could not start the command: ${outcome.spawnError.message}`);

  // Share the character budget: the shorter stream keeps up to half, the longer takes the rest.
  const half = Math.floor(MAX_OUTPUT_CHARS / 2);
  let out = stdout.render(MAX_OUTPUT_CHARS);
  let err = stderr.render(MAX_OUTPUT_CHARS);
  if (out.text.length + err.text.length > MAX_OUTPUT_CHARS) {
    if (err.text.length <= half) out = stdout.render(MAX_OUTPUT_CHARS - err.text.length);
    else if (out.text.length <= half) err = stderr.render(MAX_OUTPUT_CHARS - out.text.length);
    else {
      out = stdout.render(half);
      err = stderr.render(MAX_OUTPUT_CHARS - half);
    }
  }

  const parts: string[] = [];
  if (stdout.totalBytes > 0) parts.push(withoutFinalNewline(out.text));
  if (stderr.totalBytes > 0) parts.push(`[stderr]\n${withoutFinalNewline(err.text)}`);
  if (parts.length === 0) parts.push('(no output)');
  parts.push(...limitNotes);

  const { exitCode, exitSignal, timedOut, abortReason } = outcome;
  if (timedOut) parts.push(`(Command timed out after ${timeoutMs} ms and was killed)`);
  else if (abortReason !== undefined) parts.push(`(Command was aborted: ${describeAbortReason(abortReason)})`);
  else if (exitSignal) parts.push(`(Killed by signal ${exitSignal})`);
  if (exitCode !== null && exitCode !== 0) parts.push(`(Exit code ${exitCode})`);

  const failed = exitCode !== 0 || exitSignal !== null || timedOut || abortReason !== undefined;
  return textResult(parts.join('\n'), failed);
}

function withoutFinalNewline(text: string): string {
  return text.endsWith('\n') ? text.slice(0, -1) : text;
}

function describe(isolation: BashIsolation): string {
  const network = isolation.network ? 'the network is open' : 'there is no network';
  const boundary =
    isolation.mechanism === 'bubblewrap'
      ? `- Sandbox: commands run inside a bubblewrap sandbox. The file system is read-only except the workspace and a private, empty /tmp; ${network}; processes, IPC and hostname are private. Files outside the workspace can still be read, but not the server's secrets (its API keys file, /run/secrets).`
      : isolation.mechanism === 'landlock'
        ? `- Sandbox: commands run under Landlock and seccomp. They can read and run the system's programs (/usr, /etc, ...) and write only the workspace and a private, empty directory that is their TMPDIR and HOME: /tmp itself and other paths are not writable, so use $TMPDIR for temporary files. ${network[0]!.toUpperCase()}${network.slice(1)}${isolation.network ? '' : ' (no sockets at all: a test that listens on localhost fails)'}. The server's processes and other calls cannot be signalled or inspected.`
        : "- NOT confined to the workspace: the workspace path checks of the file tools do not apply to Bash. A command can read, write and run anything the server's user can, and reach the network. The real boundary is the container, a dedicated unprivileged user, or the OS sandbox (off on this server).";
  return [
    'Executes a bash command (`bash -c`) and returns its output.',
    '',
    '- Each call is independent: it starts a fresh bash in the workspace root, so `cd`, variables and other shell state do not carry over to the next call. Chain steps with `&&` in one command, or use paths relative to the workspace root.',
    '- stdin is empty (/dev/null): interactive programs see end of input; pass flags such as `--yes` instead.',
    `- Timeout: \`timeout\` in milliseconds, default ${DEFAULT_BASH_TIMEOUT_MS} (2 minutes), maximum ${MAX_BASH_TIMEOUT_MS} (10 minutes); larger values are lowered to the maximum. On timeout the command is killed with its background processes, as below (SIGTERM, then SIGKILL ${KILL_GRACE_MS / 1000} s later).`,
    isolation.reaping !== 'process-group'
      ? '- Background processes: when the command ends, every process it started is killed, including ones that call setsid or daemonise; nothing outlives the command: to keep a server running, use run_in_background.'
      : '- Background processes: when the command ends, the processes still in its process group (such as `cmd &`) are killed. A process that leaves the group (setsid, or a program that daemonises) is not killed and keeps running after the command; do not rely on it being cleaned up.',
    `- Output: stdout, then stderr after a \`[stderr]\` line (the two are not interleaved), then notes such as \`(Exit code 1)\`. At most ${MAX_OUTPUT_CHARS} characters are returned; longer output keeps its beginning and end with a note of how many bytes were left out. Output with NUL bytes or invalid UTF-8 is shown as \`[binary output, N bytes]\`: write it to a file and inspect it with other commands.`,
    "- run_in_background: true starts the command and answers at once with a task ID and the workspace path of a file its stdout and stderr go to (read it with Read, or with TaskOutput); TaskStop ends it. It runs under the same sandbox and limits as a call, but for the task's lifetime instead of `timeout`; the number of tasks you may run at once, their output and their lifetime are bounded, and a task is forgotten a while after it ends.",
    describeLimits(isolation),
    '- isError is true when the command exits with a non-zero code, is killed by a signal, times out or is aborted.',
    "- Environment: only PATH, HOME, LANG, LC_ALL, TERM (dumb), TZ, USER, SHELL and TMPDIR; the server's own variables are not passed.",
    boundary,
    '- Prefer the dedicated tools (Read, Write, Edit, Glob, Grep) for files; use Bash for builds, tests, git and other programs.',
  ].join('\n');
}

/**
 * The description's line on the bounds a call runs under: the configured ones, not what this
 * machine enforces, so the description (and the OpenAPI document made from it) is the same on
 * every machine. /tmp's only in the sandbox, whose /tmp is the call's own.
 */
function describeLimits(isolation: BashIsolation): string {
  const { limits } = isolation;
  const mib = (bytes: number): string => `${Math.round(bytes / 1024 ** 2)} MiB`;
  const bounds: string[] = [];
  if (limits.maxProcesses > 0) bounds.push(`${limits.maxProcesses} processes and threads at once (a fork past it fails)`);
  if (limits.maxMemory > 0) bounds.push(`${mib(limits.maxMemory)} of memory for the whole command (past it the kernel kills a process)`);
  if (limits.maxAddressSpace > 0) bounds.push(`${mib(limits.maxAddressSpace)} of address space per process`);
  if (limits.maxFileSize > 0) bounds.push(`files of at most ${mib(limits.maxFileSize)} (a process writing past it is stopped)`);
  if (limits.maxCpuSeconds > 0) bounds.push(`${limits.maxCpuSeconds} s of CPU time per process, and no more than the timeout`);
  if (isolation.mechanism === 'bubblewrap' && limits.tmpSize > 0)
    bounds.push(`${mib(limits.tmpSize)} in /tmp and in /dev/shm each (held in memory; write large files to the workspace)`);
  if (isolation.mechanism === 'landlock' && limits.tmpSize > 0)
    bounds.push(`${mib(limits.tmpSize)} in the private directory (write large files to the workspace)`);
  if (bounds.length === 0) return '- Limits: none beyond the timeout.';
  return `- Limits per call, where this server can enforce them: ${bounds.join('; ')}. The result says which limit a command ran into.`;
}
