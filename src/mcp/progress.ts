import type { ProgressNotification } from '@modelcontextprotocol/server';
import type { Progress } from '../core/types.js';
import type { JsonRpcNotification } from '../core/json-rpc.js';

/** Default shortest gap between two progress notifications of one call: at most 50 a second. */
export const DEFAULT_PROGRESS_INTERVAL_MS = 20;

/** A progress message is a status line, not the output: longer ones are cut. */
const MAX_MESSAGE_CHARS = 1024;

/**
 * Turns a call's progress reports into `notifications/progress` for one progress token (or, for
 * REST, into events): the rate is bounded (a report inside the interval waits, and a newer one
 * replaces it, so the latest is never lost), a long message is cut, and nothing is sent once the
 * call is over. `finish` sends what still waits, before the response. That progress only grows,
 * as the spec requires, is the gateway's rule (`progressReporter`): every report here is a
 * `Progress` it made.
 */
export class ProgressReporter {
  readonly #token: string | number;
  readonly #send: (notification: JsonRpcNotification) => void;
  readonly #intervalMs: number;
  readonly #signal: { readonly aborted: boolean } | undefined;
  #lastSentAt = -Infinity;
  #pending: Progress | undefined;
  #timer: NodeJS.Timeout | undefined;
  #done = false;

  /** Once `signal` aborts, nothing more is sent: the call is being cancelled. */
  constructor(
    token: string | number,
    send: (notification: JsonRpcNotification) => void,
    intervalMs = DEFAULT_PROGRESS_INTERVAL_MS,
    signal?: { readonly aborted: boolean },
  ) {
    this.#token = token;
    this.#send = send;
    this.#intervalMs = intervalMs;
    this.#signal = signal;
  }

  /** The callback handed to the tool call. */
  readonly report = (update: Progress): void => {
    if (this.#done) return;
    if (this.#signal?.aborted) return this.drop();
    const wait = this.#lastSentAt + this.#intervalMs - performance.now();
    if (wait <= 0 && this.#pending === undefined) {
      this.#emit(update);
      return;
    }
    this.#pending = update;
    this.#timer ??= setTimeout(this.#flush, Math.max(0, wait));
  };

  /** Sends the report still waiting, then stops: later reports are dropped. */
  finish(): void {
    if (this.#done) return;
    this.#flush();
    this.#done = true;
  }

  /** Stops without sending what waits (the call was cancelled: nothing more may be sent for it). */
  drop(): void {
    this.#done = true;
    this.#pending = undefined;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  readonly #flush = (): void => {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    const pending = this.#pending;
    this.#pending = undefined;
    if (pending && !this.#done && !this.#signal?.aborted) this.#emit(pending);
  };

  #emit(update: Progress): void {
    this.#lastSentAt = performance.now();
    const params: ProgressNotification['params'] = { progressToken: this.#token, progress: update.progress };
    if (update.total !== undefined) params.total = update.total;
    if (typeof update.message === 'string') {
      params.message = update.message.length > MAX_MESSAGE_CHARS ? update.message.slice(0, MAX_MESSAGE_CHARS) : update.message;
    }
    try {
      this.#send({ jsonrpc: '2.0', method: 'notifications/progress', params });
    } catch {
      // A transport that cannot send any more (the client went away) must not fail the call.
    }
  }
}
