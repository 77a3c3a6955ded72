import type { Logger } from 'pino';
import { CallAbort } from '../core/call-abort.js';
import type { Cancellation } from '../infra/redis.js';
import type { RequestId } from '../core/json-rpc.js';

export type { Cancellation };

/** What cancels one call registered by id: the signal the call gets, and the abort. */
export interface CancellableCall {
  readonly signal: CallAbort;
  abort(reason?: unknown): void;
}

/** What `cancel` did: aborted the one call with the id, found none, or found several and aborted none. */
export type CancelOutcome = 'cancelled' | 'none' | 'several';

export interface InFlightCallsOptions {
  /** Says, at debug level, when a cancellation names several calls and so cancels none. */
  log?: Pick<Logger, 'debug'>;
  /** Hears a client's cancellation that matched no call here (a call of the same caller on another replica). */
  forward?: (cancellation: Cancellation) => void;
}

/**
 * The calls `notifications/cancelled` can reach, by caller and JSON-RPC id: one set per stdio
 * process, or one per server for Streamable HTTP, whose notifications come in POSTs of their own.
 * Request ids are only unique per client, so a call is found by who sent it (the set's `of`) and
 * its id, and ids may repeat: two clients with one key both start at id 0. A cancellation aborts
 * a call only when exactly one call of that caller has the id; with several it aborts none (which
 * one was meant cannot be told) and says so at debug level. Each registration is a Map entry and
 * a `CallAbort`: no AbortController unless the tool asks for a signal.
 */
export class InFlightCalls {
  readonly #calls: Map<string, CallHandle | CallHandle[]>;
  readonly #caller: string;
  readonly #options: InFlightCallsOptions;

  constructor(options: InFlightCallsOptions = {}, calls = new Map<string, CallHandle | CallHandle[]>(), caller = '') {
    this.#options = options;
    this.#calls = calls;
    this.#caller = caller;
  }

  /** The calls of one caller (its `admissionName`), in the same set: what its cancellations can reach. */
  of(caller: string): InFlightCalls {
    return new InFlightCalls(this.#options, this.#calls, caller);
  }

  /** Calls registered now, of every caller. */
  get size(): number {
    let size = 0;
    for (const entry of this.#calls.values()) size += Array.isArray(entry) ? entry.length : 1;
    return size;
  }

  /** Registers a call of this caller and returns what cancels it (its signal is the call's). */
  add(id: RequestId): CancellableCall {
    const key = this.#keyOf(id);
    const handle = new CallHandle();
    const entry = this.#calls.get(key);
    if (entry === undefined) this.#calls.set(key, handle);
    else if (Array.isArray(entry)) entry.push(handle);
    else this.#calls.set(key, [entry, handle]);
    return handle;
  }

  /** Forgets a call once it answered. */
  delete(id: RequestId, call: CancellableCall): void {
    const key = this.#keyOf(id);
    const entry = this.#calls.get(key);
    if (entry === call) this.#calls.delete(key);
    else if (Array.isArray(entry)) {
      const rest = entry.filter((handle) => handle !== call);
      if (rest.length === 0) this.#calls.delete(key);
      else this.#calls.set(key, rest.length === 1 ? rest[0]! : rest);
    }
  }

  /**
   * A client's cancellation: aborts this caller's call with this id when it is the only one, as the
   * spec asks ignoring unknown and finished ids. One that matched nothing here goes to `forward`.
   */
  cancel(id: unknown, reason: string): CancelOutcome {
    if (typeof id !== 'string' && typeof id !== 'number') return 'none';
    const outcome = this.cancelHere(id, reason);
    if (outcome === 'none') this.#options.forward?.({ caller: this.#caller, requestId: id, reason });
    return outcome;
  }

  /** A cancellation forwarded by another replica: as `cancel`, for the calls here only. */
  cancelHere(id: RequestId, reason: string): CancelOutcome {
    const entry = this.#calls.get(this.#keyOf(id));
    if (entry === undefined) return 'none';
    if (Array.isArray(entry)) {
      this.#options.log?.debug({ caller: this.#caller, requestId: id, calls: entry.length }, 'a cancellation names several calls in flight; none is cancelled');
      return 'several';
    }
    entry.abort(new CancelledByClient(reason));
    return 'cancelled';
  }

  /** Aborts every call (the channel closed, or the server is shutting down). */
  abortAll(reason: unknown): void {
    for (const entry of this.#calls.values()) for (const handle of Array.isArray(entry) ? entry : [entry]) handle.abort(reason);
  }

  // The number 1 and the string "1" are different ids; the caller's name never holds a NUL.
  #keyOf(id: RequestId): string {
    return `${this.#caller}\0${typeof id === 'number' ? 'n' : 's'}:${id}`;
  }
}

class CallHandle implements CancellableCall {
  readonly signal = new CallAbort();

  abort(reason?: unknown): void {
    this.signal.abort(reason);
  }
}

/** The abort reason of a call the client cancelled: its message is what the model would read. */
export class CancelledByClient extends Error {
  override readonly name = 'CancelledByClient';
}
