import { mkdtemp, realpath, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Workspace } from '../../src/os/fs/workspace.js';

/** A test, or anything that runs cleanups when it ends (`{ after }` from node:test for a whole file). */
export type Cleanup = { after(fn: () => Promise<void> | void): void };

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

/** A {@link Workspace} opened on a new temporary directory; both are closed and removed when `t` ends. */
export async function temporaryWorkspace(t: Cleanup, prefix = 'toolport-ws-', parent = tmpdir()): Promise<Workspace> {
  const dir = await temporaryDirectory(t, prefix, parent);
  const ws = await Workspace.open(dir);
  t.after(() => ws.close());
  return ws;
}
