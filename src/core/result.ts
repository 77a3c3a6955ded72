import { AUDIO_MEDIA_TYPE_PATTERN, IMAGE_MEDIA_TYPE_PATTERN } from './schemas.js';
import type { ContentAnnotations, ContentBlock, ErrorResult, ResourceBlock, ResourceLinkBlock, TextBlock, ToolResult } from './types.js';

/** A result holding one text block. */
export function textResult(text: string, isError = false): ToolResult & { isError: boolean } {
  return { content: [{ type: 'text', text }], isError };
}

/** A result a model reads as a failure of the call. */
export function errorResult(text: string): ErrorResult {
  return { content: [{ type: 'text', text }], isError: true };
}

/**
 * Checks what a tool returned and copies it into a clean `ToolResult` with `isError` always set.
 * Returns a description of the defect instead when it is not a well-formed result.
 * `structuredContent` is copied through its JSON text, so the copy is exactly what goes on the
 * wire (and what the output schema is checked against); a value JSON cannot carry is a defect.
 */
export function normaliseResult(value: unknown): { result: ToolResult & { isError: boolean } } | { defect: string } {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return { defect: `expected an object with a content array, got ${describe(value)}` };
  }
  const { content, isError, structuredContent } = value as { content?: unknown; isError?: unknown; structuredContent?: unknown };
  if (!Array.isArray(content)) return { defect: `expected a content array, got ${describe(content)}` };
  if (isError !== undefined && typeof isError !== 'boolean') {
    return { defect: `expected isError to be a boolean, got ${describe(isError)}` };
  }
  const blocks: ContentBlock[] = [];
  for (const [i, block] of content.entries()) {
    const copy = copyContentBlock(block);
    if (typeof copy === 'string') return { defect: `content[${i}] ${copy}` };
    blocks.push(copy);
  }
  const result: ToolResult & { isError: boolean } = { content: blocks, isError: isError === true };
  if (structuredContent !== undefined) {
    const copy = copyStructuredContent(structuredContent);
    if (typeof copy === 'string') return { defect: copy };
    result.structuredContent = copy;
  }
  return { result };
}

/** Most levels of objects and arrays structuredContent may nest. */
const MAX_STRUCTURED_DEPTH = 256;

/** Whether `value`, parsed JSON (so without cycles), nests objects and arrays deeper than `limit` levels; walked without recursion. */
function nestsDeeperThan(value: object, limit: number): boolean {
  const pending: Array<[unknown, number]> = [[value, 1]];
  while (pending.length > 0) {
    const [node, depth] = pending.pop()!;
    if (typeof node !== 'object' || node === null) continue;
    if (depth > limit) return true;
    for (const child of Array.isArray(node) ? node : Object.values(node)) if (typeof child === 'object' && child !== null) pending.push([child, depth + 1]);
  }
  return false;
}

// The JSON text of each structuredContent the pipeline copied: made once, by the copy, and read
// again for the text block and the size of the result.
const structuredTexts = new WeakMap<object, string>();

/**
 * `structuredContent` copied through its JSON text, or why it cannot be: not an object, not JSON,
 * or nested deeper than 256 levels.
 */
export function copyStructuredContent(value: unknown): Record<string, unknown> | string {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return `expected structuredContent to be an object, got ${describe(value)}`;
  let text: string;
  let copy: unknown;
  try {
    text = JSON.stringify(value);
    copy = JSON.parse(text);
  } catch (err) {
    // A cycle, a BigInt, a getter that throws, or nesting too deep for the stack.
    const reason = err instanceof Error ? err.message.split('\n')[0] : String(err);
    return `structuredContent is not JSON: ${reason}`;
  }
  // A toJSON method can turn the object into something else.
  if (typeof copy !== 'object' || copy === null || Array.isArray(copy)) return `expected structuredContent to be an object, got ${describe(copy)} as JSON`;
  // Whether JSON.stringify overflows the stack first depends on the engine (Node 26 takes 100,000
  // levels); what reads the copy next (validation, a client's parser) may not, so the bound is ours.
  if (nestsDeeperThan(copy, MAX_STRUCTURED_DEPTH)) return `structuredContent nests deeper than ${MAX_STRUCTURED_DEPTH} levels`;
  structuredTexts.set(copy, text);
  return copy as Record<string, unknown>;
}

/** `structuredContent` as JSON text: the text made when the pipeline copied it, or made now. */
export function structuredText(structured: Record<string, unknown>): string {
  return structuredTexts.get(structured) ?? JSON.stringify(structured);
}

/**
 * The content for a reader that does not read `structuredContent` (a model, an older MCP client):
 * the result's own blocks and, when the result has structured content but no text block with
 * anything but white space in it, a text block holding that structured content as JSON, as the
 * MCP specification advises for compatibility. A tool that writes its own text keeps it alone,
 * so its output does not reach a model twice. The same array when nothing is added.
 */
export function readableContent(result: ToolResult): ContentBlock[] {
  const structured = result.structuredContent;
  if (structured === undefined) return result.content;
  for (const block of result.content) if (block.type === 'text' && block.text.trim() !== '') return result.content;
  const json: TextBlock = { type: 'text', text: structuredText(structured) };
  return [...result.content, json];
}

const IMAGE_MEDIA_TYPE = new RegExp(IMAGE_MEDIA_TYPE_PATTERN);
const AUDIO_MEDIA_TYPE = new RegExp(AUDIO_MEDIA_TYPE_PATTERN);

/**
 * A content block copied key by key into its clean shape, or what is wrong with it, worded to
 * follow `content[i] ` ("is a text block without a string text"). Base64 data is taken as it is:
 * checking it would cost every image its length again, and a tool's own data is its own.
 */
