import { mkdtemp, realpath, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Workspace } from '#src/os/fs/workspace.js';

/** A test, or anything that runs cleanups when it ends (`{ after }` from node:test for a whole file). */
export type Cleanup = { after(fn: () => Promise<void> | void): void };

/**
 * Cleanups held until {@link Cleanups.run}, which runs them once, last registered first. For a
 * directory whose end is not a test's end: a file's or a suite's `after` that closes what uses it
 * first (an `after` registered in a `before` hook would run as soon as that hook ends), or the
 * exit of a server process it serves.
 */
export class Cleanups implements Cleanup {
  readonly #pending: Array<() => Promise<void> | void> = [];

  after(fn: () => Promise<void> | void): void {
    this.#pending.push(fn);
  }

  async run(): Promise<void> {
    for (const fn of this.#pending.splice(0).reverse()) await fn();
  }
}

/**
 * A new empty directory named `<prefix>XXXXXX` in `parent` (the system's temporary directory by
 * default), removed with everything in it when `t` ends. Its real path, so it compares equal to
 * paths the server resolves.
 */
export async function temporaryDirectory(t: Cleanup, prefix = 'toolport-test-', parent = tmpdir()): Promise<string> {
  const dir = await realpath(await mkdtemp(path.join(parent, prefix)));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** Runs `fn` with a new {@link temporaryDirectory}, and removes the directory once `fn` settles. */
export async function withTemporaryDirectory<T>(prefix: string, fn: (dir: string) => Promise<T>): Promise<T> {
  const cleanups = new Cleanups();
  try {
    return await fn(await temporaryDirectory(cleanups, prefix));
  } finally {
    await cleanups.run();
  }
}

/** A {@link Workspace} opened on a new temporary directory; both are closed and removed when `t` ends. */
export async function temporaryWorkspace(t: Cleanup, prefix = 'toolport-ws-', parent = tmpdir()): Promise<Workspace> {
  const dir = await temporaryDirectory(t, prefix, parent);
  const ws = await Workspace.open(dir);
  t.after(() => ws.close());
  return ws;
}
