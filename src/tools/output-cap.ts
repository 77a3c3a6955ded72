import { isUtf8 } from 'node:buffer';

/** The most characters of command output a tool hands to the model. */
export const MAX_OUTPUT_CHARS = 30_000;

// Room kept for the note that says what was left out, so a capped text stays within its limit.
const NOTE_RESERVE = 150;
// A UTF-8 character takes at most 4 bytes, so this many bytes always hold MAX_OUTPUT_CHARS of text.
const DEFAULT_KEEP_BYTES = 4 * MAX_OUTPUT_CHARS;

/** Output rendered for the model. */
export interface RenderedOutput {
  /** The text, or `[binary output, N bytes]`. */
  text: string;
  /** True when the output held NUL bytes or invalid UTF-8. */
  binary: boolean;
  /** Bytes of the output that `text` leaves out (0 when it is complete). */
  omittedBytes: number;
}

/**
 * Captures a stream of unbounded length in bounded memory: the first bytes and a rolling window
 * of the last bytes, at most `keepBytes` of each, however small or large the chunks. Writing never blocks, so a pipe that feeds it keeps being drained however
 * much the writer prints. Bytes are decoded only when rendered, from whole buffers, so a
 * character split across chunks is never mangled.
 */
export class OutputCapture {
  readonly #keepBytes: number;
  // The first bytes, in a buffer that grows (doubling) up to keepBytes.
  #head = Buffer.alloc(0);
  #headBytes = 0;
  // The last bytes after the head, in a ring of keepBytes allocated once output outgrows the head.
  #ring: Buffer | undefined;
  #ringStart = 0;
  #ringBytes = 0;
  #totalBytes = 0;
  #sawNul = false;

  /** @param keepBytes bytes kept at each end (head and tail). */
  constructor(keepBytes = DEFAULT_KEEP_BYTES) {
    this.#keepBytes = keepBytes;
  }

  /** Bytes written so far. */
  get totalBytes(): number {
    return this.#totalBytes;
  }

