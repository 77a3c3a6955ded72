import type { RequestId } from '@modelcontextprotocol/client';

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const COLON = 0x3a;
const COMMA = 0x2c;
/** A key or an id longer than this is none toolport looks for (`"\u0069\u0064"` is 12 bytes; toolport's ids are integers). */
const MAX_TOKEN_BYTES = 64;

const Where = {
  start: 0,
  keyOrEnd: 1,
  key: 2,
  keyString: 3,
  colon: 4,
  value: 5,
  stringValue: 6,
  scalar: 7,
  nested: 8,
  commaOrEnd: 9,
  end: 10,
  notObject: 11,
} as const;
type Where = (typeof Where)[keyof typeof Where];

/**
 * Learns what a JSON-RPC message is from its first bytes, before it is read whole: whether it is
 * an answer (its first top-level key of `result`, `error` and `method` is not `method`) and the id
 * it answers, fed piece by piece. It stops looking once it knows both, so an answer whose id comes
 * first costs a few bytes; one whose id comes last (as the TypeScript SDK writes them) is scanned
 * to its end, strings by `indexOf`. It only steers what is kept: a message read whole is still
 * judged by what JSON.parse makes of it.
 */
export class MessageScanner {
  /** 'answer' or 'other' once a top-level `result`, `error` or `method` key is seen. */
  kind: 'answer' | 'other' | undefined;
  /** The top-level id, once its value has been read: a string or integer, or null for any other value. */
  id: RequestId | null | undefined;
  #where: Where = Where.start;
  #key: string | undefined;
  #token: Buffer[] = [];
  #tokenBytes = 0;
  #escaped = false;
  #depth = 0;
  #inString = false;

  /** Whether it knows all it looks for (or that this is not a JSON object). */
  get settled(): boolean {
    return this.#where === Where.notObject || this.#where === Where.end || (this.kind !== undefined && this.id !== undefined);
  }

  /** Whether the message is not a JSON object at all (then it is no JSON-RPC message). */
  get notObject(): boolean {
    return this.#where === Where.notObject;
  }

