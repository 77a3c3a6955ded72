import { pino, type Logger } from 'pino';
import { CallAbort, type AbortSource } from './call-abort.js';
import { ToolportError } from './errors.js';
import { PermissionDenied, type Permissions } from './permissions.js';
import { ConcurrencyLimiter, DEFAULT_MAX_CONCURRENCY, DEFAULT_QUEUE_SIZE, defaultShareOfQueue, defaultShareOfSlots } from './limiter.js';
import { violationLines, type InputViolation, type OutputValidator } from './validator.js';
import { describeAbortReason, errorResult, normaliseResult } from './result.js';
import type { ToolRegistry } from './registry.js';
import { progressReporter } from './progress.js';
import type { CallSpan, ToolTrace } from './tracer.js';
import type { Progress, ProgressUpdate, ToolContext, ToolDef, ToolInput, ToolResult } from './types.js';

/** Outcome of one call, as logged and counted. */
export type CallOutcome = 'ok' | 'tool_error' | 'threw' | 'malformed' | 'timeout' | 'aborted';

/** The outcomes, in a fixed order (for metrics that start every series at zero). */
export const CALL_OUTCOMES: readonly CallOutcome[] = ['ok', 'tool_error', 'threw', 'malformed', 'timeout', 'aborted'];

/**
 * Hears what the pipeline does, for metrics; keeps the core free of any metrics library. It is
 * called on every call, so each method must be cheap, and it must not throw.
 */
export interface CallObserver {
  /** The calls of `tool` holding a slot (`running`) or waiting for one (`waiting`) changed. */
  loadChanged(tool: string, running: number, waiting: number): void;
  /**
   * A call that was admitted ended: how, how long the tool ran in seconds (undefined for a call
   * that left the queue before it started), and through which transport it came (undefined for a
   * call made on the executor itself). Calls refused before admission are not reported here.
   */
  callFinished(tool: string, outcome: CallOutcome, seconds: number | undefined, transport: string | undefined): void;
}

/**
 * How many calls of one tool run and wait. The configuration's `limits` section
 * (TOOLPORT_MAX_CONCURRENCY and its kin, src/config/sections/limits.ts) passes as it is.
 */
export interface CallLimits {
  /** Most calls of any one tool that run at once (default 16); a tool's own `maxConcurrency` may lower it. */
  maxConcurrency?: number | undefined;
  /** Most calls of any one tool that wait for a slot (default 64); past it, calls fail with `QUEUE_FULL`. */
  queueSize?: number | undefined;
  /**
   * Most calls of one caller (`CallOptions.caller`) that run at once, per tool (at most the tool's
   * limit); default: half of the tool's slots, rounded up, so one caller always leaves room.
   */
  maxConcurrencyPerCaller?: number | undefined;
  /** Most calls of one caller that wait for a slot, per tool (at most `queueSize`); default: a quarter of the queue, rounded up. */
  queuePerCaller?: number | undefined;
}

export interface ExecutorOptions extends CallLimits {
  registry: ToolRegistry;
  /** Where the audit lines go; a tool that logs gets a child bound to its request id and tool. */
  logger?: Logger;
  /** Deadline for tools that declare no `timeoutMs` of their own. */
  defaultTimeoutMs?: number;
  /** Told about every call, for metrics. */
  observer?: CallObserver;
}

export interface CallOptions {
  requestId?: string;
  /** Aborts the call from outside: the client went away or the server is shutting down. */
  signal?: AbortSource;
  /**
   * The call's own cancellation, made by the caller so it can abort the call without an
   * AbortController of its own (the gateway); when given, `signal` is not looked at.
   */
  abort?: CallAbort;
  /** Size of the raw input, for the log line (the input itself is never logged). */
  inputBytes?: number;
  /** The label of the API key the call came with, for the log line (logged as `key`). */
  keyLabel?: string;
  /** The adapter the call came through (`rest`, `mcp`, `cli`), for the log line and metrics. */
  transport?: string;
  /** Hears the tool's progress reports; without it, the tool's context has no `progress`. */
  onProgress?: (progress: Progress) => void;
  /**
   * Where to take the tool from instead of the executor's registry: the same tools bound to
   * another workspace. Concurrency limits are per tool name, shared by every registry.
   */
  registry?: ToolRegistry;
  /**
   * Who is calling, for fair admission: calls of one caller hold at most its share of a tool's
   * slots and queue, and waiting callers take turns. Undefined: the tool's limits only.
   */
  caller?: string;
  /** For an access token's caller: the application it was issued to, in the audit line. */
  client?: string | undefined;
  /** The caller's permission rules, given to the tool (`ToolContext.permissions`); a refusal it throws rejects the call. */
  permissions?: Permissions | undefined;
  /** The call's span, when tracing is on: told of validation, admission, the tool's work and the outcome. */
  span?: CallSpan | undefined;
}

