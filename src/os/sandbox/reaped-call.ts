import type { Socket } from 'node:net';
import { constants } from 'node:os';
import {
  CLOSE_SLACK_MS,
  forgetGroup,
  KILL_GRACE_MS,
  killProcessGroup,
  trackGroup,
  type RunOptions,
  type RunOutcome,
  type WatchedBound,
} from '../proc/process.js';

/**
 * The call reaper kills what is left of a command `killGraceMs` after SIGTERM; the server's own
 * SIGKILL of its group comes this much later, so that it never cuts the reaper's clean-up short.
 */
export const REAPER_SLACK_MS = 1_000;

// What a command started ahead may write before its call begins; past it, it waits to write.
const MAX_HELD_BYTES = 64 * 1024;

const SIGNAL_NAMES = new Map(Object.entries(constants.signals).map(([name, number]) => [number, name as NodeJS.Signals]));

/** How a call that was started ahead of its use is then run (see `ReapedCall.begin`). */
export type BeginOptions = Pick<RunOptions, 'timeoutMs' | 'signal' | 'onStdout' | 'onStderr'>;

/**
 * One command run by the resident reaper, as the server sees it: its output connections (and
 * input, when it takes one), the call reaper's process group (killed on timeout or abort), and
 * how it ended. `done` settles once the command's status is known and both output connections
 * have closed (or, when the call reaper was killed before it could clean up, a grace period
 * later), or at once when it could not start. Never rejects.
 *
 * A call can be started ahead of its use: made without `RunOptions`, its command waits for its
 * input while no timer runs and its output waits in the connections, until `begin`.
 */
export class ReapedCall {
  readonly done: Promise<RunOutcome>;
  readonly #outcome: RunOutcome = { exitCode: null, exitSignal: null, timedOut: false };
  #options: BeginOptions | undefined;
  // How long the server's SIGTERM of the group waits before SIGKILL.
  readonly #groupGraceMs: number;
  readonly #onFinish: () => void;
  #timer: NodeJS.Timeout | undefined;
  readonly #sockets: Socket[] = [];
  // Output that came before `begin`, by connection, in order.
  readonly #held: Array<{ stream: 'stdout' | 'stderr'; socket: Socket; chunks: Buffer[]; hold: (chunk: Buffer) => void }> = [];
  #input: Socket | undefined;
  #pendingInput: string | undefined;
  #resolve: (outcome: RunOutcome) => void = () => {};
  #pid: number | undefined;
  #killing = false;
  #ended = false;
  #finished = false;
  #released = false;
  #closed = 0;
  #closeTimer: NodeJS.Timeout | undefined;

