import { pino, type Logger } from 'pino';
import { ToolportError } from './errors.js';
import { describeViolations } from './validator.js';
import { errorResult, normaliseResult } from './result.js';
import type { ToolRegistry } from './registry.js';
import type { ToolDef, ToolResult } from './types.js';

/** Outcome of one call, as logged and counted. */
export type CallOutcome = 'ok' | 'tool_error' | 'threw' | 'malformed' | 'timeout' | 'aborted';

export interface ExecutorOptions {
  registry: ToolRegistry;
  /** The parent logger; each call gets a child bound to its request id and tool. */
  logger?: Logger;
  /** Deadline for tools that declare no `timeoutMs` of their own. */
  defaultTimeoutMs?: number;
}

export interface CallOptions {
  requestId?: string;
  /** Aborts the call from outside: the client went away or the server is shutting down. */
  signal?: AbortSignal;
  /** Size of the raw input, for the log line (the input itself is never logged). */
  inputBytes?: number;
}

export const DEFAULT_TOOL_TIMEOUT_MS = 60_000;

class DeadlineExceeded extends Error {
  override readonly name = 'DeadlineExceeded';
}

/**
 * The one execution pipeline: look the tool up, validate the input, run the tool under a deadline
 * with an abort signal, normalise what comes back. Throws `ToolportError` only for the caller's
 * mistakes (unknown tool, bad input); whatever the tool does becomes a `ToolResult`.
 */
export class ToolExecutor {
  readonly registry: ToolRegistry;
  readonly #log: Logger;
  readonly #defaultTimeoutMs: number;
  #nextId = 0;

  constructor(options: ExecutorOptions) {
    this.registry = options.registry;
    this.#log = options.logger ?? pino({ level: 'silent' });
    this.#defaultTimeoutMs = options.defaultTimeoutMs ?? DEFAULT_TOOL_TIMEOUT_MS;
  }

  /** The tool with this name; throws a `TOOL_NOT_FOUND` error that lists the available ones. */
  lookup(name: string): ToolDef {
    const tool = this.registry.get(name);
    if (tool) return tool;
    const available = this.registry.list().map((t) => t.name);
    throw new ToolportError('TOOL_NOT_FOUND', `Tool "${name}" not found. Available tools: ${available.join(', ') || '(none)'}.`, {
      tool: name,
      available,
    });
  }

  /** Checks that the tool exists and the input satisfies its schema; throws `ToolportError` if not. */
  check(name: string, input: unknown): void {
    this.lookup(name);
    const validate = this.registry.validator(name)!;
    if (typeof input !== 'object' || input === null || Array.isArray(input)) {
      const got = input === null ? 'null' : Array.isArray(input) ? 'an array' : input === undefined ? 'nothing' : `a ${typeof input}`;
      throw new ToolportError('INVALID_INPUT', `Input for tool "${name}" must be a JSON object, got ${got}.`, {
        violations: [{ path: '$', message: 'must be object' }],
      });
    }
    if (!validate(input)) {
      const violations = describeViolations(validate.errors ?? []);
      const lines = violations.map((v) => `- ${v.path}: ${v.message}`).join('\n');
      throw new ToolportError('INVALID_INPUT', `Invalid input for tool "${name}":\n${lines}`, { violations });
    }
  }

  /** Runs a tool. Rejects only with `ToolportError` for an unknown tool or invalid input. */
  async call(name: string, input: unknown, options: CallOptions = {}): Promise<ToolResult & { isError: boolean }> {
    this.check(name, input);
    const tool = this.lookup(name);
    const requestId = options.requestId ?? `call-${++this.#nextId}`;
    const log = this.#log.child({ reqId: requestId, tool: name });
    const timeoutMs = tool.timeoutMs ?? this.#defaultTimeoutMs;
    const controller = new AbortController();
    const started = performance.now();

    type Settled = { outcome: CallOutcome; result: ToolResult & { isError: boolean }; err?: unknown };
    let settle!: (settled: Settled) => void;
    const stopped = new Promise<Settled>((resolve) => (settle = resolve));
    const onAbort = (): void => {
      const reason: unknown = options.signal?.reason;
      const why = reason instanceof Error ? reason.message : typeof reason === 'string' ? reason : 'the call was cancelled';
      controller.abort(reason);
      settle({ outcome: 'aborted', result: errorResult(`Tool "${name}" was aborted: ${why}.`) });
    };
    const timer = setTimeout(() => {
      controller.abort(new DeadlineExceeded(`deadline of ${timeoutMs} ms exceeded`));
      settle({ outcome: 'timeout', result: errorResult(`Tool "${name}" timed out after ${timeoutMs} ms and was aborted.`) });
    }, timeoutMs);
    if (options.signal?.aborted) onAbort();
    else options.signal?.addEventListener('abort', onAbort, { once: true });

    // A call cancelled before it began never starts the tool: it may have side effects.
    const ran = controller.signal.aborted ? stopped : this.#run(tool, input as Record<string, unknown>, { signal: controller.signal, log, requestId });
    const { outcome, result, err } = await Promise.race([ran, stopped]);
    clearTimeout(timer);
    options.signal?.removeEventListener('abort', onAbort);
    // A tool that finished without looking at its signal still gets it, so leftovers stop.
    if (!controller.signal.aborted) controller.abort(new Error('call finished'));
    const ms = Math.round((performance.now() - started) * 100) / 100;
    // One line per call; failures of the tool itself carry the error (with its stack) at warn.
    if (err === undefined) log.info({ ms, outcome, inputBytes: options.inputBytes }, 'tool call');
    else log.warn({ ms, outcome, inputBytes: options.inputBytes, err }, 'tool call');
    return result;
  }

  async #run(
    tool: ToolDef,
    input: Record<string, unknown>,
    context: { signal: AbortSignal; log: Logger; requestId: string },
  ): Promise<{ outcome: CallOutcome; result: ToolResult & { isError: boolean }; err?: unknown }> {
    let value: unknown;
    try {
      value = await tool.execute(input, context);
    } catch (err) {
      return { outcome: 'threw', result: errorResult(`Tool "${tool.name}" failed: ${describeThrown(err)}`), err };
    }
    const normalised = normaliseResult(value);
    if ('defect' in normalised) {
      const message = `Tool "${tool.name}" returned a malformed result: ${normalised.defect}.`;
      return { outcome: 'malformed', result: errorResult(message), err: new Error(message) };
    }
    return { outcome: normalised.result.isError ? 'tool_error' : 'ok', result: normalised.result };
  }
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
