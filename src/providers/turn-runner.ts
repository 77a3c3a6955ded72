import type { AbortSource } from '../core/call-abort.js';
import { ToolportError } from '../core/errors.js';
import type { Caller, Gateway } from '../core/gateway.js';
import { errorResult, resultSize } from '../core/result.js';
import type { Progress, ToolResult } from '../core/types.js';
import type { AnsweredCall } from './results.js';
import type { TurnCall } from './turns.js';

/** Most tool calls one turn may carry; a turn with more is refused whole. */
export const MAX_CALLS_PER_TURN = 64;
/**
 * Most bytes of results one turn answers with. One Read can return 10 MiB, so 64 of them would
 * hold most of a gigabyte: results are counted as they come, and one that would take the turn
 * past this is replaced by an error result saying so (the call did run).
 */
export const MAX_TURN_ANSWER_BYTES = 32 * 1024 * 1024;
/**
 * Most calls of one request (a turn, an MCP batch) that run or wait for a slot at once, so one
 * request cannot fill a tool's whole queue.
 */
export const MAX_TURN_CONCURRENCY = 8;

/** Who runs a turn and how: what each of its calls carries to the gateway. */
export interface TurnContext {
  caller: Caller;
  requestId: string;
  /** The adapter's transport label, for the audit lines and metrics. */
  transport: string;
  /** Aborts every call of the turn (the client went away). */
  signal?: AbortSource;
  /** Hears the progress reports of the turn's calls, by the call's index in the turn. */
  onProgress?: (index: number, progress: Progress) => void;
}

/** The BAD_REQUEST refusal for a turn with more calls than one request may carry, or undefined. */
export function turnSizeRefusal(calls: readonly TurnCall[]): ToolportError | undefined {
  if (calls.length <= MAX_CALLS_PER_TURN) return undefined;
  return new ToolportError('BAD_REQUEST', `The turn holds ${calls.length} tool calls; at most ${MAX_CALLS_PER_TURN} are taken in one request.`, {
    calls: calls.length,
    limit: MAX_CALLS_PER_TURN,
  });
}

/**
 * Runs the calls of an assistant's turn through the gateway, each as a single call would run
 * (scope, validation, admission, audit line, metric; each call after the first counts against
 * the rate limit too), and answers them in the turn's order. The calls run in the order the
 * model wrote them, as Claude Code runs them: consecutive calls of read-only tools
 * (`readOnlyHint`) run together, at most `MAX_TURN_CONCURRENCY` at once; any other call waits
 * for the calls before it and holds back the calls after it, so `Write` then `Read` of one file
 * reads what was written. A call that is refused or fails is an error result for that call only.
 */
export async function runTurn(gateway: Gateway, calls: readonly TurnCall[], context: TurnContext): Promise<AnsweredCall[]> {
  let answerBytes = 0;
  const withinBudget = (result: ToolResult, name: string): ToolResult => {
    const size = resultSize(result);
    if (answerBytes + size <= MAX_TURN_ANSWER_BYTES) {
      answerBytes += size;
      return result;
    }
    return errorResult(
      `Tool "${name}" ran, but its result (${size} bytes) is left out: the results of one turn may take at most ${MAX_TURN_ANSWER_BYTES} bytes. Make fewer or smaller calls per turn (a Read with offset and limit, say).`,
    );
  };
  const run = async (call: TurnCall, i: number): Promise<AnsweredCall> => {
    const identity = { caller: context.caller, tool: call.name, requestId: context.requestId, transport: context.transport, callId: call.id };
    if (call.problem !== undefined) {
      const refusal = new ToolportError(call.problem.kind === 'arguments-not-json' ? 'INVALID_JSON' : 'INVALID_INPUT', call.problem.message);
      gateway.refused(identity, refusal);
      return { id: call.id, result: errorResult(refusal.message) };
    }
    const onProgress = context.onProgress && ((progress: Progress) => context.onProgress!(i, progress));
    const result = await gateway.callSafe({ ...identity, input: call.input, signal: context.signal, extra: i > 0, ...(onProgress && { onProgress }) });
    return { id: call.id, result: withinBudget(result, call.name) };
  };

  const answers = new Array<AnsweredCall>(calls.length);
  let start = 0;
  while (start < calls.length) {
    // A run of read-only calls goes at once; a call that may change something goes alone.
    let end = start + 1;
    if (runsAlongside(gateway, calls[start]!)) {
      while (end < calls.length && runsAlongside(gateway, calls[end]!)) end++;
    }
    await inPool(MAX_TURN_CONCURRENCY, start, end, async (i) => {
      answers[i] = await run(calls[i]!, i);
    });
    start = end;
  }
  return answers;
}

/**
 * Whether a call may run at the same time as its neighbours: its tool says it only reads, or
 * the call will not run at all (its arguments were refused). Tools without the annotation (plug-ins,
 * unknown names) count as changing something.
 */
function runsAlongside(gateway: Gateway, call: TurnCall): boolean {
  return call.problem !== undefined || gateway.registry.get(call.name)?.annotations?.readOnlyHint === true;
}

/** Runs `task(i)` for i in [from, to), at most `size` at a time, starting them in order (a /calls turn, an MCP batch). */
export async function inPool(size: number, from: number, to: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = from;
  const worker = async (): Promise<void> => {
    while (next < to) await task(next++);
  };
  await Promise.all(Array.from({ length: Math.min(size, to - from) }, worker));
}
