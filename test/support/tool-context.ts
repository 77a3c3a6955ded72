import { pino } from 'pino';
import type { ToolContext } from '../../src/core/types.js';

/** A context for calling a tool's `execute` directly: silent logs, and `signal` (never aborted unless given). */
export function toolContext(signal: AbortSignal = new AbortController().signal, requestId = 'test'): ToolContext {
  return { signal, log: pino({ level: 'silent' }), requestId };
}
