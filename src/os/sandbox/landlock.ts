import { readdir, realpath, stat } from 'node:fs/promises';
import path from 'node:path';

/**
 * Landlock (linux/landlock.h): an unprivileged process restricts itself and everything it starts,
 * for good. A Landlock-confined command may open only files below the paths it was given, with the
 * rights it was given; may bind and connect TCP ports only as given; and, from ABI 6 on, may
 * neither signal nor connect to the abstract Unix sockets of processes outside its domain. The
 * kernel also keeps it from tracing those processes and from reading their `/proc` files that need
 * that right (`environ`, `mem`, `fd/`, `maps`), and from changing any mount.
 *
 * The reaper (`reaper.pl`) makes the system calls; this module says what to ask for.
 */

/** The ABI that brings the scopes (signals, abstract Unix sockets): Linux 6.12. */
export const LANDLOCK_MIN_ABI = 6;

/** Access rights on files and directories (LANDLOCK_ACCESS_FS_*), ABI 1 to 5. */
export const FS = {
  EXECUTE: 1 << 0,
  WRITE_FILE: 1 << 1,
  READ_FILE: 1 << 2,
  READ_DIR: 1 << 3,
  REMOVE_DIR: 1 << 4,
  REMOVE_FILE: 1 << 5,
  MAKE_CHAR: 1 << 6,
  MAKE_DIR: 1 << 7,
  MAKE_REG: 1 << 8,
  MAKE_SOCK: 1 << 9,
  MAKE_FIFO: 1 << 10,
  MAKE_BLOCK: 1 << 11,
  MAKE_SYM: 1 << 12,
  REFER: 1 << 13,
  TRUNCATE: 1 << 14,
  IOCTL_DEV: 1 << 15,
} as const;

/** Every file-system right of ABI 6: all of them are handled, so what no rule grants is refused. */
export const FS_ALL = (1 << 16) - 1;
/** The rights that apply to a file (not a directory); a rule on a file may grant only these. */
export const FS_FILE = FS.EXECUTE | FS.WRITE_FILE | FS.READ_FILE | FS.TRUNCATE | FS.IOCTL_DEV;
export const FS_READ = FS.READ_FILE | FS.READ_DIR;
export const FS_READ_EXEC = FS_READ | FS.EXECUTE;
/** TCP bind and connect (LANDLOCK_ACCESS_NET_*, ABI 4). */
export const NET_TCP = (1 << 0) | (1 << 1);
/** Abstract Unix sockets and signals (LANDLOCK_SCOPE_*, ABI 6). */
export const SCOPE_ALL = (1 << 0) | (1 << 1);

/** One rule: `access` on `path` and everything below it. */
export interface PathRule {
  path: string;
  access: number;
}

/** Directories of the system that commands read and run programs from. */
export const SYSTEM_READ_EXEC = ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32', '/etc', '/opt'];
/** Read-only views of the kernel: /proc shows what the kernel lets a confined process see. */
export const SYSTEM_READ = ['/proc', '/sys'];
/** The device files a command may use, with what it may do to them. */
export const DEVICES: readonly PathRule[] = [
  { path: '/dev/null', access: FS.READ_FILE | FS.WRITE_FILE | FS.TRUNCATE | FS.IOCTL_DEV },
  { path: '/dev/zero', access: FS.READ_FILE | FS.WRITE_FILE | FS.TRUNCATE | FS.IOCTL_DEV },
  { path: '/dev/full', access: FS.READ_FILE | FS.WRITE_FILE | FS.TRUNCATE | FS.IOCTL_DEV },
  { path: '/dev/random', access: FS.READ_FILE | FS.IOCTL_DEV },
  { path: '/dev/urandom', access: FS.READ_FILE | FS.IOCTL_DEV },
];

/**
 * The rules that grant `access` on each of `roots` except the `hidden` paths: a root that holds
 * no hidden path is one rule; one that holds some is replaced by rules on its entries, descending
 * toward the hidden paths, which get none. A hidden path's parents are thus not readable as
 * directories (their other entries are). Landlock only ever grants, so this is how a file inside
 * a readable tree is kept out. Entries are read now: one made later below a replaced root is
 * not readable (closed, never open). Roots that do not exist are left out; paths are canonical.
 */
export async function grantExcept(roots: readonly string[], access: number, hidden: readonly string[]): Promise<PathRule[]> {
  const rules: PathRule[] = [];
  const canonicalHidden = (await Promise.all(hidden.map(canonical))).filter((p): p is string => p !== undefined);
  const visit = async (dir: string): Promise<void> => {
    const kind = await kindOf(dir);
    if (kind === undefined || canonicalHidden.includes(dir)) return;
    if (!canonicalHidden.some((h) => isWithin(h, dir))) {
      rules.push({ path: dir, access: kind === 'dir' ? access : access & FS_FILE });
      return;
    }
    let entries: string[];
    try {
      entries = await readdir(dir);
    } catch {
      return;
    }
    for (const entry of entries.sort()) await visit(path.join(dir, entry));
  };
  const real = [...new Set((await Promise.all(roots.map(canonical))).filter((p): p is string => p !== undefined))];
  // A root below another root is already covered (and visiting it again would grant it twice).
  for (const root of real) if (!real.some((other) => other !== root && isWithin(root, other))) await visit(root);
  return rules;
}

/** The fields `reaper.pl` reads to confine a command: the ruleset, its rules, then the seccomp filter. */
export function confineFields(rules: readonly PathRule[], seccomp: Buffer, network: boolean): string[] {
  return [
    `landlock ${LANDLOCK_MIN_ABI} ${FS_ALL} ${network ? 0 : NET_TCP} ${SCOPE_ALL}`,
    ...rules.map((rule) => `path ${rule.access} ${rule.path}`),
    `seccomp ${seccomp.toString('hex')}`,
  ];
}

async function kindOf(p: string): Promise<'dir' | 'file' | undefined> {
  try {
    return (await stat(p)).isDirectory() ? 'dir' : 'file';
  } catch {
    return undefined;
  }
}

async function canonical(p: string): Promise<string | undefined> {
  try {
    return await realpath(p);
  } catch {
    return undefined;
  }
}

/** True when `p` is `dir` or below it (both canonical). */
function isWithin(p: string, dir: string): boolean {
  return p === dir || p.startsWith(dir === '/' ? '/' : `${dir}/`);
}
