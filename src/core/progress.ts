import type { Progress, ProgressUpdate } from './types.js';

/**
 * The `progress` function a tool's context carries when its caller listens: turns what the tool
 * reports into `Progress` whose `progress` always increases (a message alone counts one step on;
 * a report that does not move forward is dropped, as MCP requires), drops everything once `signal`
 * aborts (the call answered, timed out or was cancelled), and never lets the listener's failure
 * reach the tool. The one place progress is made to grow: the adapters (MCP's notifications,
 * REST's events) send what this hands them, bounding only the rate.
 */
export function progressReporter(listener: (progress: Progress) => void, signal: { readonly aborted: boolean }): (update: string | ProgressUpdate) => void {
  let last: number | undefined;
  return (update) => {
    if (signal.aborted) return;
    const given: ProgressUpdate = typeof update === 'string' ? { message: update } : (update ?? {});
    const progress = isNumber(given.progress) ? given.progress : (last ?? 0) + 1;
    if (last !== undefined && progress <= last) return;
    last = progress;
    const report: Progress = { progress };
    if (isNumber(given.total)) report.total = given.total;
    if (typeof given.message === 'string') report.message = given.message;
    try {
      listener(report);
    } catch {
      // The listener is the adapter's (a closed connection, say); the tool runs on regardless.
    }
  };
}

function isNumber(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value);
}
