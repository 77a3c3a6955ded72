import type { Socket } from 'node:net';
import { constants } from 'node:os';
import { CLOSE_SLACK_MS, forgetGroup, KILL_GRACE_MS, killProcessGroup, trackGroup, type RunOptions, type RunOutcome } from './process.js';

/**
 * The call reaper kills what is left of a command `killGraceMs` after SIGTERM; the server's own
 * SIGKILL of its group comes this much later, so that it never cuts the reaper's clean-up short.
 */
export const REAPER_SLACK_MS = 1_000;

const SIGNAL_NAMES = new Map(Object.entries(constants.signals).map(([name, number]) => [number, name as NodeJS.Signals]));

/**
 * One command run by the resident reaper, as the server sees it: its two output connections, the
 * call reaper's process group (killed on timeout or abort), and how it ended. `done` settles once
 * the command's status is known and both connections have closed (or, when the call reaper was
 * killed before it could clean up, a grace period later), or at once when it could not start.
 * Never rejects.
 */
export class ReapedCall {
  readonly done: Promise<RunOutcome>;
  readonly #outcome: RunOutcome = { exitCode: null, exitSignal: null, timedOut: false };
  readonly #options: RunOptions;
  // How long the server's SIGTERM of the group waits before SIGKILL.
  readonly #groupGraceMs: number;
  readonly #onFinish: () => void;
  readonly #timer: NodeJS.Timeout;
  readonly #sockets: Socket[] = [];
  #resolve: (outcome: RunOutcome) => void = () => {};
  #pid: number | undefined;
  #killing = false;
  #ended = false;
  #finished = false;
  #released = false;
  #closed = 0;
  #closeTimer: NodeJS.Timeout | undefined;

  constructor(options: RunOptions, onFinish: () => void) {
    this.#options = options;
    this.#groupGraceMs = (options.killGraceMs ?? KILL_GRACE_MS) + REAPER_SLACK_MS;
    this.#onFinish = onFinish;
    this.done = new Promise((resolve) => (this.#resolve = resolve));
    this.#timer = setTimeout(() => {
      this.#outcome.timedOut = true;
      this.#kill();
    }, options.timeoutMs);
    options.signal?.addEventListener('abort', this.#onAbort, { once: true });
  }

  /** One of the command's output connections, after its opening; `first` is what came with it. */
  attach(stream: 'stdout' | 'stderr', socket: Socket, first: Buffer): void {
    if (this.#finished) {
      socket.destroy();
      return;
    }
    this.#sockets.push(socket);
    const onData = stream === 'stdout' ? this.#options.onStdout : this.#options.onStderr;
    if (first.length > 0) onData(first);
    socket.on('data', onData);
    socket.on('close', () => {
      if (++this.#closed === 2 && this.#ended) this.#finish();
    });
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

  /** The call reaper's report: the command ended with this wait status, and nothing it started is left. */
  reported(status: number): void {
    if (this.#ended) return;
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
    this.#outcome.abortReason = this.#options.signal?.reason;
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
    this.#options.signal?.removeEventListener('abort', this.#onAbort);
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
