import { isRecord } from '../core/json.js';
import type { Writable } from 'node:stream';
import { SUBSCRIPTION_ID_KEY } from './era.js';
import { type JsonRpcNotification, type JsonRpcResponse } from '../core/json-rpc.js';
import { encode } from './jsonrpc.js';

export interface BoundedOutputOptions {
  /** Wraps one encoded message for the wire: a line for stdio, an SSE event for HTTP. */
  frame: (text: string) => string;
  /** The output took what it held and takes writes again. */
  onDrain?: () => void;
}

/**
 * Writes MCP messages to a stream without queueing progress for a reader that does not keep up.
 * While the stream takes writes (`write` returns true), everything is written at once. Once it
 * refuses one, it is blocked until 'drain': a progress notification then waits in place of the
 * one before it for the same token (progress is a state, and the latest report holds all of it),
 * and a list change in place of the one before it on its subscription, so what waits is one
 * notification per call and per subscription, never a queue. Responses are always written: they
 * are the answers, one per request, and the progress that waits goes out before them. Waiting
 * notifications go out at 'drain'. A reader that takes nothing at all is the transport's to drop
 * (HTTP: the connection's idle timeout, which no write re-arms while the stream is blocked).
 */
export class BoundedOutput {
  readonly #output: Writable;
  readonly #frame: (text: string) => string;
  readonly #onDrain: (() => void) | undefined;
  readonly #waiting = new Map<string, JsonRpcNotification>();
  #blocked = false;
  #closed = false;

  constructor(output: Writable, options: BoundedOutputOptions) {
    this.#output = output;
    this.#frame = options.frame;
    this.#onDrain = options.onDrain;
  }

  /** True from a refused write until the stream drains. */
  get blocked(): boolean {
    return this.#blocked;
  }

  /** Notifications waiting for the stream to drain (at most one per progress token, and per method and subscription). */
  get waiting(): number {
    return this.#waiting.size;
  }

  /**
   * A notification a later one of its kind says all of (progress, by token; a list change, by
   * subscription): written now, or, while the stream is blocked, kept in place of the one before it.
   */
  readonly progress = (notification: JsonRpcNotification): void => {
    if (this.#closed) return;
    if (this.#blocked) {
      const key = keyOf(notification);
      this.#waiting.delete(key);
      this.#waiting.set(key, notification);
      return;
    }
    this.#write(this.#frame(encode(notification)));
  };

  /** A response (or a batch of them): written whatever the backpressure, after the progress that waits. */
  send(message: JsonRpcResponse | JsonRpcResponse[]): void {
    if (this.#closed) return;
    this.#flushWaiting(true);
    this.#write(this.#frame(Array.isArray(message) ? `[${message.map(encode).join(',')}]` : encode(message)));
  }

  /** Text that matters only while the stream keeps up (a keep-alive comment): skipped while it is blocked. */
  optional(text: string): void {
    if (!this.#closed && !this.#blocked) this.#write(text);
  }

  /** Stops: nothing more is written, and what waits is forgotten. */
  close(): void {
    this.#closed = true;
    this.#waiting.clear();
    this.#output.off('drain', this.#drained);
  }

  #write(text: string): void {
    const output = this.#output;
    if (output.destroyed || output.writableEnded) return;
    let taken: boolean;
    try {
      taken = output.write(text);
    } catch {
      // The reader closed its end; the stream's 'error' or 'close' tells its owner.
      return;
    }
    if (!taken && !this.#blocked) {
      this.#blocked = true;
      output.once('drain', this.#drained);
    }
  }

  /** Writes what waits, in the order it came; unless `all`, stops as soon as the stream blocks again. */
  #flushWaiting(all: boolean): void {
    for (const [key, notification] of this.#waiting) {
      if (this.#blocked && !all) return;
      this.#waiting.delete(key);
      this.#write(this.#frame(encode(notification)));
    }
  }

  readonly #drained = (): void => {
    this.#blocked = false;
    if (this.#closed) return;
    this.#flushWaiting(false);
    if (!this.#blocked) this.#onDrain?.();
  };
}

/**
 * What a waiting notification is replaced by: the next progress of its token, or the next
 * notification of its method on its subscription (a list change says all a later one would). The
 * number 1 and the string "1" are different tokens, and different subscription ids.
 */
function keyOf(notification: JsonRpcNotification): string {
  const params = notification.params;
  if (notification.method === 'notifications/progress') return `p:${idKey(isRecord(params) ? params['progressToken'] : undefined)}`;
  const meta = isRecord(params) ? params['_meta'] : undefined;
  return `m:${notification.method}\0${idKey(isRecord(meta) ? meta[SUBSCRIPTION_ID_KEY] : undefined)}`;
}

function idKey(id: unknown): string {
  return typeof id === 'number' ? `n:${id}` : `s:${String(id)}`;
}
