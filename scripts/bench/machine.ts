import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { cpus, loadavg, release } from 'node:os';
import { ROOT } from './options.js';

/** What the figures were measured on, for the output and the JSON. */
export interface Machine {
  cpuModel: string;
  /** CPUs this process may use (what `nproc` prints). */
  cpus: number;
  node: string;
  kernel: string;
  wrk: string;
  pinning: string;
  loadAverage: number[];
}

/** `nproc` is `os.availableParallelism()` read before this process pinned itself to one CPU. */
export function machine(nproc: number, wrk: string, pinning: string): Machine {
  return { cpuModel: cpuModel(), cpus: nproc, node: process.version, kernel: release(), wrk, pinning, loadAverage: loadavg() };
}

/** The commit measured, and whether the work tree held changes to it. */
export function revision(): { commit: string | undefined; dirty: boolean | undefined } {
  const git = (...args: string[]): string | undefined => {
    const run = spawnSync('git', args, { cwd: ROOT, encoding: 'utf8' });
    return run.status === 0 ? run.stdout.trim() : undefined;
  };
  const status = git('status', '--porcelain', '--untracked-files=no');
  return { commit: git('rev-parse', 'HEAD'), dirty: status === undefined ? undefined : status !== '' };
}

function cpuModel(): string {
  try {
    const model = /^model name\s*:\s*(.+)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1];
    if (model) return model.trim();
  } catch {
    // Not Linux: os.cpus() below.
  }
  return cpus()[0]?.model ?? 'unknown CPU';
}
