import { StringDecoder } from 'node:string_decoder';
import { MAX_OUTPUT_CHARS } from '../output-cap.js';

/** Characters of rg's error output a result shows. */
export const MAX_STDERR_CHARS = 2_000;
// Characters of result lines kept: the output cap less room for the header and the notes after them.
const MAX_LINES_CHARS = MAX_OUTPUT_CHARS - MAX_STDERR_CHARS - 1_000;

/**
 * Splits rg's output into lines, keeping the first `limit` while they fit in MAX_LINES_CHARS, and
 * counting all (and, for `--count`, summing). Memory stays bounded by the output cap, whatever
 * the limit and however much rg prints.
 */
export class LineCollector {
  readonly kept: string[] = [];
  total = 0;
  countSum = 0;
  /** True once a line was left out because the kept lines filled MAX_LINES_CHARS. */
  full = false;
  #keptChars = 0;
  readonly #limit: number;
  readonly #rename: (line: string) => string;
  readonly #decoder = new StringDecoder('utf8');
  #partial = '';

  constructor(limit: number, rename: (line: string) => string) {
    this.#limit = limit;
    this.#rename = rename;
  }

  write(chunk: Buffer): void {
    const text = this.#partial + this.#decoder.write(chunk);
    const pieces = text.split('\n');
    this.#partial = pieces.pop() ?? '';
    // A partial line longer than any rg prints (--max-columns) cannot grow without bound here.
    if (this.#partial.length > 4 * MAX_OUTPUT_CHARS) this.#partial = this.#partial.slice(0, 4 * MAX_OUTPUT_CHARS);
    for (const line of pieces) this.#add(line);
  }

  end(): void {
    const rest = this.#partial + this.#decoder.end();
    this.#partial = '';
    if (rest !== '') this.#add(rest);
  }

  /** Takes one whole line (no newline in it), as `write` takes each line of its chunks. */
  add(line: string): void {
    this.#add(line);
  }

  #add(raw: string): void {
    const line = this.#rename(raw);
    this.total += 1;
    const n = Number(line.slice(line.lastIndexOf(':') + 1));
    if (Number.isInteger(n)) this.countSum += n;
    if (this.full || this.kept.length >= this.#limit) return;
    // Kept in order and without gaps: once a line does not fit, no later one is kept.
    if (this.#keptChars + line.length + 1 > MAX_LINES_CHARS) {
      this.full = true;
      return;
    }
    this.kept.push(line);
    this.#keptChars += line.length + 1;
  }
}
