import { displayName } from '../display-name.js';
import { MAX_OUTPUT_CHARS } from '../output-cap.js';

// Longest record kept whole; rg's lines are short (--max-columns), so only a runaway path comes near.
const MAX_RECORD_BYTES = 4 * MAX_OUTPUT_CHARS;
const NUL = 0;
const NEWLINE = 10;
// What rg prints, with forced line numbers, at the start of a matching (":") or context ("-") line.
const LINE_NUMBER = /^\d+([:-])/;
// rg's note after the matches of a file it found binary data in further on, which has no NUL after the path.
const BINARY_NOTE = /: WARNING: stopped searching binary file after match \(found .* byte around offset \d+\)$/;

/** The options rg's output must be written with for RgRecords to read it. */
export const RECORD_ARGS = ['--null', '--context-separator=\\x00'] as const;

export interface RgRecordsOptions {
  /** rg's output mode: `files_with_matches`, `count` or `content`. */
  mode: string;
  /** In content mode: show line numbers. rg must print them regardless (`--line-number`): they tell matches from context. */
  lineNumbers: boolean;
  /** When rg searches one file: the path it was given, which starts every record. */
  file: string | undefined;
  /** Turns a path as rg printed it into the path from the workspace root. */
  rename: (path: string) => string;
}

/**
 * Reads rg's output written with `--null`, which ends every path with a NUL byte (a file name
 * cannot hold one), and the context separator made a NUL too, and hands on one line per record
 * in rg's usual form (`path:12:text`, `path-13-text`, `path:3`, `path`, `--`), the path shown by
 * displayName. A file named "a\nb:1:fake" thus stays one line, shown as `"a\nb:1:fake"`, instead
 * of passing for a second result.
 */
export class RgRecords {
  readonly #options: RgRecordsOptions;
  readonly #file: Buffer | undefined;
  readonly #onLine: (line: string) => void;
  #buffer: Buffer = Buffer.alloc(0);
  // The path of the record being read, once its NUL has been seen ('' for a context separator).
  #path: string | undefined;

  constructor(options: RgRecordsOptions, onLine: (line: string) => void) {
    this.#options = options;
    this.#file = options.file === undefined ? undefined : Buffer.from(options.file);
    this.#onLine = onLine;
  }

  write(chunk: Buffer): void {
    this.#buffer = this.#buffer.length === 0 ? chunk : Buffer.concat([this.#buffer, chunk]);
    this.#drain();
    if (this.#buffer.length > MAX_RECORD_BYTES) this.#buffer = this.#buffer.subarray(0, MAX_RECORD_BYTES);
  }

  /** Hands on what is left of a record cut off (rg killed on a timeout). */
  end(): void {
    const rest = this.#buffer.toString('utf8');
    this.#buffer = Buffer.alloc(0);
    if (this.#path !== undefined) this.#record(this.#path, rest);
    else if (rest !== '') this.#onLine(this.#shown(rest));
    this.#path = undefined;
  }

  #drain(): void {
    for (;;) {
      if (this.#path === undefined) {
        const ends = this.#pathEnd();
        if (ends === undefined) return;
        this.#path = this.#buffer.subarray(0, ends.path).toString('utf8');
        this.#buffer = this.#buffer.subarray(ends.rest);
        // Files mode: the path is the whole record.
        if (this.#options.mode === 'files_with_matches' && this.#path !== '') {
          this.#onLine(this.#shown(this.#path));
          this.#path = undefined;
        }
        continue;
      }
      const end = this.#buffer.indexOf(NEWLINE);
      if (end < 0) return;
      const rest = this.#buffer.subarray(0, end).toString('utf8');
      this.#buffer = this.#buffer.subarray(end + 1);
      this.#record(this.#path, rest);
      this.#path = undefined;
    }
  }

  /**
   * Where the path at the start of the buffer ends and what follows it starts, or undefined until
   * the path is all there. Searching one file, rg starts every record with the path it was given,
   * which may hold anything but NUL; its note on a binary file (`<path>: binary file matches ...`)
   * has no NUL after the path, and is read as a record whose rest starts with ":". So has its
   * note, in a walk, on a file with binary data after a match (`<path>: WARNING: stopped ...`).
   */
  #pathEnd(): { path: number; rest: number } | undefined {
    // No path is empty: a NUL first is a context separator.
    if (this.#buffer[0] === NUL) return { path: 0, rest: 1 };
    const file = this.#file;
    if (file !== undefined) {
      if (this.#buffer.length <= file.length) return undefined;
      if (this.#buffer.subarray(0, file.length).equals(file)) {
        return { path: file.length, rest: this.#buffer[file.length] === NUL ? file.length + 1 : file.length };
      }
    }
    const end = this.#buffer.indexOf(NUL);
    const newline = this.#buffer.indexOf(NEWLINE);
    if (newline >= 0 && (end < 0 || newline < end)) {
      // A whole line before any NUL: a path with a newline in it, or rg's note on a binary file.
      const line = this.#buffer.subarray(0, newline).toString('utf8');
      const note = BINARY_NOTE.exec(line);
      if (note !== null) {
        const path = newline - Buffer.byteLength(line.slice(note.index));
        return { path, rest: path };
      }
    }
    return end < 0 ? undefined : { path: end, rest: end + 1 };
  }

  /** One line from a path and what rg printed after it. */
  #record(path: string, rest: string): void {
    // A record with no path is a context separator.
    if (path === '') return this.#onLine('--');
    const shown = this.#shown(path);
    if (this.#options.mode === 'files_with_matches') return this.#onLine(shown);
    if (this.#options.mode === 'count') return this.#onLine(`${shown}:${rest}`);
    const numbered = LINE_NUMBER.exec(rest);
    if (numbered === null) return this.#onLine(rest.startsWith(':') ? `${shown}${rest}` : `${shown}:${rest}`);
    const separator = numbered[1]!;
    this.#onLine(`${shown}${separator}${this.#options.lineNumbers ? rest : rest.slice(numbered[0].length)}`);
  }

  #shown(path: string): string {
    return displayName(this.#options.rename(path));
  }
}
