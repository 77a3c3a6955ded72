import { constants } from 'node:os';
import { appliedBytes, type BashLimits } from './limits.js';
import type { WatchedBound } from '../proc/process.js';

/** What a call's cgroup counted: the process limit refused a fork; the memory limit made the kernel kill a process. */
export interface CgroupEvents {
  processes: boolean;
  memory: boolean;
}

type Sign = 'fork' | 'fileSize' | 'cpu' | 'noSpace' | 'allocation';

// What programs print when a limit stops them: bash's own words (and most others') for a failed fork and for a job
// killed by SIGXFSZ or SIGXCPU, and strerror's for EFBIG, ENOSPC and ENOMEM.
const SIGNS: ReadonlyArray<readonly [Sign, RegExp]> = [
  ['fork', /fork\b[^\n]{0,60}Resource temporarily unavailable/],
  ['fileSize', /File size limit exceeded|File too large/],
  ['cpu', /CPU time limit exceeded/],
  ['noSpace', /No space left on device/],
  ['allocation', /Cannot allocate memory|cannot allocate \d+ bytes|MemoryError|[Oo]ut of memory/],
];
// Longer than any sign, so one split across two chunks is still found.
const CARRY_CHARS = 64;

/** Watches a command's stderr for the messages a limit leaves there. */
export class LimitSigns {
  readonly seen = new Set<Sign>();
  #carry = '';

  write(chunk: Buffer): void {
    if (this.seen.size === SIGNS.length) return;
    const text = this.#carry + chunk.toString('latin1');
    for (const [sign, pattern] of SIGNS) if (!this.seen.has(sign) && pattern.test(text)) this.seen.add(sign);
    this.#carry = text.slice(-CARRY_CHARS);
  }
}

export interface LimitNoteInput {
  exitCode: number | null;
  /** The bound the reaper's watch stopped the call at, when it did. */
  overBound?: WatchedBound;
  exitSignal: NodeJS.Signals | null;
  signs: LimitSigns;
  cgroup: CgroupEvents | undefined;
  limits: BashLimits;
  /** The CPU seconds this call ran under (0: none). */
  cpuSeconds: number;
  /** The process limit holds for this call (a cgroup, or RLIMIT_NPROC in the sandbox). */
  processesLimited: boolean;
  /** The sandbox's sized /tmp and /dev/shm are in place. */
  tmpLimited: boolean;
}

/**
 * Notes for the result, one per limit the command ran into, each naming the bound and its
 * variable. A process killed by a signal shows as that signal, or, in the sandbox and when a
 * shell ran it as one of several commands, as exit code 128 + the signal's number.
 */
export function limitNotes(input: LimitNoteInput): string[] {
  const { limits, signs, cgroup } = input;
  const signal = input.exitSignal ?? (input.exitCode !== null && input.exitCode > 128 ? signalName(input.exitCode - 128) : undefined);
  const notes: string[] = [];
  if (limits.maxFileSize > 0 && (signal === 'SIGXFSZ' || signs.seen.has('fileSize'))) {
    notes.push(`(Stopped: a process went past the file size limit of ${appliedBytes(limits.maxFileSize)} bytes, TOOLPORT_BASH_MAX_FILE_SIZE)`);
  }
  if (input.cpuSeconds > 0 && (signal === 'SIGXCPU' || signs.seen.has('cpu'))) {
    notes.push(`(Stopped: a process went past the CPU time limit of ${input.cpuSeconds} s, TOOLPORT_BASH_MAX_CPU_SECONDS or the timeout, whichever is less)`);
  }
  if (cgroup?.memory) {
    notes.push(`(Stopped: the command went past the memory limit of ${limits.maxMemory} bytes, TOOLPORT_BASH_MAX_MEMORY, and the kernel killed a process)`);
  }
  if (cgroup?.processes || (input.processesLimited && signs.seen.has('fork'))) {
    notes.push(`(A fork failed: the command reached the limit of ${limits.maxProcesses} processes, TOOLPORT_BASH_MAX_PROCESSES)`);
  }
  if (input.overBound === 'processes') {
    notes.push(`(Stopped: the command went past the limit of ${limits.maxProcesses} processes and threads, TOOLPORT_BASH_MAX_PROCESSES)`);
  }
  if (input.overBound === 'memory') {
    notes.push(`(Stopped: the command's processes went past the memory limit of ${limits.maxMemory} bytes, TOOLPORT_BASH_MAX_MEMORY)`);
  }
  if (input.overBound === 'tmp') {
    notes.push(`(Stopped: the command's private directory (TMPDIR, HOME) went past ${limits.tmpSize} bytes, TOOLPORT_BASH_TMP_SIZE)`);
  }
  if (input.tmpLimited && signs.seen.has('noSpace')) {
    notes.push(`(A write failed for lack of space: the sandbox's /tmp and /dev/shm hold at most ${limits.tmpSize} bytes each, TOOLPORT_BASH_TMP_SIZE)`);
  }
  if (limits.maxAddressSpace > 0 && signs.seen.has('allocation')) {
    notes.push(`(A memory allocation failed: each process may map at most ${appliedBytes(limits.maxAddressSpace)} bytes, TOOLPORT_BASH_MAX_ADDRESS_SPACE)`);
  }
  return notes;
}

const SIGNAL_NAMES = new Map(Object.entries(constants.signals).map(([name, number]) => [number, name as NodeJS.Signals]));

function signalName(number: number): NodeJS.Signals | undefined {
  return SIGNAL_NAMES.get(number);
}
