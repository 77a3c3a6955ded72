import assert from 'node:assert/strict';
import { setImmediate as nextTurn, setTimeout as delay } from 'node:timers/promises';

/**
 * Polls `condition` until it holds; fails naming `what` when it still does not after `deadlineMs`.
 * `intervalMs` 0 polls on every turn of the event loop, for state that changes within the process.
 */
export async function until(condition: () => boolean | Promise<boolean>, what: string, deadlineMs = 10_000, intervalMs = 10): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  while (!(await condition())) {
    if (Date.now() > deadline) assert.fail(`timed out after ${deadlineMs} ms waiting for ${what}`);
    await (intervalMs === 0 ? nextTurn() : delay(intervalMs));
  }
}
