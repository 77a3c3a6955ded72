import { lstat, type FileHandle } from 'node:fs/promises';
import { abortable } from '../abortable.js';
import { formatBytes } from './describe.js';
import { walkHeld } from './walk.js';
import { heldPath, type Workspace } from './workspace.js';

/** Least time between two measurements of one workspace. */
export const REMEASURE_MS = 60_000;
// A measurement takes at most a tenth of the time: a walk of 30 s waits 300 s for the next.
const MEASURE_SHARE = 10;
// Each level holds its directory open while it is read; deeper directories are not counted.
export const MAX_MEASURED_DEPTH = 128;

/** A write's room, reserved until it is done: `done` with the change it made, or `cancel`. */
export interface Reservation {
  /** The write happened and changed the workspace's usage by `delta` bytes (negative: freed). */
  done(delta: number): void;
  /** Nothing was written. */
  cancel(): void;
}

/**
 * The disk a workspace uses, against its quota (`TOOLPORT_WORKSPACE_QUOTA`), for Write and Edit.
 * The figure is what `du` counts (allocated blocks, a file with several links once), measured by
 * a walk of the workspace through held descriptors, never following a symlink: once before the
 * first write that grows it (not at start-up, where a big workspace would hold up a desktop
 * client's first message, and a session that never writes would walk it for nothing), then again in the background when a write finds it older than `REMEASURE_MS` (or ten
 * times the last walk's duration, whichever is longer), never on a call's path. In between, the
 * server's own writes update it as they happen; what else writes there (Bash, another replica)
 * is seen at the next measurement. Writes reserve their size before writing, so concurrent writes
 * cannot together pass the quota.
 */
export class WorkspaceUsage {
  readonly quota: number;
  readonly #ws: Workspace;
  #used = 0;
  #reserved = 0;
  // Changes made while a walk runs, which it may not have seen: added to its total.
  #duringWalk = 0;
  #walking: Promise<void> | undefined;
  #measuredAt = 0;
  #nextAfterMs = REMEASURE_MS;
  #first: Promise<void> | undefined;

  constructor(ws: Workspace, quota: number) {
    this.#ws = ws;
    this.quota = quota;
  }

  /** The first measurement, started by the first write (or `measure`) that needs it. */
  #measured(): Promise<void> {
    return (this.#first ??= this.#measure());
  }

  /** The figure now, in bytes (for tests and messages). */
  get used(): number {
    return this.#used;
  }

  /**
   * Reserves room for a write that grows the workspace by `growth` bytes (its size less what the
   * file it replaces takes), or says why not: the refusal's text. A write that does not grow it
   * (a file made smaller) is always let through, so a full workspace can still be cleaned up.
   */
  async reserve(growth: number, signal: AbortSignal): Promise<Reservation | string> {
    await abortable(this.#measured(), signal);
    this.#refresh();
    const room = Math.max(0, growth);
    if (room > 0 && this.#used + this.#reserved + room > this.quota) {
      return `the workspace would pass its disk quota (TOOLPORT_WORKSPACE_QUOTA): it uses ${formatBytes(this.#used + this.#reserved)} of ${formatBytes(this.quota)}, and this write needs ${formatBytes(room)} more`;
    }
    this.#reserved += room;
    let open = true;
    return {
      done: (delta) => {
        if (!open) return;
        open = false;
        this.#reserved -= room;
        this.#add(delta);
      },
      cancel: () => {
        if (!open) return;
        open = false;
        this.#reserved -= room;
      },
    };
  }

  /** Measures again now, and resolves when done (for tests). */
  async measure(): Promise<void> {
    await this.#measured();
    await this.#walking;
    await this.#measure();
  }

  #add(delta: number): void {
    this.#used = Math.max(0, this.#used + delta);
    if (this.#walking !== undefined) this.#duringWalk += delta;
  }

  #refresh(): void {
    if (this.#walking === undefined && Date.now() - this.#measuredAt >= this.#nextAfterMs) {
      this.#measure().catch(() => undefined);
    }
  }

  #measure(): Promise<void> {
    const started = Date.now();
    this.#duringWalk = 0;
    const walk = measureTree(this.#ws.rootDir).then(
      (total) => {
        this.#used = Math.max(0, total + this.#duringWalk);
        this.#measuredAt = Date.now();
        this.#nextAfterMs = Math.max(REMEASURE_MS, (this.#measuredAt - started) * MEASURE_SHARE);
      },
      () => {
        // Unreadable root: keep the running figure, try again later.
        this.#measuredAt = Date.now();
      },
    );
    this.#walking = walk.finally(() => (this.#walking = undefined));
    return this.#walking;
  }
}

// One tracker per open workspace, however many sets of tools are bound to it.
const trackers = new WeakMap<Workspace, WorkspaceUsage>();

/** The usage tracker of `ws` with `quota` bytes; undefined for no quota (0). */
export function workspaceUsage(ws: Workspace, quota: number | undefined): WorkspaceUsage | undefined {
  if (quota === undefined || quota <= 0) return undefined;
  let usage = trackers.get(ws);
  if (usage === undefined || usage.quota !== quota) {
    usage = new WorkspaceUsage(ws, quota);
    trackers.set(ws, usage);
  }
  return usage;
}

/** The bytes allocated below the held directory `root`, itself included, as `du` counts them. */
async function measureTree(root: FileHandle): Promise<number> {
  const linked = new Set<string>();
  let total = Number((await root.stat({ bigint: true })).blocks) * 512;
  await walkHeld(root, { maxDepth: MAX_MEASURED_DEPTH }, async (dir, entry) => {
    const stats = await lstat(heldPath(dir, entry.name), { bigint: true }).catch(() => undefined);
    if (stats === undefined) return false;
    if (!stats.isDirectory() && stats.nlink > 1n) {
      const id = `${stats.dev}:${stats.ino}`;
      if (linked.has(id)) return false;
      linked.add(id);
    }
    total += Number(stats.blocks) * 512;
    return stats.isDirectory();
  });
  return total;
}