  /** `options` begins the call at once; without them it waits for `begin`. */
  constructor(killGraceMs: number | undefined, onFinish: () => void, options?: BeginOptions) {
    this.#groupGraceMs = (killGraceMs ?? KILL_GRACE_MS) + REAPER_SLACK_MS;
    this.#onFinish = onFinish;
    this.done = new Promise((resolve) => (this.#resolve = resolve));
    if (options !== undefined) void this.begin(options);
  }

  /** False once it has ended (or been discarded) before `begin`. */
  get alive(): boolean {
    return !this.#finished && !this.#ended;
  }

  /**
   * Runs the call from now on: its timeout starts, its abort signal counts, its output goes to the
   * callbacks (what came before first), and `input` goes to its input connection, which is then
   * closed. Resolves as `done` does.
   */
  begin(options: BeginOptions, input?: string): Promise<RunOutcome> {
    if (this.#options !== undefined) return this.done;
    this.#options = options;
    if (this.#finished) return this.done;
    this.#timer = setTimeout(() => {
      this.#outcome.timedOut = true;
      this.#kill();
    }, options.timeoutMs);
    if (options.signal?.aborted) this.#onAbort();
    else options.signal?.addEventListener('abort', this.#onAbort, { once: true });
    for (const socket of this.#sockets) socket.ref();
    for (const { stream, socket, chunks, hold } of this.#held.splice(0)) {
      socket.off('data', hold);
      this.#listen(stream, socket, Buffer.concat(chunks));
    }
    if (input !== undefined) {
      if (this.#input !== undefined) this.#input.end(input);
      else this.#pendingInput = input;
    }
    return this.done;
  }

  /** Ends a call that has not begun, and its command; nothing waits for it. */
  discard(): void {
    if (this.#options === undefined) this.#kill();
  }

  /** One of the command's connections, after its opening; `first` is what came with it. */
  attach(stream: 'stdout' | 'stderr' | 'stdin', socket: Socket, first: Buffer): void {
    if (this.#finished) {
      socket.destroy();
      return;
    }
    this.#sockets.push(socket);
    // A call that waits for its begin keeps no process alive; one that runs does, as a spawn does.
    if (this.#options === undefined) socket.unref();
    if (stream === 'stdin') {
      this.#input = socket;
      if (this.#pendingInput !== undefined) socket.end(this.#pendingInput);
      return;
    }
    socket.on('close', () => {
      if (++this.#closed === 2 && this.#ended) this.#finish();
    });
    if (this.#options !== undefined) return this.#listen(stream, socket, first);
    // Kept until the call begins (a waiting command writes nothing, or why it failed), and read on
    // meanwhile so that its end is seen: a command that ends before its call ends the call.
    const chunks = [first];
    let bytes = first.length;
    const hold = (chunk: Buffer): void => {
      chunks.push(chunk);
      bytes += chunk.length;
      if (bytes > MAX_HELD_BYTES) socket.pause();
    };
    socket.on('data', hold);
    this.#held.push({ stream, socket, chunks, hold });
  }

  #listen(stream: 'stdout' | 'stderr', socket: Socket, first: Buffer): void {
    const onData = stream === 'stdout' ? this.#options!.onStdout : this.#options!.onStderr;
    if (first.length > 0) onData(first);
    socket.on('data', onData);
    socket.resume();
  }

  /** The resident forked the call reaper: its pid is also its process group's. */
  started(pid: number): void {
    if (this.#finished) {
      // Given up on before the resident got to it: nothing waits for this one. Its token was kept
      // for this moment (see `#kill`), and goes now.
      killProcessGroup(pid, this.#groupGraceMs);
      this.#release();
      return;
    }
    this.#pid = pid;
    trackGroup(pid, 'SIGTERM');
  }

  /**
   * The call reaper's report: the command ended with this wait status, and nothing it started is
   * left; `bound`, when its watch stopped the call.
   */
  reported(status: number, bound?: WatchedBound): void {
    if (this.#ended) return;
    if (bound !== undefined) this.#outcome.overBound = bound;
    if (this.#pid !== undefined && !this.#killing) forgetGroup(this.#pid);
    this.#end(status);
  }

  /** The resident reaped the call reaper, which had not reported: it was killed, and its group may hold the rest. */
  reaped(status: number): void {
    if (this.#ended) return;
    this.#end(status);
    if (this.#pid !== undefined && !this.#killing) {
      this.#killing = true;
      killProcessGroup(this.#pid, this.#groupGraceMs);
    }
  }

  /** The command could not be started. */
  failed(error: NodeJS.ErrnoException): void {
    if (this.#ended) return this.#release();
    this.#ended = true;
    this.#outcome.spawnError = error;
    this.#finish();
  }

  /** The resident and every call reaper are gone, and this call had no report. */
  lost(why: string): void {
    // 9: as if killed by SIGKILL, the only way a call reaper ends without a word.
    if (this.#pid !== undefined) this.reaped(9);
    else this.failed(new Error(why));
    this.#release();
  }

  readonly #onAbort = (): void => {
    this.#outcome.abortReason = this.#options?.signal?.reason;
    this.#kill();
  };

  #kill(): void {
    if (this.#pid === undefined) {
      // The resident has not forked it yet: the call answers now, and its token stays known so
      // that the resident's `pid` report still finds it and `started` kills what it forked.
      this.#ended = true;
      this.#finish(false);
      return;
    }
    if (this.#killing) return;
    this.#killing = true;
    killProcessGroup(this.#pid, this.#groupGraceMs);
  }

  #end(status: number): void {
    this.#ended = true;
    clearTimeout(this.#timer);
    const signal = status & 0x7f;
    if (signal === 0) this.#outcome.exitCode = status >> 8;
    else this.#outcome.exitSignal = SIGNAL_NAMES.get(signal) ?? 'SIGKILL';
    if (this.#closed === 2) return this.#finish();
    // Normally both connections close as the call reaper exits; a grace period if they do not.
    this.#closeTimer = setTimeout(() => this.#finish(), this.#groupGraceMs + CLOSE_SLACK_MS);
  }

  /** Answers the call; `release` false keeps its token known until the resident reports what became of it. */
  #finish(release = true): void {
    if (this.#finished) return;
    this.#finished = true;
    clearTimeout(this.#timer);
    clearTimeout(this.#closeTimer);
    this.#options?.signal?.removeEventListener('abort', this.#onAbort);
    for (const socket of this.#sockets) socket.destroy();
    if (release) this.#release();
    this.#resolve(this.#outcome);
  }

  /** Forgets the call's token (once): nothing the resident says of it matters any more. */
  #release(): void {
    if (this.#released) return;
    this.#released = true;
    this.#onFinish();
  }
}
