import { randomBytes } from 'node:crypto';
import { open, rename, unlink } from 'node:fs/promises';
import path from 'node:path';
import { canonicalJson, digestOf, nestedDeeperThan, withSortedKeys } from '../canonical-json.js';
import { DEFINITION_LIMITS, printable, UNSEEN_CHARACTERS, type DefinitionRefusal, type UpstreamToolDefinition, type WireTool } from '../definitions.js';
import { lockDiffText, type ShownChange } from './diff.js';
import { isRecord } from '../../core/json.js';

// What a reviewer of the file would not see (a presentation selector after an emoji too, which a
// definition may hold). JSON.stringify has escaped the controls inside strings already, so a raw
// line break is the indentation's.
const UNSEEN = new RegExp(`(?![ \\n])[${UNSEEN_CHARACTERS}]`, 'gu');

/** The lock file's name, beside the upstreams file unless told otherwise. */
export const LOCK_FILE_NAME = 'toolport.lock.json';
/** Largest lock file read: 64 upstreams of 512 tools at a few KiB each, with room to spare. */
export const MAX_LOCK_FILE_BYTES = 256 * 1024 * 1024;

/** A lock file that cannot be read or is not one. The message names the file and the problem. */
export class LockFileError extends Error {
  override readonly name = 'LockFileError';
}

/** One pinned tool: the digest of its definition and the definition itself, so a change can be shown. */
export interface LockedTool {
  sha256: string;
  definition: WireTool;
}

/** `toolport.lock.json`: each upstream's tools, by the upstream's own tool names, as they were reviewed. */
export interface LockFile {
  version: 1;
  upstreams: Record<string, Record<string, LockedTool>>;
}

/** A tool not served under the lock: its definition differs from the pinned one, or it is not pinned. */
export interface HeldTool {
  upstreamName: string;
  reason: 'changed' | 'new';
}

/** Where the lock and the upstreams' tools differ, for `toolport upstreams diff`. */
export interface LockDiff {
  changed: Array<{ upstream: string; tool: string; before: string; after: string }>;
  added: Array<{ upstream: string; tool: string; sha256: string }>;
  removed: Array<{ upstream: string; tool: string; sha256: string }>;
  /** Tools an upstream lists that toolport's checks refuse (`checkDefinitions`), served whatever the lock says: the name as printable, and why. */
  refused: Array<{ upstream: string; tool: string; reason: string }>;
  /** The differences for a person: each changed field as lines before and after; ends with a newline. */
  text: string;
}

/** The lock that pins `definitions` (upstream name to its checked tools), keys sorted so equal inputs give equal files. */
export function lockOf(definitions: ReadonlyMap<string, readonly UpstreamToolDefinition[]>): LockFile {
  const upstreams = [...definitions.keys()].sort().map((upstream) => {
    const tools = [...definitions.get(upstream)!].sort((a, b) => compare(a.upstreamName, b.upstreamName));
    return [upstream, Object.fromEntries(tools.map((t) => [t.upstreamName, { sha256: t.digest, definition: t.wire }]))] as const;
  });
  return { version: 1, upstreams: Object.fromEntries(upstreams) };
}

/**
 * The file's text: indented JSON, keys in sorted order (see `withSortedKeys`), a newline at the
 * end; the same lock always reads the same. Characters a reviewer would not see are written as
 * `\uXXXX` escapes, which read back as the same strings.
 */
export function formatLock(lock: LockFile): string {
  return `${JSON.stringify(withSortedKeys(lock), null, 2).replace(UNSEEN, jsonEscapes)}\n`;
}

