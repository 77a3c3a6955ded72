import { TOOL_NAME } from '../core/registry.js';
import { canonicalJson, digestOf, nestedDeeperThan } from './canonical-json.js';
import type { UpstreamCommon } from './config.js';
import { isRecord } from '../core/json.js';

/** A tool as an upstream lists it (MCP's Tool wire object), untrusted. */
export type WireTool = Record<string, unknown>;

/** A JSON Schema whose root is `type: "object"`, as MCP requires of tool schemas. */
export type ObjectSchemaJson = Record<string, unknown> & { type: 'object' };

/** An upstream tool that passed every check, ready for the registry. */
export interface UpstreamToolDefinition {
  /** The name toolport serves it under: prefix + separator + upstream name. */
  name: string;
  /** The upstream's own name for it (what tools/call sends upstream). */
  upstreamName: string;
  /** The description, or else the title, or else ''. */
  description: string;
  title: string | undefined;
  inputSchema: ObjectSchemaJson;
  outputSchema: ObjectSchemaJson | undefined;
  /** MCP ToolAnnotations: only the known keys, and only with the right types. */
  annotations: Record<string, unknown> | undefined;
  /** SHA-256 (hex) of the canonical JSON of the whole wire object as received: what the lock file pins. */
  digest: string;
  /** The wire object as received, which the lock file keeps so a later change can be shown. */
  wire: WireTool;
}

/** A tool an upstream listed that is not served, and why, in words a log line can carry. */
export interface DefinitionRefusal {
  /** The upstream's name for it, with invisible characters written out; `(entry N)` when it has none. */
  upstreamName: string;
  reason: string;
  /** The entry as listed, when it is an object with a string name: `upstreams diff` shows it, hidden characters written out. */
  wire?: WireTool;
}

/** Bounds on what one upstream may list. */
export const DEFINITION_LIMITS = {
  /** Tools served from one upstream: the largest real servers list a few hundred; past this the rest are refused. */
  tools: 512,
  /** A description is text every model reads on every turn: the longest real ones are a few thousand characters. */
  descriptionChars: 16_384,
  /** A title is a display name. */
  titleChars: 256,
  /** One schema, as canonical JSON: real ones are a few KiB; this keeps tool lists and validators small. */
  schemaBytes: 65_536,
  /** JSON nesting of one schema: each level of properties takes two; real schemas use well under ten. */
  schemaDepth: 32,
  /** The whole wire object (schemas, `_meta`, icons as data URIs), as canonical JSON. */
  definitionBytes: 262_144,
  /** JSON nesting of the whole wire object, checked before anything walks it. */
  definitionDepth: 64,
  /**
   * All the definitions served from one upstream, as canonical JSON: every list and every turn
   * carries them, and compiling them is synchronous (about 250 ms per 64 KiB schema, measured), so
   * a list a hostile upstream changes again and again stalls the server at most that much; past
   * this the rest are refused.
   */
  upstreamBytes: 1024 * 1024,
} as const;

const ANNOTATION_HINTS = ['readOnlyHint', 'destructiveHint', 'idempotentHint', 'openWorldHint'] as const;

/**
 * Characters a person would not see: controls, format characters (zero-width, bidi, tags),
 * private-use and unassigned ones, default-ignorable ones (variation selectors, Hangul fillers,
 * the grapheme joiner), U+2800 (a blank braille cell) and every space. Wherever upstream text
 * meets a person (a log line, `upstreams diff`, the lock file) they are written as escapes.
 */
export const UNSEEN_CHARACTERS = '\\p{C}\\p{Z}\\p{DI}\\u2800';
const NOT_DISPLAYED = new RegExp(`(?! )[${UNSEEN_CHARACTERS}]`, 'gu');
// Control characters, format and default-ignorable characters, unassigned and private ones, and every kind of space.
const INVISIBLE_IN_NAME = /[\p{C}\p{Z}\p{DI}\s]/u;
// What text a person reviews and a model reads may not hold, but where allowedHere says: controls
// other than \n and \t, lone surrogates, private-use characters, and every format or
// default-ignorable character (bidi controls make text read otherwise than it is; tags, variation
// selectors and zero-width characters are invisible yet carry text a model can read: "ASCII smuggling").
const HIDDEN_IN_TEXT = /(?![\n\t])\p{Cc}|[\p{Cf}\p{Cs}\p{Co}\p{DI}]/gu;
const EMOJI = /^\p{Emoji}$/u;
const LETTER = /^\p{L}$/u;
const LETTER_OR_MARK = /^[\p{L}\p{M}]$/u;
const LATIN_OR_COMMON = /^[\p{Script=Latin}\p{Script=Common}\p{Script=Inherited}]$/u;