export const DEFAULT_TOOL_TIMEOUT_MS = 60_000;

class DeadlineExceeded extends Error {
  override readonly name = 'DeadlineExceeded';
}

/** How a call that ran ended: its outcome, its result, and what the tool threw, if it did. */
interface Settled {
  outcome: CallOutcome;
  result: ToolResult & { isError: boolean };
  err?: unknown;
  /** The tool refused the call under the caller's rules before touching anything: the call rejects with it. */
  refusal?: PermissionDenied;
  /** The tool's own promise, when the call answered (aborted, timed out) before the tool settled. */
  stillRunning?: PromiseLike<unknown>;
}

/**
 * How long an aborted or timed-out tool keeps its slot (and its caller's share) after the call
 * answered, while it stops: Bash's commands get SIGTERM, then SIGKILL 2 s later, and until then they
 * still run. Freeing the slot at once let a caller that aborts its calls early run many more
 * commands than its share; keeping it until the tool settles would lose it for good to a tool that hangs.
 */
export const STOPPING_GRACE_MS = 5_000;

/**
 * The one execution pipeline: look the tool up, validate the input, wait for a slot under the
 * tool's concurrency limit, run the tool under a deadline with an abort signal, normalise what
 * comes back. Throws `ToolportError` only for the caller's mistakes (unknown tool, bad input) and
 * for a full queue; whatever the tool does becomes a `ToolResult`.
 *
 * The deadline starts when the tool starts: time spent waiting for a slot does not count against
 * it. Waiting is bounded by the queue size and ends at once when the call's signal aborts.
 */
export class ToolExecutor {
  readonly registry: ToolRegistry;
  readonly #log: Logger;
  readonly #defaultTimeoutMs: number;
  readonly #maxConcurrency: number;
  readonly #queueSize: number;
  readonly #maxConcurrencyPerCaller: number | undefined;
  readonly #queuePerCaller: number | undefined;
  readonly #observer: CallObserver | undefined;
  readonly #limiters = new Map<string, ConcurrencyLimiter>();
  #nextId = 0;