  write(chunk: Buffer): void {
    this.#totalBytes += chunk.length;
    if (!this.#sawNul && chunk.includes(0)) this.#sawNul = true;
    let rest = chunk;
    if (this.#headBytes < this.#keepBytes) {
      const take = Math.min(rest.length, this.#keepBytes - this.#headBytes);
      this.#growHead(this.#headBytes + take);
      rest.copy(this.#head, this.#headBytes, 0, take);
      this.#headBytes += take;
      rest = rest.subarray(take);
    }
    if (rest.length > 0) this.#writeRing(rest);
  }

  #growHead(needed: number): void {
    if (needed <= this.#head.length) return;
    let size = Math.max(1024, this.#head.length);
    while (size < needed) size *= 2;
    const grown = Buffer.allocUnsafe(Math.min(size, this.#keepBytes));
    this.#head.copy(grown, 0, 0, this.#headBytes);
    this.#head = grown;
  }

  #writeRing(bytes: Buffer): void {
    const size = this.#keepBytes;
    const ring = (this.#ring ??= Buffer.allocUnsafe(size));
    if (bytes.length >= size) {
      bytes.copy(ring, 0, bytes.length - size);
      this.#ringStart = 0;
      this.#ringBytes = size;
      return;
    }
    // Write at the end of the kept bytes, wrapping around; the oldest bytes are overwritten.
    const end = (this.#ringStart + this.#ringBytes) % size;
    const first = Math.min(bytes.length, size - end);
    bytes.copy(ring, end, 0, first);
    bytes.copy(ring, 0, first);
    const overflow = Math.max(0, this.#ringBytes + bytes.length - size);
    this.#ringBytes = Math.min(size, this.#ringBytes + bytes.length);
    this.#ringStart = (this.#ringStart + overflow) % size;
  }

  #tailBytes(): Buffer {
    if (!this.#ring) return Buffer.alloc(0);
    const end = this.#ringStart + this.#ringBytes;
    if (end <= this.#keepBytes) return this.#ring.subarray(this.#ringStart, end);
    return Buffer.concat([this.#ring.subarray(this.#ringStart), this.#ring.subarray(0, end - this.#keepBytes)]);
  }

  /** Renders the captured output as at most `maxChars` characters, keeping its head and tail. */
  render(maxChars = MAX_OUTPUT_CHARS): RenderedOutput {
    const head = this.#head.subarray(0, this.#headBytes);
    const tail = this.#tailBytes();
    const gap = this.#totalBytes - head.length - tail.length;

    if (gap === 0) {
      const whole = Buffer.concat([head, tail]);
      if (this.#sawNul || !isUtf8(whole.subarray(0, whole.length - incompleteEnd(whole)))) {
        return this.#binary();
      }
      const capped = capText(whole.toString('utf8'), maxChars);
      return { text: capped.text, binary: false, omittedBytes: capped.omittedBytes };
    }

    // Head and tail are apart: cut both at character boundaries before checking and decoding.
    const headPart = head.subarray(0, head.length - incompleteEnd(head));
    const tailPart = tail.subarray(continuationStart(tail));
    const tailChecked = tailPart.subarray(0, tailPart.length - incompleteEnd(tailPart));
    if (this.#sawNul || !isUtf8(headPart) || !isUtf8(tailChecked)) return this.#binary();
    const keep = Math.max(0, maxChars - NOTE_RESERVE);
    const headText = sliceHead(headPart.toString('utf8'), Math.ceil(keep / 2));
    const tailText = sliceTail(tailPart.toString('utf8'), Math.floor(keep / 2));
    const omittedBytes = this.#totalBytes - Buffer.byteLength(headText) - Buffer.byteLength(tailText);
    return { text: joinCut(headText, tailText, omittedBytes, this.#totalBytes), binary: false, omittedBytes };
  }

  #binary(): RenderedOutput {
    return { text: `[binary output, ${this.#totalBytes} bytes]`, binary: true, omittedBytes: this.#totalBytes };
  }
}

/**
 * Caps a string at `maxChars` characters, keeping its beginning and end and saying in between how
 * much was left out; the result, note included, is at most `maxChars` long. Cuts never split a
 * surrogate pair.
 */
export function capText(text: string, maxChars = MAX_OUTPUT_CHARS): { text: string; omittedBytes: number } {
  if (text.length <= maxChars) return { text, omittedBytes: 0 };
  const keep = Math.max(0, maxChars - NOTE_RESERVE);
  const head = sliceHead(text, Math.ceil(keep / 2));
  const tail = sliceTail(text, Math.floor(keep / 2));
  const total = Buffer.byteLength(text);
  const omittedBytes = total - Buffer.byteLength(head) - Buffer.byteLength(tail);
  return { text: joinCut(head, tail, omittedBytes, total), omittedBytes };
}

function joinCut(head: string, tail: string, omittedBytes: number, totalBytes: number): string {
  const note = `[... ${omittedBytes} bytes omitted; the output was ${totalBytes} bytes, showing its beginning and end ...]`;
  const before = head.endsWith('\n') ? head : `${head}\n`;
  return `${before}${note}\n${tail}`;
}

/** The first `n` UTF-16 units of `s`, one fewer if the cut would split a surrogate pair. */
function sliceHead(s: string, n: number): string {
  if (n >= s.length) return s;
  const code = s.charCodeAt(n - 1);
  return s.slice(0, code >= 0xd800 && code <= 0xdbff ? n - 1 : n);
}

/** The last `n` UTF-16 units of `s`, one fewer if the cut would split a surrogate pair. */
function sliceTail(s: string, n: number): string {
  if (n >= s.length) return s;
  let start = s.length - n;
  const code = s.charCodeAt(start);
  if (code >= 0xdc00 && code <= 0xdfff) start += 1;
  return s.slice(start);
}

/** Bytes at the end of `buf` that start a UTF-8 sequence the buffer does not complete. */
function incompleteEnd(buf: Buffer): number {
  for (let i = buf.length - 1; i >= Math.max(0, buf.length - 4); i--) {
    const byte = buf[i]!;
    if ((byte & 0xc0) === 0x80) continue;
    if (byte < 0xc0) return 0;
    const need = byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : 2;
    const have = buf.length - i;
    return have < need ? have : 0;
  }
  return 0;
}

/** Continuation bytes at the start of `buf` (the rest of a character cut off in front). */
function continuationStart(buf: Buffer): number {
  let i = 0;
  while (i < Math.min(3, buf.length) && (buf[i]! & 0xc0) === 0x80) i++;
  return i;
}
