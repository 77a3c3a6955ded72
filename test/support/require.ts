/**
 * What a test needs from the machine, and what happens when it is missing. Locally a test that
 * needs bubblewrap, Perl, Redis, ripgrep or prlimit skips itself and says why; with
 * TOOLPORT_TEST_REQUIRE_ALL=1 (set by `.ci/run`, whose machine installs them all) it fails
 * instead, so CI cannot go green with the sandbox, reaper and Redis tests quietly skipped.
 */
import assert from 'node:assert/strict';

/** True when a missing program fails the test instead of skipping it (CI). */
export const REQUIRE_ALL = process.env.TOOLPORT_TEST_REQUIRE_ALL === '1';

type Skippable = { skip(message?: string): void };

function requiredMessage(what: string, reason: string): string {
  return `${what} is required (TOOLPORT_TEST_REQUIRE_ALL=1) but cannot run here: ${reason}`;
}

/**
 * Returns true when `reason` is undefined (what the test needs works here). Otherwise fails the
 * test under TOOLPORT_TEST_REQUIRE_ALL=1, or skips it and returns false:
 * `if (!requireOrSkip(t, 'bubblewrap', await sandboxUnavailableReason(dir))) return;`.
 */
export function requireOrSkip(t: Skippable, what: string, reason: string | undefined): boolean {
  if (reason === undefined) return true;
  if (REQUIRE_ALL) assert.fail(requiredMessage(what, reason));
  t.skip(`${what} cannot run here: ${reason}`);
  return false;
}

/**
 * The same rule as {@link requireOrSkip}, as options for `test()` or `describe()`, for a need known
 * when the file loads: `{ skip }` locally; under TOOLPORT_TEST_REQUIRE_ALL=1 it throws, which
 * fails the file with the reason.
 */
export function requiredOptions(what: string, reason: string | undefined): { skip?: string } {
  if (reason === undefined) return {};
  if (REQUIRE_ALL) throw new assert.AssertionError({ message: requiredMessage(what, reason) });
  return { skip: `${what} cannot run here: ${reason}` };
}

/**
 * Skips the test, also in CI, when the machine lacks a capability CI machines may lack too (a
 * delegated cgroup v2 tree, mounting a tmpfs, writing /run/secrets, kubectl); returns true when
 * the capability is there. Never use it for a program `scripts/install-system-deps.sh` installs.
 */
export function skipWithout(t: Skippable, what: string, reason: string | undefined): boolean {
  if (reason === undefined) return true;
  t.skip(`${what} is not available here: ${reason}`);
  return false;
}
