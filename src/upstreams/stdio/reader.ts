import type { JSONRPCMessage, RequestId } from '@modelcontextprotocol/client';
import { UNSENT_ANSWER, type AnswerLedger } from '../answer-ledger.js';
import { NotJsonRpcError, parseMessage } from '../json-rpc.js';
import { bytesText, MAX_MESSAGE_BYTES, SMALL_MESSAGE_BYTES } from '../message-bounds.js';
import { MessageScanner } from './message-scanner.js';

export interface StdioReaderEvents {
  /** A message to hand on (a refusal stands in for an answer past its allowance). */
  message(message: JSONRPCMessage): void;
  /** The upstream broke the protocol or a bound, in words for its reason ("the process …"); nothing more is read. */
  broken(why: string): void;
}

/**
 * Reads an upstream's stdout as JSON-RPC messages, one a line, each bounded before it is kept:
 * the {@link MessageScanner} learns from the first bytes of a line what it is, and the line may
 * hold what that allows. An answer to an awaited request may take that request's allowance (past
 * it, the rest of the line is skipped unkept and the request gets a refusal); a late answer is
 * skipped unkept; an answer to a request never sent breaks the upstream; anything else may take a
 * small message's bound. While an answer's id is not known yet (the TypeScript SDK writes it
 * last), the line may take the largest allowance awaited, and past it is skipped while the
 * scanner looks for the id. A line past any bound that cannot be put down to a request breaks the
 * upstream, as does one past {@link MAX_MESSAGE_BYTES} skipped or not.
 */
export class StdioMessageReader {
  readonly #ledger: AnswerLedger;
  readonly #on: StdioReaderEvents;
  #pieces: Buffer[] = [];
  #held = 0;
  /** Bytes of the line so far, kept or skipped. */
  #length = 0;
  #scanner = new MessageScanner();
  /** Skipping the rest of the line: the bound it passed (0 for a late answer). */
  #skipBound: number | undefined;
  /** The skipped line's id was judged: refused, late, or (then it broke) never sent. */
  #judged = false;
  #late = false;
  #stopped = false;
  /** When the line being read began, and when it last grew (performance.now()); undefined between lines. */
  lineOpenSince: number | undefined;
  lastProgress = 0;

  constructor(ledger: AnswerLedger, on: StdioReaderEvents) {
    this.#ledger = ledger;
    this.#on = on;
  }

  /** Reads a chunk of stdout. */
  push(chunk: Buffer): void {
    let start = 0;
    while (!this.#stopped) {
      const newline = chunk.indexOf(0x0a, start);
      const end = newline === -1 ? chunk.length : newline;
      if (end > start) this.#piece(chunk.subarray(start, end));
      if (newline === -1 || this.#stopped) break;
      this.#lineEnd();
      start = newline + 1;
    }
    if (this.#length > 0) {
      const now = performance.now();
      this.lineOpenSince ??= now;
      this.lastProgress = now;
    }
  }

  /** Forgets the line begun so far, and reads nothing more. */
  stop(): void {
    this.#stopped = true;
    this.#reset();
  }

  #piece(piece: Buffer): void {
    this.#length += piece.length;
    const scanner = this.#scanner;
    if (!scanner.settled) scanner.push(piece);
    if (this.#skipBound !== undefined) {
      if (this.#length > MAX_MESSAGE_BYTES) return this.#break(`sent more than ${bytesText(MAX_MESSAGE_BYTES)} without a line break`);
      this.#judgeSkipped();
      return;
    }
    if (scanner.kind === 'answer' && scanner.id !== undefined) {
      const verdict = this.#ledger.verdict(scanner.id);
      if (verdict.kind === 'unsent') return this.#break(UNSENT_ANSWER);
      if (verdict.kind === 'late') return this.#skip(0);
      if (this.#length > verdict.maxBytes) return this.#skip(verdict.maxBytes);
    } else {
      const bound = scanner.kind === 'answer' ? this.#ledger.largest() : SMALL_MESSAGE_BYTES;
      if (this.#length > bound) {
        // Only an answer can be put down to a request, once its id shows.
        if (scanner.kind !== 'answer') return this.#break(`sent more than ${bytesText(bound)} without a line break`);
        return this.#skip(bound);
      }
    }
    this.#pieces.push(piece);
    this.#held += piece.length;
    this.#ledger.holding(this.#held);
  }

  /** Skips the rest of the line unkept, past `bound`; an answer whose id is known is judged at once. */
  #skip(bound: number): void {
    this.#skipBound = bound;
    this.#pieces = [];
    this.#held = 0;
    this.#judgeSkipped();
  }

  #judgeSkipped(): void {
    const scanner = this.#scanner;
    if (this.#judged || scanner.kind !== 'answer' || scanner.id === undefined) return;
    this.#judged = true;
    const verdict = this.#ledger.verdict(scanner.id);
    if (verdict.kind === 'unsent') return this.#break(UNSENT_ANSWER);
    if (verdict.kind === 'late') this.#late = true;
    else this.#on.message(this.#ledger.refuse(scanner.id as RequestId));
  }

  #lineEnd(): void {
    const scanner = this.#scanner;
    if (this.#skipBound !== undefined) {
      // An answer skipped while its id was not known, which never showed one.
      if (!this.#judged) return this.#break(`sent more than ${bytesText(this.#skipBound)} without a line break`);
      if (this.#late) this.#ledger.late(scanner.id as RequestId);
      return this.#reset();
    }
    const line = this.#pieces.length === 1 ? this.#pieces[0]! : Buffer.concat(this.#pieces, this.#held);
    this.#reset();
    if (line.length === 0) return;
    // Judged before it is parsed when the scanner found its id: a late answer, or one past its allowance, is never parsed.
    if (scanner.kind === 'answer' && scanner.id !== undefined) {
      const verdict = this.#ledger.verdict(scanner.id);
      if (verdict.kind === 'unsent') return this.#break(UNSENT_ANSWER);
      if (verdict.kind === 'late') return this.#ledger.late(scanner.id as RequestId);
      if (line.length > verdict.maxBytes) return this.#on.message(this.#ledger.refuse(scanner.id as RequestId));
    }
    let message: JSONRPCMessage | undefined;
    try {
      this.#ledger.parsed(line.length);
      message = parseLine(line);
    } catch (err) {
      return this.#break(`sent what is not a JSON-RPC message${err instanceof NotJsonRpcError ? '' : ` (${(err as Error).message.split('\n')[0]})`}`);
    }
    if (message === undefined) return;
    // JSON.parse has the last word on what the line is.
    const admission = this.#ledger.admit(message, line.length);
    if ('breach' in admission) return this.#break(admission.breach);
    if ('deliver' in admission) this.#on.message(admission.deliver);
  }

  #break(why: string): void {
    if (this.#stopped) return;
    this.stop();
    this.#on.broken(why);
  }

  #reset(): void {
    this.#pieces = [];
    this.#held = 0;
    this.#length = 0;
    this.#scanner = new MessageScanner();
    this.#skipBound = undefined;
    this.#judged = false;
    this.#late = false;
    this.lineOpenSince = undefined;
  }
}

/** A line as a message: undefined for a line that is not JSON (skipped, as the SDK's transport does); throws `NotJsonRpcError` for JSON that is not JSON-RPC. */
function parseLine(line: Buffer): JSONRPCMessage | undefined {
  const text = line.toString('utf8', 0, line[line.length - 1] === 0x0d ? line.length - 1 : line.length);
  try {
    return parseMessage(text);
  } catch (err) {
    if (err instanceof SyntaxError) return undefined;
    throw err;
  }
}
