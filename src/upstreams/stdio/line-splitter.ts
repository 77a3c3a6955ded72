/** A line longer than a {@link LineSplitter}'s bound. */
export class MessageTooLargeError extends Error {
  override readonly name = 'MessageTooLargeError';
}

/**
 * Splits a byte stream into lines, looking at each byte once: only the new chunk is searched for
 * `\n`, and the pieces of a line are joined once, when it ends. (Joining and searching the whole
 * buffer on every chunk, as the SDK's ReadBuffer does, is quadratic in the length of a line.)
 */
export class LineSplitter {
  readonly #maxBytes: number;
  #pieces: Buffer[] = [];
  #length = 0;

  constructor(maxBytes: number) {
    this.#maxBytes = maxBytes;
  }

  /** Hands each line that `chunk` completes to `onLine`, which returns false to stop; throws `MessageTooLargeError` past the bound. */
  push(chunk: Buffer, onLine: (line: Buffer) => boolean): void {
    let start = 0;
    for (let end = chunk.indexOf(0x0a); end !== -1; end = chunk.indexOf(0x0a, start)) {
      const piece = chunk.subarray(start, end);
      this.#bound(piece.length);
      const line = this.#length === 0 ? piece : Buffer.concat([...this.#pieces, piece], this.#length + piece.length);
      this.clear();
      start = end + 1;
      if (!onLine(line)) return;
    }
    if (start === chunk.length) return;
    this.#bound(chunk.length - start);
    this.#pieces.push(chunk.subarray(start));
    this.#length += chunk.length - start;
  }

  /** Bytes of the line begun so far. */
  get buffered(): number {
    return this.#length;
  }

  /** Forgets the line begun so far. */
  clear(): void {
    this.#pieces = [];
    this.#length = 0;
  }

  #bound(more: number): void {
    if (this.#length + more <= this.#maxBytes) return;
    this.clear();
    throw new MessageTooLargeError(`sent more than ${this.#maxBytes / (1024 * 1024)} MiB without a line break`);
  }
}