/**
 * Checks the entries of an upstream's `tools/list` and turns the good ones into definitions
 * served as `prefix + separator + name`. The upstream's `tools` filter applies first (a filtered
 * tool is absent, not refused). A bad entry is refused with a reason, never renamed and never
 * thrown for: a name that is not a non-empty string of visible characters or that breaks
 * {@link TOOL_NAME} once prefixed, a name listed twice (both are refused: which one would a call
 * reach?), a title or description too long or with hidden characters, schemas that are not
 * `type: "object"`, too large or too deep, a string anywhere in a schema (a key too) with hidden
 * characters, and tools past {@link DEFINITION_LIMITS}.tools or past
 * {@link DEFINITION_LIMITS}.upstreamBytes in all. (A schema whose patterns RE2 cannot run is
 * refused when the registry compiles it.)
 */
export function checkDefinitions(
  upstream: Pick<UpstreamCommon, 'name' | 'prefix' | 'separator' | 'tools'>,
  wire: unknown[],
): { tools: UpstreamToolDefinition[]; refused: DefinitionRefusal[] } {
  const refused: DefinitionRefusal[] = [];
  const candidates: Array<{ entry: WireTool; name: string }> = [];
  wire.forEach((entry, i) => {
    if (!isRecord(entry)) refused.push({ upstreamName: `(entry ${i + 1})`, reason: 'is not an object' });
    else if (typeof entry['name'] !== 'string') refused.push({ upstreamName: `(entry ${i + 1})`, reason: 'has no "name" string' });
    else if (isSelected(entry['name'], upstream.tools)) candidates.push({ entry, name: entry['name'] });
  });
  const listed = new Map<string, number>();
  for (const { name } of candidates) listed.set(name, (listed.get(name) ?? 0) + 1);

  const tools: UpstreamToolDefinition[] = [];
  let bytes = 0;
  let full = false;
  for (const { entry, name } of candidates) {
    const times = listed.get(name)!;
    const checked = times > 1 ? `is listed ${times} times, so which one a call reaches is unknown` : (nameProblem(name, upstream) ?? definitionProblem(entry));
    const refuse = (reason: string) => refused.push({ upstreamName: printable(name), reason, wire: entry });
    if (typeof checked === 'string') refuse(checked);
    else if (tools.length >= DEFINITION_LIMITS.tools) refuse(`is past the ${DEFINITION_LIMITS.tools} tools one upstream may have`);
    // Once one does not fit, neither do the rest: which tools are served stays a matter of list order, not of size.
    else if (full || bytes + checked.bytes > DEFINITION_LIMITS.upstreamBytes) {
      full = true;
      refuse(`is past the ${DEFINITION_LIMITS.upstreamBytes / 1024 / 1024} MiB of definitions one upstream may have`);
    } else {
      bytes += checked.bytes;
      tools.push(definitionOf(entry, name, upstream));
    }
  }
  return { tools, refused };
}

/** The name `name` of `upstream` is served under. */
export function servedName(upstream: Pick<UpstreamCommon, 'prefix' | 'separator'>, name: string): string {
  return upstream.prefix === '' ? name : `${upstream.prefix}${upstream.separator}${name}`;
}

/**
 * Untrusted text made fit for a log line or a terminal: each of {@link UNSEEN_CHARACTERS} but
 * U+0020 written as `\u{…}` (a variation selector too), and cut to `maxChars` characters with `…`.
 */
export function printable(text: string, maxChars = 120): string {
  const chars = [...text];
  const shown = chars
    .slice(0, maxChars)
    .join('')
    .replace(NOT_DISPLAYED, (c) => `\\u{${c.codePointAt(0)!.toString(16).toUpperCase()}}`);
  return chars.length > maxChars ? `${shown}…` : shown;
}

function isSelected(name: string, filter: UpstreamCommon['tools']): boolean {
  if (filter?.include !== undefined && !filter.include.includes(name)) return false;
  return !(filter?.exclude ?? []).includes(name);
}

