// Characters that change how a line of output reads rather than what it says: control characters
// (C0, DEL, C1: a newline would start a line that looks like another entry), format characters
// (the bidi overrides such as U+202E, which reorder what follows, zero-width characters), and
// U+2028/U+2029, which some readers take for line breaks.
const UNSAFE = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}]/u;
const UNSAFE_ALL = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}]/gu;

const hex = (c: string): string => Array.from({ length: c.length }, (_, i) => `\\u${c.charCodeAt(i).toString(16).padStart(4, '0')}`).join('');

/**
 * A file name or path as a listing shows it: as it is, unless it could be misread, and then as a
 * JSON string (in double quotes, with escapes), which JSON.parse turns back into the exact name.
 * Quoted are names that hold control, format or line-separator characters, that start with a
 * double quote (so a plain name never looks quoted) or start or end with white space, and names
 * that hold `separator`, text the listing itself puts between names (LS's " -> ").
 */
export function displayName(name: string, separator?: string): string {
  const plain = !UNSAFE.test(name) && !name.startsWith('"') && name.trim() === name && (separator === undefined || !name.includes(separator));
  // JSON.stringify escapes C0 controls, quotes and backslashes; the rest of UNSAFE is escaped here.
  return plain ? name : JSON.stringify(name).replace(UNSAFE_ALL, hex);
}

/** The rule, as tool descriptions say it. */
export const QUOTED_NAMES =
  'Names and paths that hold control characters (such as a newline) or invisible formatting characters (such as bidirectional overrides), that start with a double quote, or that start or end with white space are shown as JSON strings, in double quotes with backslash escapes; decode them to get the real name.';