export function copyContentBlock(block: unknown): ContentBlock | string {
  if (typeof block !== 'object' || block === null) return `must be an object, got ${describe(block)}`;
  const b = block as Record<string, unknown>;
  const copy = copyByType(b);
  if (typeof copy === 'string' || b.annotations === undefined) return copy;
  const annotations = copyAnnotations(b.annotations);
  if (typeof annotations === 'string') return `has annotations ${annotations}`;
  copy.annotations = annotations;
  return copy;
}

function copyByType(b: Record<string, unknown>): ContentBlock | string {
  switch (b.type) {
    case 'text':
      return typeof b.text === 'string' ? { type: 'text', text: b.text } : 'is a text block without a string text';
    case 'image': {
      const source = copyBase64Source(b.source, IMAGE_MEDIA_TYPE);
      return source ? { type: 'image', source } : 'is an image block without a base64 source of an image/* media type';
    }
    case 'audio': {
      const source = copyBase64Source(b.source, AUDIO_MEDIA_TYPE);
      return source ? { type: 'audio', source } : 'is an audio block without a base64 source of an audio/* media type';
    }
    case 'resource': {
      const resource = copyResourceContents(b.resource);
      return resource ? { type: 'resource', resource } : 'is a resource block without a resource {uri, mimeType?, text or blob} of strings';
    }
    case 'resource_link':
      return copyResourceLink(b);
    default:
      return `has unknown type ${typeof b.type === 'string' ? JSON.stringify(b.type.length > 64 ? `${b.type.slice(0, 64)}...` : b.type) : describe(b.type)}`;
  }
}

function copyBase64Source(value: unknown, mediaType: RegExp): { type: 'base64'; media_type: string; data: string } | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const { type, media_type, data } = value as Record<string, unknown>;
  if (type !== 'base64' || typeof data !== 'string' || typeof media_type !== 'string' || !mediaType.test(media_type)) return undefined;
  return { type, media_type, data };
}

function copyResourceContents(value: unknown): ResourceBlock['resource'] | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const { uri, mimeType, text, blob } = value as Record<string, unknown>;
  if (typeof uri !== 'string' || (mimeType !== undefined && typeof mimeType !== 'string')) return undefined;
  const type = mimeType === undefined ? {} : { mimeType };
  if (typeof text === 'string' && blob === undefined) return { uri, ...type, text };
  if (typeof blob === 'string' && text === undefined) return { uri, ...type, blob };
  return undefined;
}

function copyResourceLink(b: Record<string, unknown>): ContentBlock | string {
  for (const key of ['uri', 'name'] as const) if (typeof b[key] !== 'string') return `is a resource_link block without a string ${key}`;
  const copy: ResourceLinkBlock = { type: 'resource_link', uri: b.uri as string, name: b.name as string };
  for (const key of ['title', 'description', 'mimeType'] as const) {
    const value = b[key];
    if (value === undefined) continue;
    if (typeof value !== 'string') return `is a resource_link block whose ${key} is not a string`;
    copy[key] = value;
  }
  if (b.size !== undefined) {
    if (!Number.isSafeInteger(b.size) || (b.size as number) < 0) return 'is a resource_link block whose size is not a whole number of bytes';
    copy.size = b.size as number;
  }
  return copy;
}

/** MCP's annotations of a block copied key by key, or what is wrong with them ("whose priority is ..."). */
export function copyAnnotations(value: unknown): ContentAnnotations | string {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return `that are not an object but ${describe(value)}`;
  const { audience, priority, lastModified } = value as { audience?: unknown; priority?: unknown; lastModified?: unknown };
  const copy: ContentAnnotations = {};
  if (audience !== undefined) {
    if (!Array.isArray(audience) || !audience.every((role) => role === 'user' || role === 'assistant')) {
      return 'whose audience is not a list of "user" and "assistant"';
    }
    copy.audience = [...(audience as Array<'user' | 'assistant'>)];
  }
  if (priority !== undefined) {
    if (typeof priority !== 'number' || !(priority >= 0 && priority <= 1)) return 'whose priority is not a number from 0 to 1';
    copy.priority = priority;
  }
  if (lastModified !== undefined) {
    if (typeof lastModified !== 'string') return 'whose lastModified is not a string';
    copy.lastModified = lastModified;
  }
  return copy;
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'string') return `a string`;
  if (typeof value === 'object') return 'an object';
  return String(value === undefined ? 'undefined' : typeof value);
}

/** Why a call was cancelled, in words a model can read, from an abort signal's reason. */
export function describeAbortReason(reason: unknown): string {
  if (reason instanceof Error) return reason.message || reason.name;
  if (typeof reason === 'string' && reason !== '') return reason;
  return 'the call was cancelled';
}

/** Roughly how many bytes a result takes once serialised: its texts, base64 data and structured content, and a little per block. */
export function resultSize(result: ToolResult): number {
  let bytes = 32;
  for (const block of result.content) bytes += 32 + blockSize(block);
  // Counted once: it goes out once, as its own field or as the text block readableContent adds.
  if (result.structuredContent !== undefined) bytes += 32 + structuredText(result.structuredContent).length;
  return bytes;
}

function blockSize(block: ContentBlock): number {
  switch (block.type) {
    case 'text':
      return block.text.length;
    case 'image':
    case 'audio':
      return block.source.data.length;
    case 'resource': {
      const r = block.resource;
      return r.uri.length + ('text' in r ? r.text.length : r.blob.length);
    }
    case 'resource_link':
      return block.uri.length + block.name.length + (block.title?.length ?? 0) + (block.description?.length ?? 0);
  }
}
