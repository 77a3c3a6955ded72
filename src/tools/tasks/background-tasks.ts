import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { DEFAULT_TASK_BOUNDS, type BackgroundWork, type TaskBounds } from '../../core/background.js';
import type { BashOutcome } from '../../os/sandbox/isolation.js';
import { OutputCapture } from '../output-cap.js';
import type { TaskFile } from './task-file.js';

/** A task's state in Claude Code's words. */
export type TaskStatus = 'running' | 'completed' | 'failed' | 'killed';

/** One background command. */
export interface BackgroundTask {
  readonly id: string;
  readonly command: string;
  /** The output file, relative to the workspace root. */
  readonly outputPath: string;
  status: TaskStatus;
  exitCode: number | null;
  /** Why it ended other than by itself: stopped by TaskStop, past its lifetime, the server stopping. */
  endNote: string | undefined;
  /** What it printed, stdout and stderr as they came, bounded at both ends. */
  readonly output: OutputCapture;
  /** Set once the file stopped taking output. */
  outputStopped: string | undefined;
  /** Resolves when the command has ended and its file is closed. */
  readonly ended: Promise<void>;
}

interface Entry extends BackgroundTask {
  owner: string;
  abort: AbortController;
  file: TaskFile;
  log: Logger | undefined;
  startedAt: number;
  forget?: NodeJS.Timeout;
}

/** How a task's command is run: the Bash tool's isolation, bound to the task's lifetime and signal. */
export type LaunchTask = (signal: AbortSignal, timeoutMs: number, onOutput: (chunk: Buffer) => void) => Promise<BashOutcome>;

// Callers without a key (stdio, in-process) share one owner.
const NO_CALLER = '-';
// Finished tasks one caller keeps before their retention is up; past it the oldest is forgotten, so
// starting short tasks in a loop cannot fill the server's memory.
const MAX_FINISHED_PER_CALLER = 64;
// The same for all callers together: without keys every client network is a caller.
const MAX_FINISHED = 1024;

/**
 * The background tasks of one server, for every workspace: who started each (a task is visible
 * only to its owner; any other caller is told it does not exist), the caps on how many run, and
 * their lifecycle: a lifetime, a bounded output file, and a time after exit before it is forgotten.
 */
export class BackgroundTasks implements BackgroundWork {
  readonly bounds: TaskBounds;
  readonly #tasks = new Map<string, Entry>();
  #running = 0;
  #draining = false;
  readonly #idle = new Set<() => void>();

  constructor(bounds: Partial<TaskBounds> = {}) {
    this.bounds = { ...DEFAULT_TASK_BOUNDS, ...bounds };
  }

  get running(): number {
    return this.#running;
  }

