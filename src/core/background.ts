/**
 * Work that runs past the call that started it (Bash's background tasks), as the server's
 * lifecycle sees it: counted by `/metrics` and `/readyz`, and drained on shutdown like calls in
 * flight. The tools own it; the adapters know it only through this contract.
 */
export interface BackgroundWork {
  /** Tasks running now. */
  readonly running: number;
  /** Refuses new tasks from now on. */
  drain(): void;
  /** Resolves when no task runs, or after `graceMs`; to whether none runs. */
  drained(graceMs: number): Promise<boolean>;
  /** Stops every task still running (SIGTERM, then SIGKILL) and resolves when all have ended. */
  stopAll(): Promise<void>;
  /** Stops, after `graceMs`, the tasks of these callers (the labels of keys a reload removed). */
  endCallers(callers: readonly string[], graceMs: number): void;
}

/** The bounds on background tasks, per caller and in total (TOOLPORT_BASH_TASKS_*). */
export interface TaskBounds {
  /** Tasks one caller may have running at once. */
  maxPerCaller: number;
  /** Tasks all callers together may have running at once. */
  maxTotal: number;
  /** Bytes of output a task's file takes; past it the file stops, with a note. */
  maxOutputBytes: number;
  /** Milliseconds a task may run before it is stopped. */
  maxLifetimeMs: number;
  /** Milliseconds a finished task is kept (its status and output file) before it is forgotten. */
  retentionMs: number;
}

/** Room for a dev server or a long build per caller; a day's worth of lifetime is too long to leave unattended. */
export const DEFAULT_TASK_BOUNDS: Readonly<TaskBounds> = {
  maxPerCaller: 4,
  maxTotal: 32,
  maxOutputBytes: 64 * 1024 ** 2,
  maxLifetimeMs: 4 * 3_600_000,
  retentionMs: 3_600_000,
};