/** Reads a lock file's text strictly; throws `LockFileError` naming `source` and the first problem. */
export function parseLock(text: string, source: string): LockFile {
  const fail = (problem: string): never => {
    throw new LockFileError(`Invalid lock file ${JSON.stringify(source)}: ${problem}.`);
  };
  let data: unknown;
  try {
    data = JSON.parse(text.replace(/^\uFEFF/, ''));
  } catch {
    return fail('it is not valid JSON');
  }
  if (!isRecord(data)) return fail('it must be a JSON object with "version": 1 and "upstreams"');
  const unknown = Object.keys(data).find((key) => key !== 'version' && key !== 'upstreams');
  if (unknown !== undefined) fail(`unknown key "${printable(unknown)}" (a lock file has "version" and "upstreams")`);
  if (data['version'] === undefined) fail('it has no "version"');
  if (data['version'] !== 1) fail(`"version" is ${printable(JSON.stringify(data['version']), 40)}; this toolport reads version 1`);
  const upstreams = data['upstreams'];
  if (!isRecord(upstreams)) return fail('"upstreams" must be an object of upstreams by name');
  for (const [upstream, tools] of Object.entries(upstreams)) {
    if (!isRecord(tools)) fail(`upstream "${printable(upstream)}" must be an object of tools by name`);
    for (const [tool, locked] of Object.entries(tools as Record<string, unknown>)) {
      const problem = lockedToolProblem(tool, locked);
      if (problem !== undefined) fail(`tool "${printable(tool)}" of upstream "${printable(upstream)}": ${problem}`);
    }
  }
  return data as unknown as LockFile;
}

/** The lock file at `file`, or undefined when there is none; any other failure is a `LockFileError`. */
export async function readLock(file: string): Promise<LockFile | undefined> {
  let text: string;
  try {
    const handle = await open(file, 'r');
    try {
      const stats = await handle.stat();
      if (!stats.isFile()) throw new LockFileError(`Cannot read the lock file ${JSON.stringify(file)}: it is not a regular file.`);
      if (stats.size > MAX_LOCK_FILE_BYTES) throw new LockFileError(`Cannot read the lock file ${JSON.stringify(file)}: it is larger than 256 MiB.`);
      text = await handle.readFile('utf8');
    } finally {
      await handle.close();
    }
  } catch (err) {
    if (err instanceof LockFileError) throw err;
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return undefined;
    throw new LockFileError(`Cannot read the lock file ${JSON.stringify(file)}: ${code === 'EACCES' ? 'permission denied' : String(code)}.`);
  }
  return parseLock(text, file);
}

/**
 * Writes `lock` to `file` so that a reader sees the old file or the new one, never a mix: a
 * temporary file in the same directory, synced, then renamed over it. Throws `LockFileError`.
 */
export async function writeLock(file: string, lock: LockFile): Promise<void> {
  const dir = path.dirname(file);
  const temp = path.join(dir, `.${path.basename(file)}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`);
  try {
    const handle = await open(temp, 'wx', 0o644);
    try {
      await handle.writeFile(formatLock(lock));
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temp, file);
  } catch (err) {
    await unlink(temp).catch(() => undefined);
    const code = (err as NodeJS.ErrnoException).code;
    throw new LockFileError(`Cannot write the lock file ${JSON.stringify(file)}: ${code === 'EACCES' ? 'permission denied' : String(code ?? err)}.`);
  }
  // Makes the rename durable; some file systems refuse to sync a directory, and the data is on disk by then.
  const directory = await open(dir, 'r').catch(() => undefined);
  if (directory === undefined) return;
  await directory.sync().catch(() => undefined);
  await directory.close();
}

/**
 * Which of one upstream's tools may be served: without a lock, all of them; with one, those
 * pinned with the same digest. The rest are held, `changed` or `new` (every tool of an upstream
 * the lock does not name is new).
 */
export function admitted(
  lock: LockFile | undefined,
  upstream: string,
  tools: readonly UpstreamToolDefinition[],
): { served: UpstreamToolDefinition[]; held: HeldTool[] } {
  if (lock === undefined) return { served: [...tools], held: [] };
  const pinned = own(lock.upstreams, upstream);
  const served: UpstreamToolDefinition[] = [];
  const held: HeldTool[] = [];
  for (const tool of tools) {
    const locked = pinned === undefined ? undefined : own(pinned, tool.upstreamName);
    if (locked === undefined) held.push({ upstreamName: tool.upstreamName, reason: 'new' });
    else if (locked.sha256 !== tool.digest) held.push({ upstreamName: tool.upstreamName, reason: 'changed' });
    else served.push(tool);
  }
  return { served, held };
}

/**
 * What differs between the lock and the tools the upstreams list now (`current`: upstream name
 * to its checked tools; `refused`: to the entries the checks refused). Upstreams absent from
 * `current` are not compared: a lock entry for one no longer configured is ignored, as it is when
 * serving. A refused tool is shown with its reason and its definition (when it is within the
 * bounds of one), against the pinned one if any: never as removed, since the upstream lists it.
 */
