/**
 * The seccomp filter a Landlock-confined command runs under: what Landlock does not cover. It is a
 * classic BPF program, built here and loaded by the reaper (`reaper.pl`) right before the command
 * starts, after `PR_SET_NO_NEW_PRIVS`. It refuses:
 *
 * - every `socket()` while the network is closed (Landlock's network rights cover TCP only; UDP,
 *   raw and pathname Unix sockets would reach the host's services); `socketpair` stays;
 * - new namespaces (`unshare`, `setns`, `clone` with a `CLONE_NEW*` flag; `clone3`, whose flags
 *   a filter cannot read, answers ENOSYS so that the C library falls back to `clone`), as
 *   Docker's default profile does for an unprivileged container;
 * - io_uring, whose operations bypass the filter; the kernel keyrings; System V IPC, shared by
 *   every process of the user; `bpf`, `perf_event_open` and `userfaultfd`;
 * - system calls of another ABI (x32, or 32-bit compat), which would carry other numbers.
 */

/** Architectures whose system-call numbers the filter knows, by Node's `process.arch`. */
const ARCHES = {
  x64: {
    // AUDIT_ARCH_X86_64
    audit: 0xc000003e,
    // x32 system calls have this bit set, and numbers the filter does not check.
    x32Bit: 0x40000000,
    nr: {
      socket: 41,
      clone: 56,
      clone3: 435,
      unshare: 272,
      setns: 308,
      keyctl: 250,
      add_key: 248,
      request_key: 249,
      bpf: 321,
      perf_event_open: 298,
      userfaultfd: 323,
      io_uring_setup: 425,
      io_uring_enter: 426,
      io_uring_register: 427,
      shmget: 29,
      shmat: 30,
      shmctl: 31,
      shmdt: 67,
      semget: 64,
      semop: 65,
      semctl: 66,
      semtimedop: 220,
      msgget: 68,
      msgsnd: 69,
      msgrcv: 70,
      msgctl: 71,
    },
  },
  arm64: {
    // AUDIT_ARCH_AARCH64
    audit: 0xc00000b7,
    x32Bit: 0,
    nr: {
      socket: 198,
      clone: 220,
      clone3: 435,
      unshare: 97,
      setns: 268,
      keyctl: 219,
      add_key: 217,
      request_key: 218,
      bpf: 280,
      perf_event_open: 241,
      userfaultfd: 282,
      io_uring_setup: 425,
      io_uring_enter: 426,
      io_uring_register: 427,
      shmget: 194,
      shmat: 196,
      shmctl: 195,
      shmdt: 197,
      semget: 190,
      semop: 193,
      semctl: 191,
      semtimedop: 192,
      msgget: 186,
      msgsnd: 189,
      msgrcv: 188,
      msgctl: 187,
    },
  },
} as const;

type SyscallName = keyof (typeof ARCHES)['x64']['nr'];

/** True when the filter can be built for this architecture. */
export function seccompSupported(arch: string = process.arch): boolean {
  return Object.hasOwn(ARCHES, arch);
}

// Classic BPF opcodes (linux/filter.h) and seccomp's return values (linux/seccomp.h).
const LD_W_ABS = 0x20;
const JEQ_K = 0x15;
const JGE_K = 0x35;
const JSET_K = 0x45;
const RET_K = 0x06;
const RET_ALLOW = 0x7fff0000;
const RET_KILL_PROCESS = 0x80000000;
const RET_ERRNO = 0x00050000;
const EPERM = 1;
const EACCES = 13;
const ENOSYS = 38;
// Offsets in struct seccomp_data: the number, the architecture, the first argument's low word.
const NR_OFFSET = 0;
const ARCH_OFFSET = 4;
const ARG0_OFFSET = 16;
// CLONE_NEWTIME, NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET.
const CLONE_NEW_FLAGS = 0x00000080 | 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000;

const ALWAYS_REFUSED: readonly SyscallName[] = [
  'unshare',
  'setns',
  'keyctl',
  'add_key',
  'request_key',
  'bpf',
  'perf_event_open',
  'userfaultfd',
  'io_uring_setup',
  'io_uring_enter',
  'io_uring_register',
  'shmget',
  'shmat',
  'shmctl',
  'shmdt',
  'semget',
  'semop',
  'semctl',
  'semtimedop',
  'msgget',
  'msgsnd',
  'msgrcv',
  'msgctl',
];

export interface SeccompOptions {
  /** Commands may open sockets of any family (TOOLPORT_BASH_NETWORK=all). */
  network: boolean;
  /** Node's `process.arch` (default: this process's). */
  arch?: string;
}

/** The filter as `struct sock_filter` entries in the machine's byte order, for `PR_SET_SECCOMP`. */
export function seccompFilter(options: SeccompOptions): Buffer {
  const arch = ARCHES[(options.arch ?? process.arch) as keyof typeof ARCHES];
  if (arch === undefined) throw new Error(`the seccomp filter does not know the system calls of ${options.arch ?? process.arch}`);
  const program: Array<[code: number, jt: number, jf: number, k: number]> = [];
  const add = (code: number, jt: number, jf: number, k: number): void => void program.push([code, jt, jf, k]);
  const refuse = (nr: number, errno: number): void => {
    add(JEQ_K, 0, 1, nr);
    add(RET_K, 0, 0, RET_ERRNO | errno);
  };
  add(LD_W_ABS, 0, 0, ARCH_OFFSET);
  add(JEQ_K, 1, 0, arch.audit);
  add(RET_K, 0, 0, RET_KILL_PROCESS);
  add(LD_W_ABS, 0, 0, NR_OFFSET);
  if (arch.x32Bit !== 0) {
    add(JGE_K, 0, 1, arch.x32Bit);
    add(RET_K, 0, 0, RET_ERRNO | ENOSYS);
  }
  for (const name of ALWAYS_REFUSED) refuse(arch.nr[name], EPERM);
  refuse(arch.nr.clone3, ENOSYS);
  if (!options.network) refuse(arch.nr.socket, EACCES);
  // Last, since it loads the flags over the number: clone with a namespace flag.
  add(JEQ_K, 0, 3, arch.nr.clone);
  add(LD_W_ABS, 0, 0, ARG0_OFFSET);
  add(JSET_K, 0, 1, CLONE_NEW_FLAGS);
  add(RET_K, 0, 0, RET_ERRNO | EPERM);
  add(RET_K, 0, 0, RET_ALLOW);

  const buffer = Buffer.alloc(program.length * 8);
  program.forEach(([code, jt, jf, k], i) => {
    buffer.writeUInt16LE(code, i * 8);
    buffer.writeUInt8(jt, i * 8 + 2);
    buffer.writeUInt8(jf, i * 8 + 3);
    buffer.writeUInt32LE(k >>> 0, i * 8 + 4);
  });
  return buffer;
}