  constructor(options: ExecutorOptions) {
    this.registry = options.registry;
    this.#log = options.logger ?? pino({ level: 'silent' });
    this.#defaultTimeoutMs = options.defaultTimeoutMs ?? DEFAULT_TOOL_TIMEOUT_MS;
    this.#maxConcurrency = options.maxConcurrency ?? DEFAULT_MAX_CONCURRENCY;
    this.#queueSize = options.queueSize ?? DEFAULT_QUEUE_SIZE;
    this.#maxConcurrencyPerCaller = options.maxConcurrencyPerCaller;
    this.#queuePerCaller = options.queuePerCaller;
    this.#observer = options.observer;
    if (!(Number.isInteger(this.#maxConcurrency) && this.#maxConcurrency > 0)) {
      throw new RangeError(`maxConcurrency must be a positive integer, got ${this.#maxConcurrency}`);
    }
    if (!(Number.isInteger(this.#queueSize) && this.#queueSize >= 0)) {
      throw new RangeError(`queueSize must be a non-negative integer, got ${this.#queueSize}`);
    }
    if (this.#maxConcurrencyPerCaller !== undefined && !(Number.isInteger(this.#maxConcurrencyPerCaller) && this.#maxConcurrencyPerCaller > 0)) {
      throw new RangeError(`maxConcurrencyPerCaller must be a positive integer, got ${this.#maxConcurrencyPerCaller}`);
    }
    if (this.#queuePerCaller !== undefined && !(Number.isInteger(this.#queuePerCaller) && this.#queuePerCaller >= 0)) {
      throw new RangeError(`queuePerCaller must be a non-negative integer, got ${this.#queuePerCaller}`);
    }
  }

  /** The tool with this name; throws a `TOOL_NOT_FOUND` error that lists the available ones. */
  lookup(name: string, registry: ToolRegistry = this.registry): ToolDef {
    const tool = registry.get(name);
    if (tool) return tool;
    const available = registry.list().map((t) => t.name);
    throw new ToolportError('TOOL_NOT_FOUND', `Tool "${name}" not found. Available tools: ${available.join(', ') || '(none)'}.`, {
      tool: name,
      available,
    });
  }

  /**
   * Checks that the tool exists and the input satisfies its schema, and returns the input the
   * tool gets (nulls for optional properties left out); throws `ToolportError` if not.
   */
  check(name: string, input: unknown, registry: ToolRegistry = this.registry): ToolInput {
    this.lookup(name, registry);
    const validate = registry.validator(name)!;
    if (typeof input !== 'object' || input === null || Array.isArray(input)) {
      const got = input === null ? 'null' : Array.isArray(input) ? 'an array' : input === undefined ? 'nothing' : `a ${typeof input}`;
      throw new ToolportError('INVALID_INPUT', `Input for tool "${name}" must be a JSON object, got ${got}.`, {
        violations: [{ path: '$', message: 'must be object' }],
      });
    }
    input = validate.dropNulls(input as ToolInput);
    if (!validate(input)) {
      // Bounded whatever the input: a 1 MiB body can hold half a million violations.
      const report = validate.explain(input);
      const details: { violations: InputViolation[]; omitted?: number; complete?: false } = { violations: report.violations };
      if (report.omitted > 0) details.omitted = report.omitted;
      if (!report.complete) details.complete = false;
      throw new ToolportError('INVALID_INPUT', `Invalid input for tool "${name}":\n${violationLines(report)}`, details);
    }
    return input;
  }

  /** How many calls of a tool run and wait right now. */
  load(name: string): { running: number; waiting: number; limit: number } {
    const limiter = this.#limiterFor(this.lookup(name));
    return { running: limiter.running, waiting: limiter.waiting, limit: limiter.limit };
  }

  /**
   * Runs a tool. Rejects only with `ToolportError`: for an unknown tool or invalid input, and with
   * `QUEUE_FULL` when every slot of the tool is taken and its queue is full.
   */
  async call(name: string, input: unknown, options: CallOptions = {}): Promise<ToolResult & { isError: boolean }> {
    const prepared = this.check(name, input, options.registry);
    options.span?.validated();
    const tool = this.lookup(name, options.registry);
    const limiter = this.#limiterFor(tool);
    const abort = options.abort ?? new CallAbort();
    const unfollow = options.abort === undefined && options.signal !== undefined ? abort.follow(options.signal) : undefined;
    try {
      // Synchronous up to here: a call is queued (or refused) in the order call() was called.
      const admitted = limiter.acquire(abort, options.caller);
      const requestId = options.requestId ?? `call-${++this.#nextId}`;
      let waitMs: number | undefined;
      if (admitted !== true) {
        const queued = performance.now();
        const holds = await admitted;
        waitMs = roundMs(performance.now() - queued);
        if (!holds) {
          // Left the queue: the tool never started, and it holds no slot.
          const left: Settled = { outcome: 'aborted', result: abortedResult(name, abort.reason) };
          this.#audit(requestId, name, left, undefined, waitMs, options);
          return left.result;
        }
      }
      options.span?.admitted(waitMs);
      let stillRunning: PromiseLike<unknown> | undefined;
      try {
        const started = performance.now();
        // Looked up only for a tool that declares an output schema: nothing more for the others.
        const checkOutput = tool.outputSchema === undefined ? undefined : (options.registry ?? this.registry).outputValidator(name);
        const running = this.#start(tool, prepared, options, abort, requestId, checkOutput);
        const settled = running instanceof Promise ? await running : running;
        stillRunning = settled.stillRunning;
        const seconds = (performance.now() - started) / 1000;
        // A tool that finished without looking at its signal still gets it, so leftovers stop.
        abort.abort(CALL_FINISHED);
        // A refusal is the gateway's to log and count, as for one it made itself.
        if (settled.refusal !== undefined) throw settled.refusal;
        this.#audit(requestId, name, settled, seconds, waitMs, options);
        return settled.result;
      } finally {
        // A tool still stopping keeps its slot until it settles, at most STOPPING_GRACE_MS more.
        if (stillRunning === undefined) limiter.release(options.caller);
        else releaseOnce(stillRunning, () => limiter.release(options.caller));
      }
    } finally {
      unfollow?.();
    }
  }

  /**
   * The call's one audit line (the error of a tool that failed, with its stack, at warn), built
   * once on the executor's own logger: no child logger per call. `seconds` undefined: never ran.
   */
  #audit(reqId: string, tool: string, { outcome, err, result }: Settled, seconds: number | undefined, waitMs: number | undefined, options: CallOptions): void {
    const ms = seconds === undefined ? 0 : roundMs(seconds * 1000);
    const fields = {
      reqId,
      tool,
      ms,
      waitMs,
      outcome,
      inputBytes: options.inputBytes,
      key: options.keyLabel,
      client: options.client,
      transport: options.transport,
      err,
    };
    options.span?.settled(outcome, result);
    if (err === undefined) this.#log.info(fields, 'tool call');
    else this.#log.warn(fields, 'tool call');
    this.#observer?.callFinished(tool, outcome, seconds, options.transport);
  }

  #limiterFor(tool: ToolDef): ConcurrencyLimiter {
    let limiter = this.#limiters.get(tool.name);
    if (limiter === undefined) {
      const observer = this.#observer;
      const limit = Math.min(tool.maxConcurrency ?? Infinity, this.#maxConcurrency);
      limiter = new ConcurrencyLimiter({
        tool: tool.name,
        limit,
        queueSize: this.#queueSize,
        limitPerCaller: this.#maxConcurrencyPerCaller ?? defaultShareOfSlots(limit),
        queuePerCaller: this.#queuePerCaller ?? defaultShareOfQueue(this.#queueSize),
        onChange: observer && ((running, waiting) => observer.loadChanged(tool.name, running, waiting)),
      });
      this.#limiters.set(tool.name, limiter);
    }
    return limiter;
  }

  /**
   * Starts the tool and settles its call. A tool that answers synchronously (or throws) is settled
   * at once, with no timer, listener or promise; only one that returns a promise gets the deadline
   * timer and a listener for the abort, and whichever comes first settles the call.
   */
  #start(
    tool: ToolDef,
    input: ToolInput,
    options: CallOptions,
    abort: CallAbort,
    requestId: string,
    checkOutput: OutputValidator | undefined,
  ): Settled | Promise<Settled> {
    // A call cancelled before it began never starts the tool: it may have side effects.
    if (abort.aborted) return { outcome: 'aborted', result: abortedResult(tool.name, abort.reason) };
    const progress = options.onProgress && progressReporter(options.onProgress, abort);
    let value: unknown;
    try {
      const { span, caller, permissions } = options;
      value =
        span === undefined
          ? tool.execute(input, new CallContext(abort, this.#log, requestId, tool.name, progress, caller, permissions, undefined))
          : span.work(tool.name, (trace) => tool.execute(input, new CallContext(abort, this.#log, requestId, tool.name, progress, caller, permissions, trace)));
    } catch (err) {
      return threw(tool, err);
    }
    if (!isThenable(value)) return settledBy(tool, value, checkOutput);

    const timeoutMs = tool.timeoutMs ?? this.#defaultTimeoutMs;
    return new Promise<Settled>((resolve) => {
      let done = false;
      const settle = (settled: Settled): void => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        abort.removeEventListener('abort', onAbort);
        resolve(settled);
      };
      const onAbort = (): void => settle({ outcome: 'aborted', result: abortedResult(tool.name, abort.reason), stillRunning: value });
      const timer = setTimeout(() => {
        settle({ outcome: 'timeout', result: errorResult(`Tool "${tool.name}" timed out after ${timeoutMs} ms and was aborted.`), stillRunning: value });
        abort.abort(new DeadlineExceeded(`deadline of ${timeoutMs} ms exceeded`));
      }, timeoutMs);
      abort.addEventListener('abort', onAbort);
      try {
        value.then(
          (answer) => settle(settledBy(tool, answer, checkOutput)),
          (err: unknown) => settle(threw(tool, err)),
        );
      } catch (err) {
        settle(threw(tool, err));
      }
    });
  }
}

/**
 * What a tool receives besides its input. The logger and the signal are made when the tool first
 * asks for them: most calls of a quick tool use neither, and each costs an allocation or more.
 */
class CallContext implements ToolContext {
  readonly requestId: string;
  readonly progress: ((update: string | ProgressUpdate) => void) | undefined;
  readonly caller: string | undefined;
  readonly permissions: Permissions | undefined;
  readonly trace: ToolTrace | undefined;
  readonly #abort: CallAbort;
  readonly #parent: Logger;
  readonly #tool: string;
  #log: Logger | undefined;

  constructor(
    abort: CallAbort,
    parent: Logger,
    requestId: string,
    tool: string,
    progress: ((update: string | ProgressUpdate) => void) | undefined,
    caller: string | undefined,
    permissions: Permissions | undefined,
    trace: ToolTrace | undefined,
  ) {
    this.#abort = abort;
    this.trace = trace;
    this.caller = caller;
    this.permissions = permissions;
    this.#parent = parent;
    this.requestId = requestId;
    this.#tool = tool;
    this.progress = progress;
  }

  get signal(): AbortSignal {
    return this.#abort.signal;
  }

  get log(): Logger {
    return (this.#log ??= this.#parent.child({ reqId: this.requestId, tool: this.#tool }));
  }
}

/** Calls `release` once `running` settles, or STOPPING_GRACE_MS from now, whichever comes first. */
function releaseOnce(running: PromiseLike<unknown>, release: () => void): void {
  let released = false;
  const once = (): void => {
    if (released) return;
    released = true;
    clearTimeout(timer);
    release();
  };
  const timer = setTimeout(once, STOPPING_GRACE_MS);
  timer.unref?.();
  running.then(once, once);
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof value === 'object' && value !== null && typeof (value as { then?: unknown }).then === 'function';
}

/**
 * How a call ends when its tool answered `value`. A tool with an output schema must give
 * structured content matching it on success (MCP's clients refuse a result without), and any it
 * gives with an error is checked too (the SDK v1 client checks it whenever it is there).
 */
function settledBy(tool: ToolDef, value: unknown, checkOutput: OutputValidator | undefined): Settled {
  const normalised = normaliseResult(value);
  if ('defect' in normalised) return malformed(tool, `returned a malformed result: ${normalised.defect}.`);
  const { result } = normalised;
  if (checkOutput !== undefined) {
    const structured = result.structuredContent;
    if (structured === undefined) {
      if (!result.isError) return malformed(tool, 'returned no structuredContent, which its output schema requires on success.');
    } else if (!checkOutput(structured)) {
      return malformed(tool, `returned structuredContent that does not match its output schema:\n${violationLines(checkOutput.explain(structured), 'output')}`);
    }
  }
  return { outcome: result.isError ? 'tool_error' : 'ok', result };
}

function malformed(tool: ToolDef, problem: string): Settled {
  const message = `Tool "${tool.name}" ${problem}`;
  return { outcome: 'malformed', result: errorResult(message), err: new Error(message) };
}

function threw(tool: ToolDef, err: unknown): Settled {
  if (err instanceof PermissionDenied) return { outcome: 'threw', result: errorResult(err.message), refusal: err };
  return { outcome: 'threw', result: errorResult(`Tool "${tool.name}" failed: ${describeThrown(err)}`), err };
}

function abortedResult(name: string, reason: unknown): ToolResult & { isError: boolean } {
  return errorResult(`Tool "${name}" was aborted: ${describeAbortReason(reason)}.`);
}

// Made once: an Error captures a stack trace, which is not free on every call.
const CALL_FINISHED = new Error('call finished');

function roundMs(ms: number): number {
  return Math.round(ms * 100) / 100;
}

/** What a model should read about a thrown value: an Error's message, or the value itself. */
function describeThrown(err: unknown): string {
  if (err instanceof Error) return err.message || 'unknown error';
  if (typeof err === 'string') return err || 'unknown error';
  try {
    return JSON.stringify(err) ?? String(err);
  } catch {
    return String(err);
  }
}