  /** Reads the next piece of the message. */
  push(bytes: Buffer): void {
    let i = 0;
    const to = bytes.length;
    while (i < to && !this.settled) {
      switch (this.#where) {
        case Where.start:
        case Where.keyOrEnd:
        case Where.key:
        case Where.colon:
        case Where.commaOrEnd:
        case Where.value: {
          const byte = bytes[i]!;
          if (byte === 0x20 || byte === 0x09 || byte === 0x0d || byte === 0x0a) i++;
          else i = this.#punctuation(byte, i);
          break;
        }
        case Where.keyString:
        case Where.stringValue: {
          const end = this.#stringEnd(bytes, i);
          const capture = this.#where === Where.keyString || this.#key === 'id';
          if (capture) this.#take(bytes.subarray(i, end === -1 ? to : end));
          if (end === -1) return;
          i = end + 1;
          if (this.#where === Where.keyString) {
            this.#key = this.#tokenText(true);
            this.#where = Where.colon;
          } else {
            if (this.#key === 'id') this.id = this.#tokenId(true);
            this.#where = Where.commaOrEnd;
          }
          break;
        }
        case Where.scalar: {
          let end = i;
          while (end < to && !isDelimiter(bytes[end]!)) end++;
          if (this.#key === 'id') this.#take(bytes.subarray(i, end));
          if (end === to) return;
          if (this.#key === 'id') this.id = this.#tokenId(false);
          this.#where = Where.commaOrEnd;
          i = end;
          break;
        }
        case Where.nested:
          i = this.#skipNested(bytes, i);
          break;
        default:
          return;
      }
    }
  }

  /** Where it stands after a structural byte at `i` (whitespace aside); returns the next index. */
  #punctuation(byte: number, i: number): number {
    switch (this.#where) {
      case Where.start:
        this.#where = byte === OPEN_BRACE ? Where.keyOrEnd : Where.notObject;
        return i + 1;
      case Where.keyOrEnd:
      case Where.key:
        if (byte === QUOTE) {
          this.#startToken(Where.keyString);
        } else this.#where = byte === CLOSE_BRACE && this.#where === Where.keyOrEnd ? Where.end : Where.notObject;
        return i + 1;
      case Where.colon:
        this.#where = byte === COLON ? Where.value : Where.notObject;
        return i + 1;
      case Where.commaOrEnd:
        this.#where = byte === COMMA ? Where.key : byte === CLOSE_BRACE ? Where.end : Where.notObject;
        return i + 1;
      default: {
        // The value of a top-level key begins.
        const key = this.#key;
        if (this.kind === undefined && (key === 'result' || key === 'error')) this.kind = 'answer';
        if (this.kind === undefined && key === 'method') this.kind = 'other';
        if (byte === QUOTE) {
          this.#startToken(Where.stringValue);
          return i + 1;
        }
        if (byte === OPEN_BRACE || byte === OPEN_BRACKET) {
          if (key === 'id') this.id = null;
          this.#where = Where.nested;
          this.#depth = 1;
          this.#inString = false;
          return i + 1;
        }
        this.#startToken(Where.scalar);
        return i;
      }
    }
  }

  /** Skips a nested value from `i`: strings by `indexOf`, the rest byte by byte; returns the next index. */
  #skipNested(bytes: Buffer, i: number): number {
    const to = bytes.length;
    while (i < to) {
      if (this.#inString) {
        const end = this.#stringEnd(bytes, i);
        if (end === -1) return to;
        this.#inString = false;
        i = end + 1;
        continue;
      }
      const byte = bytes[i++]!;
      if (byte === QUOTE) this.#inString = true;
      else if (byte === OPEN_BRACE || byte === OPEN_BRACKET) this.#depth++;
      else if ((byte === CLOSE_BRACE || byte === CLOSE_BRACKET) && --this.#depth === 0) {
        this.#where = Where.commaOrEnd;
        return i;
      }
    }
    return i;
  }

  /** The index of the quote that ends the string going on at `i`, or -1 when it goes past `bytes` (an escape left open is carried over). */
  #stringEnd(bytes: Buffer, i: number): number {
    if (this.#escaped) {
      if (i >= bytes.length) return -1;
      this.#escaped = false;
      i++;
    }
    for (;;) {
      const quote = bytes.indexOf(QUOTE, i);
      const stop = quote === -1 ? bytes.length : quote;
      let backslashes = 0;
      while (stop - backslashes - 1 >= i && bytes[stop - backslashes - 1] === BACKSLASH) backslashes++;
      if (quote === -1) {
        this.#escaped = backslashes % 2 === 1;
        return -1;
      }
      if (backslashes % 2 === 0) return quote;
      i = quote + 1;
    }
  }

  #startToken(where: Where): void {
    this.#where = where;
    this.#token = [];
    this.#tokenBytes = 0;
    this.#escaped = false;
  }

  #take(piece: Buffer): void {
    this.#tokenBytes += piece.length;
    if (this.#tokenBytes <= MAX_TOKEN_BYTES) this.#token.push(piece);
  }

  /** The token read, decoded as JSON (a string's quotes put back); undefined when it is too long or not JSON. */
  #tokenValue(quoted: boolean): unknown {
    if (this.#tokenBytes > MAX_TOKEN_BYTES) return undefined;
    const text = Buffer.concat(this.#token).toString('utf8');
    try {
      return JSON.parse(quoted ? `"${text}"` : text) as unknown;
    } catch {
      return undefined;
    }
  }

  #tokenText(quoted: boolean): string | undefined {
    const value = this.#tokenValue(quoted);
    return typeof value === 'string' ? value : undefined;
  }

  #tokenId(quoted: boolean): RequestId | null {
    const value = this.#tokenValue(quoted);
    return typeof value === 'string' || (typeof value === 'number' && Number.isInteger(value)) ? value : null;
  }
}

function isDelimiter(byte: number): boolean {
  return byte === COMMA || byte === CLOSE_BRACE || byte === 0x20 || byte === 0x09 || byte === 0x0d || byte === 0x0a;
}