export function diffLock(
  lock: LockFile | undefined,
  current: ReadonlyMap<string, readonly UpstreamToolDefinition[]>,
  refused: ReadonlyMap<string, readonly DefinitionRefusal[]> = new Map(),
): LockDiff {
  const diff: Omit<LockDiff, 'text'> = { changed: [], added: [], removed: [], refused: [] };
  const shown: ShownChange[] = [];
  for (const upstream of [...current.keys()].sort()) {
    const pinned = lock === undefined ? undefined : own(lock.upstreams, upstream);
    const tools = [...current.get(upstream)!].sort((a, b) => compare(a.upstreamName, b.upstreamName));
    for (const tool of tools) {
      const locked = pinned === undefined ? undefined : own(pinned, tool.upstreamName);
      if (locked === undefined) {
        diff.added.push({ upstream, tool: tool.upstreamName, sha256: tool.digest });
        shown.push({ kind: 'new', upstream, tool: tool.upstreamName, before: undefined, after: tool.wire });
      } else if (locked.sha256 !== tool.digest) {
        diff.changed.push({ upstream, tool: tool.upstreamName, before: locked.sha256, after: tool.digest });
        shown.push({ kind: 'changed', upstream, tool: tool.upstreamName, before: locked.definition, after: tool.wire });
      }
    }
    const listed = new Set(tools.map((t) => t.upstreamName));
    for (const refusal of refused.get(upstream) ?? []) {
      const name = typeof refusal.wire?.['name'] === 'string' ? refusal.wire['name'] : undefined;
      if (name !== undefined) listed.add(name);
      const locked = name === undefined || pinned === undefined ? undefined : own(pinned, name);
      diff.refused.push({ upstream, tool: refusal.upstreamName, reason: refusal.reason });
      const after = refusal.wire !== undefined && withinBounds(refusal.wire) ? refusal.wire : undefined;
      shown.push({ kind: 'refused', upstream, tool: name ?? refusal.upstreamName, reason: refusal.reason, before: locked?.definition, after });
    }
    for (const [tool, locked] of Object.entries(pinned ?? {}).sort(([a], [b]) => compare(a, b))) {
      if (listed.has(tool)) continue;
      diff.removed.push({ upstream, tool, sha256: locked.sha256 });
      shown.push({ kind: 'removed', upstream, tool, before: locked.definition, after: undefined });
    }
  }
  return { ...diff, text: lockDiffText(lock !== undefined, shown) };
}

/** Whether a refused entry is small and shallow enough to be shown: one refused for its size or depth is named only. */
function withinBounds(wire: WireTool): boolean {
  return !nestedDeeperThan(wire, DEFINITION_LIMITS.definitionDepth) && Buffer.byteLength(canonicalJson(wire)) <= DEFINITION_LIMITS.definitionBytes;
}

function lockedToolProblem(tool: string, locked: unknown): string | undefined {
  if (!isRecord(locked) || Object.keys(locked).sort().join() !== 'definition,sha256') return 'it must be an object with "sha256" and "definition"';
  const { sha256, definition } = locked;
  if (typeof sha256 !== 'string' || !/^[0-9a-f]{64}$/.test(sha256)) return '"sha256" must be 64 lowercase hexadecimal digits';
  if (!isRecord(definition) || definition['name'] !== tool) return `"definition" must be the tool's definition object, with "name": "${printable(tool)}"`;
  if (nestedDeeperThan(definition, DEFINITION_LIMITS.definitionDepth))
    return `"definition" is nested more than ${DEFINITION_LIMITS.definitionDepth} levels deep`;
  if (digestOf(definition) !== sha256) return '"sha256" is not the digest of "definition" (was the file edited? run `toolport upstreams lock` again)';
  return undefined;
}

/** `record[key]` when it is the record's own: a lock may pin a tool called `constructor` or `__proto__`. */
function own<T>(record: Record<string, T>, key: string): T | undefined {
  return Object.hasOwn(record, key) ? record[key] : undefined;
}

/** `char` as JSON `\uXXXX` escapes, one per UTF-16 code unit (a surrogate pair for one past U+FFFF). */
function jsonEscapes(char: string): string {
  let escaped = '';
  for (let i = 0; i < char.length; i++) escaped += `\\u${char.charCodeAt(i).toString(16).padStart(4, '0')}`;
  return escaped;
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