  /** Tasks running now, by caller (an API key's label, or `-` for callers without one). */
  runningByCaller(): ReadonlyMap<string, number> {
    const counts = new Map<string, number>();
    for (const task of this.#tasks.values()) if (task.status === 'running') counts.set(task.owner, (counts.get(task.owner) ?? 0) + 1);
    return counts;
  }

  /**
   * Why `owner` may not start a task now, in words for the model; undefined when it may. Checked
   * before the output file is made, and again by `start`.
   */
  refusal(owner: string | undefined): string | undefined {
    const who = owner ?? NO_CALLER;
    if (this.#draining) return 'Background tasks cannot be started: the server is shutting down.';
    if (this.bounds.maxPerCaller === 0 || this.bounds.maxTotal === 0)
      return 'Background tasks are switched off on this server: run the command without run_in_background.';
    const mine = this.runningByCaller().get(who) ?? 0;
    if (mine >= this.bounds.maxPerCaller)
      return `Too many background tasks: ${mine} of yours are running, the most allowed at once. Stop one with TaskStop, or wait for one to finish.`;
    if (this.#running >= this.bounds.maxTotal)
      return `Too many background tasks: the server runs ${this.#running}, the most it allows at once. Try again later.`;
    return undefined;
  }

  /** A fresh task id, unguessable: ids are the only handle, and another caller's must not be found by trying. */
  newId(): string {
    return `b${randomBytes(9).toString('base64url')}`;
  }

  /** Starts `launch` as a task of `owner`, writing its output to `file`; throws an Error with the refusal when caps are full. */
  start(owner: string | undefined, id: string, command: string, file: TaskFile, launch: LaunchTask, log?: Logger): BackgroundTask {
    const refused = this.refusal(owner);
    if (refused !== undefined) {
      void file.discard();
      throw new Error(refused);
    }
    const abort = new AbortController();
    let resolveEnded!: () => void;
    const entry: Entry = {
      id,
      command,
      outputPath: file.relativePath,
      status: 'running',
      exitCode: null,
      endNote: undefined,
      output: new OutputCapture(),
      outputStopped: undefined,
      ended: new Promise<void>((resolve) => (resolveEnded = resolve)),
      owner: owner ?? NO_CALLER,
      abort,
      file,
      log,
      startedAt: performance.now(),
    };
    this.#tasks.set(id, entry);
    this.#running++;
    let written = 0;
    const onOutput = (chunk: Buffer): void => {
      entry.output.write(chunk);
      if (entry.outputStopped !== undefined) return;
      const room = this.bounds.maxOutputBytes - written;
      if (chunk.length <= room) {
        written += chunk.length;
        file.write(chunk);
        return;
      }
      // The rest is still read and dropped, so the command never blocks on a full pipe.
      if (room > 0) file.write(chunk.subarray(0, room));
      written = this.bounds.maxOutputBytes;
      entry.outputStopped = `[Output stopped at ${this.bounds.maxOutputBytes} bytes, the most a task's file takes; the task goes on running and its further output is not kept]`;
      file.write(Buffer.from(`\n${entry.outputStopped}\n`));
    };
    void launch(abort.signal, this.bounds.maxLifetimeMs, onOutput)
      .then(
        (outcome) => this.#ended(entry, outcome),
        (err: unknown) => this.#ended(entry, { exitCode: null, exitSignal: null, timedOut: false, cpuSeconds: 0, spawnError: err as NodeJS.ErrnoException }),
      )
      .then(() => file.close())
      .finally(resolveEnded);
    return entry;
  }

  /** The task of `owner` with this id; undefined for an unknown id and for another caller's task alike. */
  get(owner: string | undefined, id: string): BackgroundTask | undefined {
    const task = this.#tasks.get(id);
    return task !== undefined && task.owner === (owner ?? NO_CALLER) ? task : undefined;
  }

  /** Stops a running task of `owner` (SIGTERM, then SIGKILL after the grace) and resolves when it has ended. */
  async stop(owner: string | undefined, id: string, note = 'stopped by TaskStop'): Promise<void> {
    const task = this.#tasks.get(id);
    if (task === undefined || task.owner !== (owner ?? NO_CALLER)) return;
    this.#stop(task, note);
    await task.ended;
  }

  drain(): void {
    this.#draining = true;
  }

  drained(graceMs: number): Promise<boolean> {
    if (this.#running === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.#idle.delete(done);
        resolve(this.#running === 0);
      };
      const timer = setTimeout(done, graceMs);
      this.#idle.add(done);
    });
  }

  async stopAll(): Promise<void> {
    const running = [...this.#tasks.values()].filter((t) => t.status === 'running');
    for (const task of running) this.#stop(task, 'stopped because the server is shutting down');
    await Promise.all(running.map((t) => t.ended));
  }

  endCallers(callers: readonly string[], graceMs: number): void {
    const gone = [...this.#tasks.values()].filter((t) => t.status === 'running' && callers.includes(t.owner));
    if (gone.length === 0) return;
    setTimeout(() => {
      for (const task of gone) this.#stop(task, "stopped because its caller's key was removed");
    }, graceMs).unref();
  }

  /** Stops every task, then forgets them all and removes their files: the server is closing. */
  async close(): Promise<void> {
    this.drain();
    await this.stopAll();
    const all = [...this.#tasks.values()];
    for (const task of all) this.#forget(task);
    await Promise.all(all.map((task) => task.file.discard()));
  }

  #forget(task: Entry): void {
    clearTimeout(task.forget);
    if (this.#tasks.get(task.id) !== task) return;
    this.#tasks.delete(task.id);
    void task.ended.then(() => task.file.discard());
  }

  #stop(task: Entry, note: string): void {
    if (task.status !== 'running' || task.abort.signal.aborted) return;
    task.endNote = note;
    task.abort.abort(new Error(note));
  }

  #ended(task: Entry, outcome: BashOutcome): void {
    task.exitCode = outcome.exitCode;
    if (outcome.spawnError !== undefined) {
      task.status = 'failed';
      task.endNote = `could not start: ${outcome.spawnError.message}`;
    } else if (outcome.timedOut) {
      task.status = 'killed';
      task.endNote = `stopped after running ${this.bounds.maxLifetimeMs} ms, the longest a task may run`;
    } else if (task.abort.signal.aborted) {
      task.status = 'killed';
    } else {
      task.status = outcome.exitCode === 0 ? 'completed' : 'failed';
      if (outcome.exitSignal !== null) task.endNote = `killed by signal ${outcome.exitSignal}`;
    }
    this.#running--;
    // The task's own line, beside its starting call's: how it ended and after how long.
    task.log?.info(
      { task: task.id, status: task.status, exitCode: task.exitCode, ms: Math.round(performance.now() - task.startedAt), note: task.endNote },
      'background task ended',
    );
    task.forget = setTimeout(() => this.#forget(task), this.bounds.retentionMs);
    task.forget.unref();
    // Oldest first: the map keeps the order tasks started in.
    const finished = [...this.#tasks.values()].filter((t) => t.status !== 'running');
    const callers = finished.filter((t) => t.owner === task.owner);
    for (const old of callers.slice(0, Math.max(0, callers.length - MAX_FINISHED_PER_CALLER))) this.#forget(old);
    for (const old of finished.slice(0, Math.max(0, finished.length - MAX_FINISHED))) this.#forget(old);
    if (this.#running === 0) for (const done of [...this.#idle]) done();
  }
}
