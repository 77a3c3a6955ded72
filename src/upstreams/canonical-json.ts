import { createHash } from 'node:crypto';

/** Deepest nesting {@link canonicalJson} follows: far past any definition it is given, short of the call stack's end. */
const MAX_CANONICAL_DEPTH = 1000;

/**
 * One text per JSON value, whatever the order its keys came in: object keys sorted by UTF-16
 * code units at every level, no whitespace, numbers and strings as `JSON.stringify` writes them
 * (which is what RFC 8785 asks of JSON values). So two upstreams, or one upstream on two days,
 * that send the same definition give the same digest. Members that are `undefined`, functions or
 * symbols are left out (null in arrays), as `JSON.stringify` does; a bigint, or such a value as
 * the whole, throws a TypeError.
 */
export function canonicalJson(value: unknown): string {
  return canonical(value, 0);
}

/** SHA-256 of the canonical JSON of `value`, as 64 lowercase hexadecimal digits: a tool definition's digest. */
export function digestOf(value: unknown): string {
  return createHash('sha256').update(canonicalJson(value)).digest('hex');
}

/** Whether `value` holds arrays or objects nested more than `limit` levels deep (a scalar is level 0); walks without recursion. */
export function nestedDeeperThan(value: unknown, limit: number): boolean {
  const pending: Array<[unknown, number]> = [[value, 0]];
  while (pending.length > 0) {
    const [next, depth] = pending.pop()!;
    if (typeof next !== 'object' || next === null) continue;
    if (depth + 1 > limit) return true;
    for (const child of Array.isArray(next) ? next : Object.values(next)) pending.push([child, depth + 1]);
  }
  return false;
}

/**
 * A copy of a JSON value with every object's keys inserted in sorted order, for pretty text that
 * is stable too (JavaScript still lists integer-like keys first, in numeric order).
 */
export function withSortedKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withSortedKeys);
  if (typeof value !== 'object' || value === null) return value;
  const record = value as Record<string, unknown>;
  return Object.fromEntries(
    Object.keys(record)
      .sort()
      .map((key) => [key, withSortedKeys(record[key])]),
  );
}

function canonical(value: unknown, depth: number): string {
  if (depth > MAX_CANONICAL_DEPTH) throw new RangeError(`canonicalJson: the value is nested more than ${MAX_CANONICAL_DEPTH} levels deep`);
  if (value === null || typeof value === 'boolean' || typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number') return Number.isFinite(value) ? JSON.stringify(value) : 'null';
  if (Array.isArray(value)) return `[${value.map((item) => (isOmitted(item) ? 'null' : canonical(item, depth + 1))).join(',')}]`;
  if (typeof value === 'object') {
    const record = value as Record<string, unknown>;
    const keys = Object.keys(record)
      .filter((key) => !isOmitted(record[key]))
      .sort();
    return `{${keys.map((key) => `${JSON.stringify(key)}:${canonical(record[key], depth + 1)}`).join(',')}}`;
  }
  throw new TypeError(`canonicalJson: a ${typeof value} is not a JSON value`);
}

function isOmitted(value: unknown): boolean {
  return value === undefined || typeof value === 'function' || typeof value === 'symbol';
}
