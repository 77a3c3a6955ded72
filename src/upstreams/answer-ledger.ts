import { randomUUID } from 'node:crypto';
import type { JSONRPCMessage, RequestId } from '@modelcontextprotocol/client';
import { RpcCodes } from '../core/json-rpc.js';
import { bytesText, LIST_BUDGET_BYTES, SMALL_MESSAGE_BYTES } from './message-bounds.js';

/** What reading one upstream's messages cost toolport, over all its connections: for tests and measurements. */
export interface ReadCounters {
  /** Bytes handed to JSON.parse. */
  parsedBytes: number;
  /** Most bytes of messages not parsed yet held at once. */
  peakHeldBytes: number;
  /** Answers to requests no longer awaited (aborted, timed out), dropped unparsed. */
  lateAnswers: number;
  /** Answers refused, unparsed, for passing the allowance of their request. */
  refusedAnswers: number;
}

export function readCounters(): ReadCounters {
  return { parsedBytes: 0, peakHeldBytes: 0, lateAnswers: 0, refusedAnswers: 0 };
}

/** What an answer to an id is: awaited (and what it may take), late (sent, no longer awaited), or to a request toolport never sent. */
export type AnswerVerdict = { kind: 'awaited'; method: string; maxBytes: number } | { kind: 'late' } | { kind: 'unsent' };

/** What to do with a message read whole: hand it on, drop it, or give the upstream up (it broke the protocol). */
export type Admission = { deliver: JSONRPCMessage } | { drop: true } | { breach: string };

/** An answer refused for its size, as the request that awaited it learns. */
export interface Refusal {
  method: string;
  maxBytes: number;
}

/** The JSON-RPC error code of a refusal (the implementation-defined range); `Refusal`s are told apart by a stamp, not by it. */
const REFUSAL_CODE = RpcCodes.SERVER_ERROR;
/** Why an upstream that answers an id toolport never sent is given up. */
export const UNSENT_ANSWER = 'sent an answer to a request toolport never sent';

interface Awaited {
  method: string;
  maxBytes: number;
  sentAt: number;
}

/**
 * The requests toolport sent one connection and what an answer to each may take, learned from
 * every message sent: a call `maxResultBytes`, a page of a tool listing what the earlier pages of
 * the same listing left of {@link LIST_BUDGET_BYTES}, anything else {@link SMALL_MESSAGE_BYTES}.
 * A cancellation makes its request late: its answer is dropped unparsed. toolport's ids run 0, 1,
 * 2, ... on a connection, so which ids were ever sent is known without keeping them all.
 */
export class AnswerLedger {
  readonly counters: ReadCounters;
  /** Hears the id of each late answer dropped (a call aborted before it was answered frees its slot then). */
  onLate?: (id: RequestId) => void;
  readonly #maxResultBytes: number;
  readonly #awaited = new Map<RequestId, Awaited>();
  #first: number | undefined;
  #last: number | undefined;
  // Ids sent out of that run (none from the SDK), kept whole.
  readonly #otherIds = new Set<RequestId>();
  #listed = 0;
  // Marks the refusals this ledger made: an upstream cannot forge one, since it never sees it.
  readonly #stamp = randomUUID();

  constructor(maxResultBytes: number, counters: ReadCounters = readCounters()) {
    this.#maxResultBytes = maxResultBytes;
    this.counters = counters;
  }

  /** Notes a message toolport sends: a request is awaited from now on, a cancellation makes its request late. */
  sent(message: JSONRPCMessage): void {
    if (!('method' in message)) return;
    if ('id' in message && message.id !== undefined) {
      this.#noteId(message.id);
      const maxBytes =
        message.method === 'tools/call' ? this.#maxResultBytes : message.method === 'tools/list' ? this.#listAllowance(message.params) : SMALL_MESSAGE_BYTES;
      this.#awaited.set(message.id, { method: message.method, maxBytes, sentAt: performance.now() });
    } else if (message.method === 'notifications/cancelled') {
      const id = message.params?.['requestId'];
      if (typeof id === 'string' || typeof id === 'number') this.#awaited.delete(id);
    }
  }