function nameProblem(name: string, upstream: Pick<UpstreamCommon, 'prefix' | 'separator'>): string | undefined {
  if (name === '') return 'has an empty name';
  const hidden = INVISIBLE_IN_NAME.exec(name);
  if (hidden !== null) return `has a name with the invisible, control or space character ${where(name, hidden.index)}`;
  const served = servedName(upstream, name);
  if (TOOL_NAME.test(served)) return undefined;
  const why = served.length > 64 ? `${served.length} characters, more than 64` : 'characters other than letters, digits, _ and -';
  return `would be served as "${printable(served)}", which breaks the tool-name rule ^[a-zA-Z0-9_-]{1,64}$ (${why}); it is not renamed`;
}

/** What is wrong with a definition, or else the size of its canonical JSON. */
function definitionProblem(entry: WireTool): string | { bytes: number } {
  if (nestedDeeperThan(entry, DEFINITION_LIMITS.definitionDepth)) return `is nested more than ${DEFINITION_LIMITS.definitionDepth} levels deep`;
  const bytes = Buffer.byteLength(canonicalJson(entry));
  if (bytes > DEFINITION_LIMITS.definitionBytes) return `is larger than ${DEFINITION_LIMITS.definitionBytes / 1024} KiB`;
  const annotations = isRecord(entry['annotations']) ? entry['annotations'] : {};
  const problem =
    textProblem('"title"', entry['title'], DEFINITION_LIMITS.titleChars) ??
    textProblem('"annotations.title"', annotations['title'], DEFINITION_LIMITS.titleChars) ??
    textProblem('"description"', entry['description'], DEFINITION_LIMITS.descriptionChars) ??
    schemaProblem('inputSchema', entry['inputSchema']) ??
    (entry['outputSchema'] === undefined ? undefined : schemaProblem('outputSchema', entry['outputSchema']));
  return problem ?? { bytes };
}

function textProblem(field: string, text: unknown, maxChars: number): string | undefined {
  if (text === undefined) return undefined;
  if (typeof text !== 'string') return `its ${field} is not a string`;
  if (text.length > maxChars) return `its ${field} is ${text.length} characters long, more than ${maxChars}`;
  const hidden = hiddenIn(text);
  return hidden === undefined ? undefined : `its ${field} holds the hidden or control character ${hidden}`;
}

function schemaProblem(field: 'inputSchema' | 'outputSchema', schema: unknown): string | undefined {
  if (!isRecord(schema)) return `has no "${field}" object (MCP requires a JSON Schema with "type": "object")`;
  if (schema['type'] !== 'object') {
    const type = schema['type'] === undefined ? 'no "type"' : `"type" ${printable(canonicalJson(schema['type']), 40)}`;
    return `has an "${field}" with ${type}; MCP requires "type": "object"`;
  }
  if (nestedDeeperThan(schema, DEFINITION_LIMITS.schemaDepth)) return `has an "${field}" nested more than ${DEFINITION_LIMITS.schemaDepth} levels deep`;
  if (Buffer.byteLength(canonicalJson(schema)) > DEFINITION_LIMITS.schemaBytes) {
    return `has an "${field}" larger than ${DEFINITION_LIMITS.schemaBytes / 1024} KiB`;
  }
  // Its patterns are no risk: a source's schemas compile with a linear-time engine (src/core/linear-regexp.ts).
  return hiddenTextIn(field, schema);
}

/**
 * The first string in `schema`, value or key, with a character {@link HIDDEN_IN_TEXT} refuses,
 * named by its JSON path: a property's description, an enum value or a default reaches a model as
 * surely as the tool's description does. The schema's depth is bounded before this walks it.
 */
function hiddenTextIn(field: string, schema: Record<string, unknown>): string | undefined {
  const pending: Array<[unknown, string]> = [[schema, field]];
  while (pending.length > 0) {
    const [value, at] = pending.pop()!;
    if (typeof value === 'string') {
      const hidden = hiddenIn(value);
      if (hidden !== undefined) return `its ${printable(at, 200)} holds the hidden or control character ${hidden}`;
    } else if (Array.isArray(value)) {
      for (let i = value.length - 1; i >= 0; i--) pending.push([value[i], `${at}[${i}]`]);
    } else if (isRecord(value)) {
      const keys = Object.keys(value);
      for (const key of keys) {
        const hidden = hiddenIn(key);
        if (hidden !== undefined) return `its ${printable(pathOf(at, key), 200)} has a key that holds the hidden or control character ${hidden}`;
      }
      for (const key of keys.reverse()) pending.push([value[key], pathOf(at, key)]);
    }
  }
  return undefined;
}

