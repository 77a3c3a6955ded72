import type { CallCgroup } from './call-cgroup.js';
import type { CgroupEvents } from './limit-notes.js';
import { KILL_GRACE_MS, type RunOutcome } from '../proc/process.js';
import { ReapedCall, type BeginOptions } from './reaped-call.js';
import type { ResidentReaper } from '../proc/reaper.js';
import type { Spare } from './spare-pool.js';

// bash's `read` takes a socket a byte at a time; past this many bytes `cat` reads the command (one fork).
const READ_BYTES = 8_192;

/**
 * What a waiting shell runs: a bash that reads, from the server's connection on fd 3, the shell
 * commands that set the call's limits, the command's length and the command, then sets the limits
 * and becomes `bash -c command`, so the command starts as it always did: a fresh shell whose $0 is
 * `bash`, stdin from /dev/null. Not on stdin: a bash whose stdin is a socket takes itself for one
 * started by sshd and reads ~/.bashrc. Only the server writes that connection; an empty one (the
 * server discarding the shell) ends it.
 */
const READ_COMMAND = [
  `IFS= read -r -u 3 -d '' prelude && IFS= read -r -u 3 -d '' size || exit 125`,
  `if ((size > ${READ_BYTES})); then command=$(cat <&3; printf .); command=\${command%.}; else IFS= read -r -u 3 -d '' command; fi`,
  'exec 3<&-',
  'eval "$prelude"',
];
const WAIT_SCRIPT = [...READ_COMMAND, 'exec bash -c "$command"'].join('\n');

/**
 * The same, for where other calls can read a process's command line (/proc/PID/cmdline, which
 * no PID namespace hides under Landlock): the command reaches the new bash in its environment,
 * which only its own call may read, leaves it before anything runs, and is run by `eval`, so no
 * process's arguments hold it.
 */
const HIDDEN_WAIT_SCRIPT = [...READ_COMMAND, `export TOOLPORT_COMMAND="$command"`, `exec bash -c 'export -n TOOLPORT_COMMAND; eval "$TOOLPORT_COMMAND"'`].join(
  '\n',
);

/** What a waiting shell needs to start. */
export interface ShellStart {
  reaper: ResidentReaper;
  /** The program the shell runs inside and its arguments up to `--` (bubblewrap), or none. */
  wrapper: readonly string[];
  cwd: string;
  env: Record<string, string>;
  /** Joined by the call reaper, outside any sandbox (where /sys is writable), before the wrapper starts. */
  cgroup?: CallCgroup;
  /** How the reaper confines and watches the shell (see `PrepareOptions.confine`). */
  confine?: readonly string[];
  /** Keep the command out of every process's arguments (see `HIDDEN_WAIT_SCRIPT`). */
  hideCommand?: boolean;
  /** Released with the shell: the call's private directory, removed once its processes are gone. */
  scratch?: { remove(): Promise<void> };
}

/** How one command ended, with what its cgroup counted. */
export type ShellOutcome = RunOutcome & { cgroup?: CgroupEvents };

/**
 * A shell started ahead of its call under the resident reaper, waiting for the one command it
 * will run: the call reaper, the cgroup and (in the sandbox) bubblewrap's namespaces and mounts
 * are set up while no one waits, by forking a small Perl where a spawn from the server would hold
 * its event loop for milliseconds, and the call only hands over its command. Each runs one
 * command and is gone; nothing of it is reused. Its call reaper is in a process group of its own
 * like any command's, kills whatever the command leaves, and ends with the server.
 */
export class WaitingShell implements Spare {
  readonly #call: ReapedCall;
  readonly #cgroup: CallCgroup | undefined;
  readonly #scratch: ShellStart['scratch'];
  #begun = false;
  #released = false;

  private constructor(call: ReapedCall, options: ShellStart, onEnd: () => void) {
    this.#call = call;
    this.#cgroup = options.cgroup;
    this.#scratch = options.scratch;
    void call.done.then(() => {
      if (this.#begun) return;
      this.#release();
      onEnd();
    });
  }

  /** Asks the reaper for one; throws when it cannot even be asked (the reaper closed). */
  static start(options: ShellStart, onEnd: () => void): WaitingShell {
    const { cgroup } = options;
    const [file, ...args] = [...options.wrapper, 'bash', '-c', options.hideCommand === true ? HIDDEN_WAIT_SCRIPT : WAIT_SCRIPT];
    const call = options.reaper.prepare(file!, args, {
      cwd: options.cwd,
      env: options.env,
      killGraceMs: KILL_GRACE_MS,
      joins: cgroup?.procsFiles(),
      confine: options.confine,
    });
    if (!(call instanceof ReapedCall)) {
      void cgroup?.release();
      void options.scratch?.remove();
      throw call;
    }
    return new WaitingShell(call, options, onEnd);
  }

  get alive(): boolean {
    return !this.#begun && this.#call.alive;
  }

  /**
   * Runs `command` after `prelude` (shell commands that set its limits), as the reaper runs any
   * command: output to the callbacks, the group killed on timeout or abort. Never rejects.
   */
  async run(prelude: string, command: string, options: BeginOptions): Promise<ShellOutcome> {
    if (options.signal?.aborted) {
      this.discard();
      return { exitCode: null, exitSignal: null, timedOut: false, abortReason: options.signal.reason };
    }
    this.#begun = true;
    try {
      const outcome = await this.#call.begin(options, `${prelude}\0${Buffer.byteLength(command)}\0${command}`);
      return this.#cgroup ? { ...outcome, cgroup: await this.#cgroup.events() } : outcome;
    } finally {
      this.#release();
    }
  }

  discard(): void {
    if (!this.#begun) this.#call.discard();
  }

  /** Hands the cgroup back and removes the private directory (once), when its last process has gone. */
  #release(): void {
    if (this.#released) return;
    this.#released = true;
    void this.#cgroup?.release();
    void this.#scratch?.remove();
  }
}
