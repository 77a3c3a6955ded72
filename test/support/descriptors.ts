import { readdirSync, readlinkSync } from 'node:fs';

/** How many of this process's descriptors are open on paths starting with `prefix` (a directory, or a name's start). */
export function descriptorsUnder(prefix: string): number {
  let count = 0;
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      if (readlinkSync(`/proc/self/fd/${fd}`).startsWith(prefix)) count += 1;
    } catch {
      // Closed between the listing and the look: not open any more.
    }
  }
  return count;
}