/**
 * The first character of `text` that {@link HIDDEN_IN_TEXT} refuses where it stands, as
 * `U+FE01 at character 12` (counted in code points from 1), or undefined when there is none.
 */
function hiddenIn(text: string): string | undefined {
  HIDDEN_IN_TEXT.lastIndex = 0;
  for (let found = HIDDEN_IN_TEXT.exec(text); found !== null; found = HIDDEN_IN_TEXT.exec(text)) {
    const end = found.index + found[0].length;
    if (!allowedHere(found[0], codePointBefore(text, found.index), end < text.length ? String.fromCodePoint(text.codePointAt(end)!) : undefined)) {
      return where(text, found.index);
    }
  }
  return undefined;
}

/**
 * The few invisible characters real text needs, where it needs them: a presentation selector
 * (U+FE0E text, U+FE0F emoji) right after an emoji; a zero-width joiner inside an emoji sequence
 * (👩‍💻); a zero-width joiner or non-joiner between letters of a script that shapes with them
 * (Persian, the Indic scripts), never Latin; a soft hyphen between letters. Each carries at
 * most a bit where it stands, where a run of variation selectors or tags carries a message.
 */
function allowedHere(char: string, before: string | undefined, after: string | undefined): boolean {
  if (char === '\uFE0E' || char === '\uFE0F') return before !== undefined && EMOJI.test(before);
  if (before === undefined || after === undefined) return false;
  switch (char) {
    case '\u200D':
      return ((EMOJI.test(before) || before === '\uFE0F') && EMOJI.test(after)) || (shapingLetter(before) && LETTER_OR_MARK.test(after));
    case '\u200C':
      return shapingLetter(before) && LETTER_OR_MARK.test(after);
    case '\u00AD':
      return LETTER.test(before) && LETTER.test(after);
    default:
      return false;
  }
}

function shapingLetter(char: string): boolean {
  return LETTER_OR_MARK.test(char) && !LATIN_OR_COMMON.test(char);
}

/** The code point that ends at `index` of `text`, a surrogate pair whole. */
function codePointBefore(text: string, index: number): string | undefined {
  if (index === 0) return undefined;
  const start = index >= 2 && /[\uD800-\uDBFF][\uDC00-\uDFFF]/.test(text.slice(index - 2, index)) ? index - 2 : index - 1;
  return text.slice(start, index);
}

/** `U+XXXX at character N`: the code point at UTF-16 `index` of `text` and its place, counted in code points from 1. */
function where(text: string, index: number): string {
  let place = 1;
  for (let i = 0; i < index; i += text.codePointAt(i)! > 0xffff ? 2 : 1) place++;
  return `${codePoint(String.fromCodePoint(text.codePointAt(index)!))} at character ${place}`;
}

function pathOf(parent: string, key: string): string {
  return /^[A-Za-z_$][\w$-]*$/.test(key) ? `${parent}.${key}` : `${parent}[${JSON.stringify(key)}]`;
}

function definitionOf(entry: WireTool, name: string, upstream: Pick<UpstreamCommon, 'prefix' | 'separator'>): UpstreamToolDefinition {
  const title = typeof entry['title'] === 'string' ? entry['title'] : undefined;
  const description = typeof entry['description'] === 'string' ? entry['description'] : (title ?? '');
  return {
    name: servedName(upstream, name),
    upstreamName: name,
    description,
    title,
    inputSchema: entry['inputSchema'] as ObjectSchemaJson,
    outputSchema: entry['outputSchema'] as ObjectSchemaJson | undefined,
    annotations: annotationsOf(entry['annotations']),
    digest: digestOf(entry),
    wire: entry,
  };
}

function annotationsOf(value: unknown): Record<string, unknown> | undefined {
  if (!isRecord(value)) return undefined;
  const kept: Record<string, unknown> = {};
  if (typeof value['title'] === 'string') kept['title'] = value['title'];
  for (const hint of ANNOTATION_HINTS) if (typeof value[hint] === 'boolean') kept[hint] = value[hint];
  return Object.keys(kept).length > 0 ? kept : undefined;
}

function codePoint(char: string): string {
  return `U+${char.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`;
}
