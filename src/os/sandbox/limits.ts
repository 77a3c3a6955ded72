/**
 * Bounds on what one Bash call may take from the machine. 0 switches a bound off. How each is
 * enforced depends on the mode and the machine (see `BashIsolation.enforced`): hard resource limits
 * (setrlimit, through the shell's `ulimit`) that the command cannot raise, a cgroup per call when
 * the server can make one, and a sized tmpfs in the sandbox.
 */
export interface BashLimits {
  /** Processes and threads one call may have at once (TOOLPORT_BASH_MAX_PROCESSES). */
  maxProcesses: number;
  /** Bytes each writable tmpfs of the sandbox (/tmp, /dev/shm) holds (TOOLPORT_BASH_TMP_SIZE). */
  tmpSize: number;
  /** Largest file a process may write, in bytes, rounded down to KiB (TOOLPORT_BASH_MAX_FILE_SIZE; RLIMIT_FSIZE). */
  maxFileSize: number;
  /** Memory a call's processes may use together, in bytes, where a memory cgroup can be made (TOOLPORT_BASH_MAX_MEMORY). */
  maxMemory: number;
  /** Address space of each process, in bytes, rounded down to KiB (TOOLPORT_BASH_MAX_ADDRESS_SPACE; RLIMIT_AS). */
  maxAddressSpace: number;
  /** CPU seconds of each process, and never more than the call's timeout (TOOLPORT_BASH_MAX_CPU_SECONDS; RLIMIT_CPU). */
  maxCpuSeconds: number;
}

const MIB = 1024 ** 2;
const GIB = 1024 ** 3;

/**
 * Room for builds and test suites, not for taking the machine: RLIMIT_AS stays off because it
 * counts reserved address space, and Node's WebAssembly (among others) reserves far more than it
 * uses (`new WebAssembly.Memory` fails under a 4 GiB RLIMIT_AS).
 */
export const DEFAULT_BASH_LIMITS: Readonly<BashLimits> = {
  maxProcesses: 512,
  tmpSize: 128 * MIB,
  maxFileSize: GIB,
  maxMemory: 4 * GIB,
  maxAddressSpace: 0,
  maxCpuSeconds: 600,
};

/** No bound at all: what a caller that passes no limits gets. */
export const NO_BASH_LIMITS: Readonly<BashLimits> = {
  maxProcesses: 0,
  tmpSize: 0,
  maxFileSize: 0,
  maxMemory: 0,
  maxAddressSpace: 0,
  maxCpuSeconds: 0,
};

/** The CPU seconds a call gets: the configured limit, lowered to its timeout (rounded up); 0 when off. */
export function cpuSecondsFor(limits: BashLimits, timeoutMs: number): number {
  const timeout = Math.ceil(timeoutMs / 1000);
  return limits.maxCpuSeconds === 0 ? 0 : Math.min(limits.maxCpuSeconds, timeout);
}

/**
 * Shell commands that set the hard (and soft) resource limits before the command runs, for a
 * `bash -c` prelude. Setting the hard limit is what makes it stick: a process may lower it but
 * only a privileged one (CAP_SYS_RESOURCE) may raise it. A `ulimit` that fails leaves a lower
 * limit set before it in place (only raising is refused), so failures are ignored.
 *
 * RLIMIT_CPU's hard limit is one second above the soft one: at the soft limit the kernel sends
 * SIGXCPU, which names the cause; at the hard one SIGKILL, which would not. RLIMIT_NPROC only
 * when `processes`: it counts every process of the user in its user namespace, which is one call
 * in the sandbox (a namespace per call) but the server's whole user without it.
 */
export function ulimitCommands(limits: BashLimits, cpuSeconds: number, processes: boolean, niceness = 0): string[] {
  const commands: string[] = [];
  // Lowered in the shell, before the command forks anything: all it starts inherits it.
  if (niceness > 0) commands.push(`renice -n ${niceness} -p $$ >/dev/null`);
  if (processes && limits.maxProcesses > 0) commands.push(`ulimit -u ${limits.maxProcesses}`);
  if (limits.maxFileSize > 0) commands.push(`ulimit -f ${kib(limits.maxFileSize)}`);
  if (limits.maxAddressSpace > 0) commands.push(`ulimit -v ${kib(limits.maxAddressSpace)}`);
  if (cpuSeconds > 0) commands.push(`ulimit -S -t ${cpuSeconds}`, `ulimit -H -t ${cpuSeconds + 1}`);
  return commands.map((command) => `${command} 2>/dev/null`);
}

/**
 * The `bash -c` script that sets the limits and then runs its first argument with `bash -c`, so
 * the command starts as it always did, in a fresh shell whose $0 is `bash`.
 */
export function limitedBashScript(commands: readonly string[]): string {
  return [...commands, 'exec bash -c "$1"'].join('; ');
}

/** The byte counts `ulimit -f` and `-v` apply (bash counts both in KiB, and at least 1). */
export function appliedBytes(bytes: number): number {
  return kib(bytes) * 1024;
}

function kib(bytes: number): number {
  return Math.max(1, Math.floor(bytes / 1024));
}