  verdict(id: unknown): AnswerVerdict {
    if (typeof id !== 'string' && typeof id !== 'number') return { kind: 'unsent' };
    const awaited = this.#awaited.get(id);
    if (awaited !== undefined) return { kind: 'awaited', method: awaited.method, maxBytes: awaited.maxBytes };
    return this.#wasSent(id) ? { kind: 'late' } : { kind: 'unsent' };
  }

  /** When request `id` was sent (performance.now()), while it is awaited. */
  sentAt(id: RequestId): number | undefined {
    return this.#awaited.get(id)?.sentAt;
  }

  /** The most any message may take now: the largest allowance of an awaited request, or a small message's. */
  largest(): number {
    let largest = SMALL_MESSAGE_BYTES;
    for (const { maxBytes } of this.#awaited.values()) if (maxBytes > largest) largest = maxBytes;
    return largest;
  }

  /** A message of `bytes`, read whole, as {@link Admission}; an awaited answer past its allowance is refused (see `refuse`). */
  admit(message: JSONRPCMessage, bytes: number): Admission {
    // Requests and notifications, and an error without an id (to a message the upstream could not read).
    if ('method' in message || !('id' in message) || message.id === undefined) return { deliver: message };
    const verdict = this.verdict(message.id);
    if (verdict.kind === 'unsent') return { breach: UNSENT_ANSWER };
    if (verdict.kind === 'late') {
      this.late(message.id);
      return { drop: true };
    }
    if (bytes > verdict.maxBytes) return { deliver: this.refuse(message.id) };
    const awaited = this.#awaited.get(message.id)!;
    this.#awaited.delete(message.id);
    if (awaited.method === 'tools/list') this.#listed += bytes;
    return { deliver: message };
  }

  /** Counts a late answer, dropped unparsed, and says so to `onLate`. */
  late(id: RequestId): void {
    this.counters.lateAnswers++;
    this.onLate?.(id);
  }

  /** The answer the request `id` gets instead of one past its allowance: an error only this ledger's `refusal` recognises. It is no longer awaited. */
  refuse(id: RequestId): JSONRPCMessage {
    const awaited = this.#awaited.get(id);
    this.#awaited.delete(id);
    this.counters.refusedAnswers++;
    const method = awaited?.method ?? 'unknown';
    const maxBytes = awaited?.maxBytes ?? 0;
    return {
      jsonrpc: '2.0',
      id,
      error: {
        code: REFUSAL_CODE,
        message: `the answer to ${method} was larger than ${bytesText(maxBytes)}`,
        data: { toolport: this.#stamp, method, maxBytes },
      },
    };
  }

  /** The refusal `err` reports, when it is one this ledger made (the SDK's ProtocolError of the error `refuse` gave). */
  refusal(err: unknown): Refusal | undefined {
    const data = err instanceof Error ? (err as Error & { data?: unknown }).data : undefined;
    if (typeof data !== 'object' || data === null || (data as Record<string, unknown>)['toolport'] !== this.#stamp) return undefined;
    const { method, maxBytes } = data as Refusal;
    return { method, maxBytes };
  }

  /** Request `id` can no longer be answered (its HTTP exchange ended): a later answer is late. */
  forget(id: RequestId): void {
    this.#awaited.delete(id);
  }

  /** Counts `bytes` handed to JSON.parse. */
  parsed(bytes: number): void {
    this.counters.parsedBytes += bytes;
  }

  /** Notes that `bytes` are held unparsed now. */
  holding(bytes: number): void {
    if (bytes > this.counters.peakHeldBytes) this.counters.peakHeldBytes = bytes;
  }

  #listAllowance(params: Record<string, unknown> | undefined): number {
    // A listing starts without a cursor; its later pages share what is left.
    if (params?.['cursor'] === undefined) this.#listed = 0;
    return Math.max(0, LIST_BUDGET_BYTES - this.#listed);
  }

  #noteId(id: RequestId): void {
    if (typeof id === 'number' && Number.isInteger(id) && (this.#last === undefined || id === this.#last + 1)) {
      this.#first ??= id;
      this.#last = id;
    } else this.#otherIds.add(id);
  }

  #wasSent(id: RequestId): boolean {
    if (typeof id === 'number' && this.#first !== undefined && this.#last !== undefined && Number.isInteger(id) && id >= this.#first && id <= this.#last)
      return true;
    return this.#otherIds.has(id);
  }
}
