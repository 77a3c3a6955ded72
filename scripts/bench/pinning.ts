import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

/** Where the server and the load generator run: two CPUs of their own, or shared ones. */
export interface Pinning {
  /** The CPU of the server under test (and of its children: Bash's processes). */
  serverCpu: number | undefined;
  /** The CPU of wrk, the sequential client and this process. */
  loadCpu: number | undefined;
  /** One line for the output: how the CPUs are shared out, or why they are not. */
  note: string;
}

/**
 * Pins with `taskset` when it is installed and this process may use two CPUs or more: the server
 * gets the first allowed CPU, the load generator the second, so neither measures the other. This
 * process moves to the load CPU too (it drives the sequential and cold-start clients).
 */
export function choosePinning(): Pinning {
  const cpus = allowedCpus();
  const unpinned = (why: string): Pinning => ({
    serverCpu: undefined,
    loadCpu: undefined,
    note: `not pinned: ${why}; server and load generator share the CPUs`,
  });
  if (spawnSync('taskset', ['--version'], { stdio: 'ignore' }).status !== 0) return unpinned('taskset (util-linux) is not installed');
  if (cpus === undefined) return unpinned('the allowed CPUs are unknown (no /proc/self/status)');
  const [serverCpu, loadCpu] = cpus;
  if (serverCpu === undefined || loadCpu === undefined) return unpinned(`only CPU ${cpus.join(',')} is available`);
  const self = spawnSync('taskset', ['-a', '-p', '-c', String(loadCpu), String(process.pid)], { stdio: 'ignore' });
  if (self.status !== 0) return unpinned(`taskset could not pin this process to CPU ${loadCpu}`);
  return { serverCpu, loadCpu, note: `server on CPU ${serverCpu}, load generator on CPU ${loadCpu} (taskset)` };
}

/** A command line run on `cpu` when there is one to pin to. */
export function pinned(cpu: number | undefined, command: string, args: readonly string[]): { command: string; args: string[] } {
  return cpu === undefined ? { command, args: [...args] } : { command: 'taskset', args: ['-c', String(cpu), command, ...args] };
}

/** The CPUs this process may run on (Linux's Cpus_allowed_list, e.g. `0-3,8`), in order. */
function allowedCpus(): number[] | undefined {
  let status: string;
  try {
    status = readFileSync('/proc/self/status', 'utf8');
  } catch {
    return undefined;
  }
  const list = /^Cpus_allowed_list:\s*(\S+)/m.exec(status)?.[1];
  if (list === undefined) return undefined;
  return list.split(',').flatMap((range) => {
    const [from, to = from] = range.split('-').map(Number);
    if (from === undefined || to === undefined) return [];
    return Array.from({ length: to - from + 1 }, (_, i) => from + i);
  });
}
