import { readdirSync, readFileSync } from 'node:fs';

/** The process's file-descriptor budget: its soft limit (`ulimit -n`) and how many are open now. */
export interface DescriptorUsage {
  /** Undefined where /proc/self/limits cannot be read, or says "unlimited". */
  limit: number | undefined;
  /** Undefined where /proc/self/fd cannot be listed. */
  open: number | undefined;
}

// Where the limit cannot be read (no /proc), assume the usual Linux default rather than no limit.
const ASSUMED_LIMIT = 1024;
const ASSUMED_OPEN = 64;
// Kept free of connections for what tool calls open themselves (files, pipes to child processes,
// directory walks): a quarter of the limit, and never fewer than this.
const MIN_RESERVE = 64;

/** The soft "Max open files" limit in the text of /proc/self/limits. */
export function parseDescriptorLimit(limits: string): number | undefined {
  const soft = /^Max open files\s+(\S+)/m.exec(limits)?.[1];
  return soft !== undefined && /^\d+$/.test(soft) ? Number(soft) : undefined;
}

/** Reads this process's descriptor limit and count from /proc; a field it cannot read is undefined. */
export function descriptorUsage(): DescriptorUsage {
  return { limit: attempt(() => parseDescriptorLimit(readFileSync('/proc/self/limits', 'utf8'))), open: attempt(() => readdirSync('/proc/self/fd').length) };
}

/** Raised when the descriptor limit leaves no room for connections. */
export class DescriptorLimitError extends Error {
  override readonly name = 'DescriptorLimitError';
}

/**
 * The default connection cap: the descriptors left under the limit once those open at start-up
 * and a reserve for tool calls are taken off, so connections alone can never exhaust them.
 * Throws `DescriptorLimitError` when nothing is left.
 */
export function defaultMaxConnections({ limit = ASSUMED_LIMIT, open = ASSUMED_OPEN }: DescriptorUsage): number {
  const reserve = Math.max(MIN_RESERVE, Math.ceil(limit / 4));
  const max = limit - open - reserve;
  if (max < 1) {
    throw new DescriptorLimitError(
      `The descriptor limit (ulimit -n) of ${limit} leaves no room for connections: ${open} are open at start-up and ${reserve} are kept for tool calls. ` +
        'Raise the limit, or set TOOLPORT_MAX_CONNECTIONS.',
    );
  }
  return max;
}

function attempt<T>(read: () => T): T | undefined {
  try {
    return read();
  } catch {
    return undefined;
  }
}
