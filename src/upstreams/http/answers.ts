import type { JSONRPCMessage, RequestId } from '@modelcontextprotocol/client';
import type { Dispatcher } from 'undici';
import { AnswerLedger, type ReadCounters } from '../answer-ledger.js';
import { ByteBudget } from '../byte-budget.js';
import { EventStreamParser } from './event-stream.js';
import { consume, discard, header, readBounded, type Body } from './body.js';
import { UpstreamContentError } from './errors.js';
import { asMessage, parseMessage } from '../json-rpc.js';
import { MAX_MESSAGE_BYTES, SMALL_MESSAGE_BYTES } from '../message-bounds.js';

export interface HttpAnswersEvents {
  /** A message to hand on (a refusal stands in for an answer past its allowance). */
  message(message: JSONRPCMessage): void;
  /** An event that is not JSON-RPC, skipped. */
  error(error: Error): void;
  /** The upstream broke the protocol (`why`, "sent an answer to a request toolport never sent"): gives it up; the error ends the read. */
  breach(why: string): Error;
}

class AnswerTooLargeError extends Error {
  override readonly name = 'AnswerTooLargeError';
}

/**
 * What an HTTP upstream sends, bounded before it is kept: a POST's body, or the events of its
 * stream, may take what the request it carries may take (the ledger's allowance: a call's
 * `maxResultBytes`, a listing's budget, a small message's bound), as the scanner allows a stdio
 * line; a JSON body past it is refused without being read (its `content-length`) or as soon as it
 * passes, and the request gets a refusal, not the whole upstream. What the bodies and streams of
 * one upstream hold unparsed at once is bounded by one {@link ByteBudget}. Each message read is
 * judged by the ledger as a stdio line is.
 */
export class HttpAnswers {
  readonly ledger: AnswerLedger;
  readonly #budget: ByteBudget;
  readonly #on: HttpAnswersEvents;

  constructor(maxResultBytes: number, counters: ReadCounters | undefined, on: HttpAnswersEvents) {
    this.ledger = new AnswerLedger(maxResultBytes, counters);
    this.#budget = new ByteBudget(MAX_MESSAGE_BYTES, (total) => this.ledger.holding(total));
    this.#on = on;
  }

  /** What an answer to `id` may take: its allowance while it is awaited, else a small message's bound. */
  allowance(id: RequestId): number {
    const verdict = this.ledger.verdict(id);
    return verdict.kind === 'awaited' ? verdict.maxBytes : SMALL_MESSAGE_BYTES;
  }

  /** The request `id`, while awaited, gets a refusal instead of its answer. */
  refuse(id: RequestId): void {
    if (this.ledger.verdict(id).kind === 'awaited') this.#on.message(this.ledger.refuse(id));
  }

  /** Reads a JSON body (a message, or a batch of them) that answers request `id`. */
  async readJson(body: Body, headers: Dispatcher.ResponseData['headers'], id: RequestId): Promise<void> {
    const maxBytes = this.allowance(id);
    if (Number(header(headers, 'content-length') ?? 0) > maxBytes) {
      await discard(body);
      return this.refuse(id);
    }
    const share = this.#budget.share();
    try {
      let bytes: Buffer;
      try {
        bytes = await readBounded(body, maxBytes, () => new AnswerTooLargeError(), share);
      } catch (err) {
        if (err instanceof AnswerTooLargeError) return this.refuse(id);
        throw err;
      }
      this.ledger.parsed(bytes.length);
      const text = bytes.toString('utf8');
      // One message, or a batch of them (which MCP's 2025-03-26 revision allowed).
      const messages = text.trimStart().startsWith('[') ? (JSON.parse(text) as unknown[]).map(asMessage) : [parseMessage(text)];
      for (const message of messages) this.#receive(message, bytes.length);
    } finally {
      share.done();
    }
  }

  /** A parser of up to `maxBytes` an event whose `message` events are judged and handed on (and to `seen`); one that is not JSON-RPC is reported and skipped, as the SDK's transport does. */
  parser(maxBytes: number, seen?: (message: JSONRPCMessage) => void): EventStreamParser {
    return new EventStreamParser(maxBytes, (event, bytes) => {
      if (event.event !== 'message') return;
      let message: JSONRPCMessage;
      try {
        this.ledger.parsed(bytes);
        message = parseMessage(event.data);
      } catch {
        this.#on.error(new UpstreamContentError('the upstream sent an event that is not a JSON-RPC message'));
        return;
      }
      seen?.(message);
      this.#receive(message, bytes);
    });
  }

  /** Feeds `body` to `parser` until it ends, each chunk counted in the budget first; throws `MessageTooLargeError` past the parser's bound. */
  async readEvents(body: Body, parser: EventStreamParser): Promise<void> {
    const share = this.#budget.share();
    const take = (chunk: Buffer): void => {
      parser.push(chunk);
      share.hold(parser.buffered);
    };
    try {
      await consume(body, (chunk) => {
        const wait = share.room(chunk.length);
        if (wait === undefined) return take(chunk);
        return wait.then(() => take(chunk));
      });
    } finally {
      share.done();
    }
  }

  #receive(message: JSONRPCMessage, bytes: number): void {
    const admission = this.ledger.admit(message, bytes);
    if ('breach' in admission) throw this.#on.breach(admission.breach);
    if ('deliver' in admission) this.#on.message(admission.deliver);
  }
}
