import { LineSplitter, MessageTooLargeError } from '../stdio/line-splitter.js';

/** One server-sent event: its type (`message` when none is named), its data lines joined, its id when it has one. */
export interface ServerSentEvent {
  event: string;
  data: string;
  id?: string;
}

/**
 * Reads a `text/event-stream` body chunk by chunk, as the HTML standard's parser does (fields
 * `event`, `data`, `id`, `retry`; comments; an empty line dispatches), looking at each byte once.
 * A line, and the data of one event, may hold `maxBytes` at most: past it `push` throws
 * `MessageTooLargeError`. Lines end at `\n` or `\r\n` (a lone `\r` is not a line break here).
 */
export class EventStreamParser {
  readonly #lines: LineSplitter;
  readonly #maxBytes: number;
  readonly #onEvent: (event: ServerSentEvent, bytes: number) => void;
  #event = '';
  #data: string[] = [];
  #dataBytes = 0;
  #id: string | undefined;
  #first = true;
  /** The last event id the stream set (`Last-Event-ID` when it is resumed). */
  lastEventId: string | undefined;
  /** The reconnection time the stream asked for, in ms. */
  retryMs: number | undefined;

  /** `onEvent` hears each event and the bytes of its data. */
  constructor(maxBytes: number, onEvent: (event: ServerSentEvent, bytes: number) => void) {
    this.#lines = new LineSplitter(maxBytes);
    this.#maxBytes = maxBytes;
    this.#onEvent = onEvent;
  }

  /** Bytes held of the event being read (its line begun, its data lines). */
  get buffered(): number {
    return this.#lines.buffered + this.#dataBytes;
  }

  /** Feeds a chunk; dispatches each event it completes. */
  push(chunk: Buffer): void {
    this.#lines.push(chunk, (line) => {
      this.#line(line);
      return true;
    });
  }

  #line(bytes: Buffer): void {
    let end = bytes.length;
    if (end > 0 && bytes[end - 1] === 0x0d) end--;
    // A byte order mark may start the stream, and only the stream.
    const start = this.#first && end >= 3 && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf ? 3 : 0;
    this.#first = false;
    if (end === start) return this.#dispatch();
    if (bytes[start] === 0x3a) return; // ':' starts a comment
    const line = bytes.toString('utf8', start, end);
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    const value = colon === -1 ? '' : line.slice(line.charCodeAt(colon + 1) === 0x20 ? colon + 2 : colon + 1);
    if (field === 'data') {
      this.#dataBytes += Buffer.byteLength(value) + 1;
      if (this.#dataBytes > this.#maxBytes) {
        this.#reset();
        throw new MessageTooLargeError(`sent an event of more than ${this.#maxBytes / (1024 * 1024)} MiB`);
      }
      this.#data.push(value);
    } else if (field === 'event') this.#event = value;
    else if (field === 'id' && !value.includes('\0')) this.#id = value;
    else if (field === 'retry' && /^\d+$/.test(value)) this.retryMs = Number(value);
  }

  #dispatch(): void {
    if (this.#id !== undefined) this.lastEventId = this.#id;
    const data = this.#data.length === 1 ? this.#data[0]! : this.#data.join('\n');
    const event: ServerSentEvent = { event: this.#event === '' ? 'message' : this.#event, data };
    if (this.#id !== undefined) event.id = this.#id;
    const bytes = this.#dataBytes;
    this.#reset();
    // As the standard says: an event with empty data is not dispatched (a priming event sets the id only).
    if (data !== '') this.#onEvent(event, bytes);
  }

  #reset(): void {
    this.#event = '';
    this.#data = [];
    this.#dataBytes = 0;
    this.#id = undefined;
  }
}
