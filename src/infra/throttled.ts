import type { BaseLogger } from 'pino';

// Repeated failures (a flood of refused connections, Redis down) get one log line per interval, with a count.
export const LOG_INTERVAL_MS = 10_000;

/** A logging function that writes at most one line per interval; `repeats` counts the calls it held back since the last line. */
export function throttled(log: Pick<BaseLogger, 'warn' | 'error'>, level: 'warn' | 'error', msg: string): (fields: Record<string, unknown>) => void {
  let last = -Infinity;
  let held = 0;
  return (fields) => {
    const now = Date.now();
    if (now - last < LOG_INTERVAL_MS) {
      held += 1;
      return;
    }
    log[level]({ ...fields, ...(held > 0 && { repeats: held }) }, msg);
    last = now;
    held = 0;
  };
}
