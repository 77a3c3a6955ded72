import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import type { FileHandle } from 'node:fs/promises';
import type net from 'node:net';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

/**
 * The lock helper's Perl source (see its header for its protocol). It sits beside this module:
 * in src/, in dist/ (the build copies it), and beside the bundles in dist/main/.
 */
const FLOCK_SCRIPT = fileURLToPath(new URL('./flock.pl', import.meta.url));

/** An exclusive flock(2) held for this server on a file or directory; `release` lets go of it. */
export interface Flock {
  /** True once the lock is gone without `release`: the helper that held it died. */
  readonly lost: boolean;
  release(): void;
}

/** What `tryFlock` found: held for us, or held by someone else. */
export type FlockAttempt = Flock | 'busy';

/** The helper could not take the lock: it cannot run here, or the open or flock failed. */
export class FlockUnavailable extends Error {
  override readonly name = 'FlockUnavailable';
}

interface Pending {
  resolve(attempt: FlockAttempt): void;
  reject(err: Error): void;
}

interface HeldFlock extends Flock {
  lost: boolean;
}

/**
 * The resident lock helper (`flock.pl`): one Perl process per server, started on first use
 * and again after it died, that takes flocks for the server on its descriptors. A lock dies with
 * the helper, and the helper with the server, so no lock outlives its holder; nothing in the
 * workspace records it, so nothing planted there can pass for one.
 */
class FlockHelper {
  readonly #child: ChildProcessWithoutNullStreams;
  readonly #pending = new Map<number, Pending>();
  readonly #held = new Map<number, HeldFlock>();
  #next = 1;
  #dead: Error | undefined;

  constructor(perl: string) {
    this.#child = spawn(perl, [FLOCK_SCRIPT, String(process.pid)], { stdio: ['pipe', 'pipe', 'pipe'] });
    const child = this.#child;
    let stderr = '';
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk: string) => (stderr = (stderr + chunk).slice(-500)));
    child.stdin.on('error', () => {});
    createInterface({ input: child.stdout }).on('line', (line) => this.#answer(line));
    const gone = (err?: Error): void =>
      this.#die(err ?? new FlockUnavailable(`the lock helper (${perl}) exited${stderr.trim() === '' ? '' : `: ${stderr.trim()}`}`));
    child.once('error', (err) => gone(new FlockUnavailable(`the lock helper (${perl}) cannot run: ${err.message}`)));
    child.once('exit', () => gone());
    // An idle helper does not keep the process alive; a request waiting for its answer does.
    child.unref();
    this.#idle();
  }

  get dead(): boolean {
    return this.#dead !== undefined;
  }

  /** Asks for an exclusive flock on what the server's descriptor `fd` holds, without waiting. */
  tryLock(fd: number): Promise<FlockAttempt> {
    if (this.#dead) return Promise.reject(this.#dead);
    const id = this.#next++;
    return new Promise<FlockAttempt>((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      if (this.#pending.size === 1) for (const stream of this.#streams()) stream.ref();
      this.#child.stdin.write(`L ${id} ${fd}\n`);
    });
  }

  #answer(line: string): void {
    const [idText, status, ...why] = line.split(' ');
    const id = Number(idText);
    const pending = this.#pending.get(id);
    if (pending === undefined) return;
    this.#pending.delete(id);
    if (this.#pending.size === 0) this.#idle();
    if (status === 'B') return pending.resolve('busy');
    if (status !== 'K') return pending.reject(new FlockUnavailable(`flock failed: ${why.join(' ') || line}`));
    const held: HeldFlock = {
      lost: false,
      release: () => {
        if (!this.#held.delete(id)) return;
        if (!this.#dead) this.#child.stdin.write(`U ${id}\n`);
      },
    };
    this.#held.set(id, held);
    pending.resolve(held);
  }

  #die(err: Error): void {
    if (this.#dead) return;
    this.#dead = err;
    for (const held of this.#held.values()) held.lost = true;
    this.#held.clear();
    for (const pending of this.#pending.values()) pending.reject(err);
    this.#pending.clear();
    this.#idle();
  }

  #idle(): void {
    for (const stream of this.#streams()) stream.unref();
  }

  #streams(): net.Socket[] {
    return [this.#child.stdin, this.#child.stdout, this.#child.stderr] as unknown as net.Socket[];
  }

  /** Ends the helper: every lock it holds goes. For tests. */
  kill(): void {
    this.#child.kill('SIGKILL');
  }
}

let helper: FlockHelper | undefined;
let perlCommand = 'perl';

/**
 * Takes an exclusive flock on what the descriptor `fd` of this process holds (a regular file or a
 * directory), or says `busy` when another holder (another server, a command) has one. Rejects
 * with `FlockUnavailable` when the helper cannot run here (no perl) or the flock failed.
 */
export async function tryFlock(fd: number): Promise<FlockAttempt> {
  if (helper === undefined || helper.dead) helper = new FlockHelper(perlCommand);
  return helper.tryLock(fd);
}

/** Resolves to undefined when locks can be taken on the held directory `dir`, or to why not (start-up says so once). */
export async function flockUnavailableReason(dir: FileHandle): Promise<string | undefined> {
  try {
    const attempt = await tryFlock(dir.fd);
    if (attempt !== 'busy') attempt.release();
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}

/** For tests: run the helper with another perl (a missing one, say), or kill the running one. */
export const flockTesting = {
  usePerl(command: string): void {
    perlCommand = command;
    helper?.kill();
    helper = undefined;
  },
  killHelper(): void {
    helper?.kill();
  },
};
