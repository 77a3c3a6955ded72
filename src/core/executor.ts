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
      const got = input === null ? 'null' : Array.isArray(input) ? 'an array' : `a ${typeof input}`;
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
    const tool = this.registry.get(name)!;
    const requestId = options.requestId ?? `call-${++this.#nextId}`;
    const log = this.#log.child({ reqId: requestId, tool: name });
    const timeoutMs = tool.timeoutMs ?? this.#defaultTimeoutMs;
    const controller = new AbortController();
    const started = performance.now();

    let settle!: (r: { outcome: CallOutcome; result: ToolResult & { isError: boolean } }) => void;
    const stopped = new Promise<Parameters<typeof settle>[0]>((resolve) => (settle = resolve));
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

    const ran = this.#run(name, input as Record<string, unknown>, { signal: controller.signal, log, requestId });
    const { outcome, result } = await Promise.race([ran, stopped]);
    clearTimeout(timer);
    options.signal?.removeEventListener('abort', onAbort);
    // A tool that finished without looking at its signal still gets it, so leftovers stop.
    if (!controller.signal.aborted) controller.abort(new Error('call finished'));
    const ms = Math.round((performance.now() - started) * 100) / 100;
    log.info({ ms, outcome, inputBytes: options.inputBytes }, 'tool call');
    return result;
  }

  async #run(
    name: string,
    input: Record<string, unknown>,
    context: { signal: AbortSignal; log: Logger; requestId: string },
  ): Promise<{ outcome: CallOutcome; result: ToolResult & { isError: boolean } }> {
    let value: unknown;
    try {
      value = await this.registry.get(name)!.execute(input, context);
    } catch (err) {
      context.log.warn({ err }, 'tool threw');
      const message = err instanceof Error ? err.message : String(err);
      return { outcome: 'threw', result: errorResult(`Tool "${name}" failed: ${message || 'unknown error'}`) };
    }
    const normalised = normaliseResult(value);
    if ('defect' in normalised) {
      context.log.warn({ defect: normalised.defect }, 'tool returned a malformed result');
      return { outcome: 'malformed', result: errorResult(`Tool "${name}" returned a malformed result: ${normalised.defect}.`) };
    }
    return { outcome: normalised.result.isError ? 'tool_error' : 'ok', result: normalised.result };
  }
}
