import type { ContentBlock, ErrorResult, TextBlock, ToolResult } from './types.js';

const IMAGE_TYPES = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp']);

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
    const copy = copyBlock(block);
    if (typeof copy === 'string') return { defect: `content[${i}] ${copy}` };
    blocks.push(copy);
  }
  const result: ToolResult & { isError: boolean } = { content: blocks, isError: isError === true };
  if (structuredContent !== undefined) {
    const copy = copyStructured(structuredContent);
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

function copyStructured(value: unknown): Record<string, unknown> | string {
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

function copyBlock(block: unknown): ContentBlock | string {
  if (typeof block !== 'object' || block === null) return `must be an object, got ${describe(block)}`;
  const b = block as { type?: unknown; text?: unknown; source?: unknown };
  if (b.type === 'text') {
    return typeof b.text === 'string' ? { type: 'text', text: b.text } : 'is a text block without a string text';
  }
  if (b.type === 'image') {
    const s = b.source as { type?: unknown; media_type?: unknown; data?: unknown } | undefined;
    if (s?.type !== 'base64' || typeof s.data !== 'string' || !IMAGE_TYPES.has(s.media_type as string)) {
      return 'is an image block without a base64 source of type png, jpeg, gif or webp';
    }
    const media_type = s.media_type as 'image/png';
    return { type: 'image', source: { type: 'base64', media_type, data: s.data } };
  }
  return `has unknown type ${typeof b.type === 'string' ? JSON.stringify(b.type) : describe(b.type)}`;
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

/** Roughly how many bytes a result takes once serialised: its texts, image data and structured content, and a little per block. */
export function resultSize(result: ToolResult): number {
  let bytes = 32;
  for (const block of result.content) bytes += 32 + (block.type === 'text' ? block.text.length : block.source.data.length);
  // Counted once: it goes out once, as its own field or as the text block readableContent adds.
  if (result.structuredContent !== undefined) bytes += 32 + structuredText(result.structuredContent).length;
  return bytes;
}
