import type { ContentBlock, ToolResult } from './types.js';

const IMAGE_TYPES = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp']);

/** A result holding one text block. */
export function textResult(text: string, isError = false): ToolResult & { isError: boolean } {
  return { content: [{ type: 'text', text }], isError };
}

/** A result a model reads as a failure of the call. */
export function errorResult(text: string): ToolResult & { isError: true } {
  return { content: [{ type: 'text', text }], isError: true };
}

/**
 * Checks what a tool returned and copies it into a clean `ToolResult` with `isError` always set.
 * Returns a description of the defect instead when it is not a well-formed result.
 */
export function normaliseResult(value: unknown): { result: ToolResult & { isError: boolean } } | { defect: string } {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return { defect: `expected an object with a content array, got ${describe(value)}` };
  }
  const { content, isError } = value as { content?: unknown; isError?: unknown };
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
  return { result: { content: blocks, isError: isError === true } };
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

/** Roughly how many bytes a result takes once serialised: its texts and image data, and a little per block. */
export function resultSize(result: ToolResult): number {
  let bytes = 32;
  for (const block of result.content) bytes += 32 + (block.type === 'text' ? block.text.length : block.source.data.length);
  return bytes;
}
