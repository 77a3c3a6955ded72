import { unsupported, type Cursor, type LexedWord } from './lexer.js';
import type { Redirect } from './parser.js';

interface HereDocument {
  readonly delimiter: string;
  readonly stripTabs: boolean;
  readonly quoted: boolean;
}

/**
 * The here-documents of a line, as bash reads them: opened by `<<` or `<<-` on a line, their
 * bodies are the lines after the next newline token, each up to its delimiter (or the end of the
 * line given, as bash reads a missing one). A body is plain text only when the delimiter is quoted
 * or the body holds no `$`, backquote or backslash; any other is refused.
 */
export class HereDocuments {
  private readonly pending: HereDocument[] = [];

  /** A here-document opened with `word` as its delimiter. */
  open(operator: string, word: LexedWord): Redirect {
    if (word.value === undefined || /[$`]/.test(word.raw)) unsupported(`a here-document delimiter that is not literal (${word.text})`);
    this.pending.push({ delimiter: word.value, stripTabs: operator === '<<-', quoted: /['"\\]/.test(word.raw) });
    return { operator, target: { text: word.text, value: undefined }, access: 'text' };
  }

  /** Reads the bodies of the here-documents opened so far, from just after a newline token. */
  readBodies(cursor: Cursor): void {
    const source = cursor.source;
    for (const document of this.pending.splice(0)) {
      while (cursor.i < source.length) {
        const end = source.indexOf('\n', cursor.i);
        const line = source.slice(cursor.i, end < 0 ? source.length : end);
        cursor.i = end < 0 ? source.length : end + 1;
        if ((document.stripTabs ? line.replace(/^\t+/, '') : line) === document.delimiter) break;
        if (!document.quoted && /[$`\\]/.test(line)) {
          unsupported(`a here-document whose body bash expands (quote its delimiter: <<'${document.delimiter}')`);
        }
      }
    }
  }
}
