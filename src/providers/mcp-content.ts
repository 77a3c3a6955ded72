import { copyAnnotations, copyContentBlock, copyStructuredContent } from '../core/result.js';
import { AUDIO_MEDIA_TYPE_PATTERN, IMAGE_MEDIA_TYPE_PATTERN } from '../core/schemas.js';
import type { ContentBlock, TextBlock, ToolResult } from '../core/types.js';
import { isRecord } from '../core/json.js';

// An MCP server's `tools/call` result, read into a ToolResult. The server is not trusted to be
// well-formed: nothing it sends makes this throw, and nothing it sent is dropped without a word.
// A block that cannot be carried becomes a text block saying so, where it stood; an optional
// field that is malformed (a title that is a number, annotations with a priority of 7) is left
// out and its block kept. `_meta` (on the result, a block or a resource) is the server's word to
// its own client, this one, and is not passed on; nor are a resource link's `icons`. Sizes are
// the pipeline's to bound, as for any tool.

const IMAGE_MEDIA_TYPE = new RegExp(IMAGE_MEDIA_TYPE_PATTERN);
const AUDIO_MEDIA_TYPE = new RegExp(AUDIO_MEDIA_TYPE_PATTERN);
const NOT_BASE64 = /[^A-Za-z0-9+/=]/;

/**
 * An MCP `CallToolResult` as a ToolResult: each content block in toolport's shape (text, image,
 * audio, resource, resource_link, with their annotations), `structuredContent` when it is a JSON
 * object, and `isError` true only when the result says `true`. A block of an unknown type or a
 * malformed one becomes a text block naming it, as does a `structuredContent` that is not an
 * object; a value that is no result at all becomes an error result. Never throws.
 */
export function fromMCPCallResult(wire: unknown): ToolResult {
  try {
    return readResult(wire);
  } catch (err) {
    // Only an object made in this process (a getter, a proxy) can throw; a parsed message cannot.
    return { content: [note(`the tool's result could not be read: ${err instanceof Error ? err.message : String(err)}`)], isError: true };
  }
}

function readResult(wire: unknown): ToolResult {
  if (!isRecord(wire)) return { content: [note(`the tool's result is not an object but ${describe(wire)}`)], isError: true };
  const content: ContentBlock[] = [];
  if (Array.isArray(wire.content)) for (const [i, block] of wire.content.entries()) content.push(readBlock(block, i));
  else if (wire.content !== undefined) content.push(note(`the tool's content is not a list but ${describe(wire.content)}; left out`));
  const result: ToolResult = { content, isError: wire.isError === true };
  // null carries nothing; some servers write it for "none".
  if (wire.structuredContent !== undefined && wire.structuredContent !== null) {
    const structured = copyStructuredContent(wire.structuredContent);
    if (typeof structured === 'string') content.push(note(`${structured}; structuredContent left out`));
    else result.structuredContent = structured;
  }
  return result;
}

/** One MCP content block in toolport's shape, or a text block that says why it could not be. */
function readBlock(block: unknown, i: number): ContentBlock {
  const shaped = isRecord(block) ? toToolportShape(block) : undefined;
  const copy = typeof shaped === 'string' ? shaped : copyContentBlock(shaped ?? block);
  return typeof copy === 'string' ? note(`content[${i}] ${copy}; left out`) : copy;
}

/** The block in toolport's shape for the core to check, or what is wrong with its base64 data. */
function toToolportShape(block: Record<string, unknown>): Record<string, unknown> | string {
  const annotations = block.annotations === undefined ? undefined : copyAnnotations(block.annotations);
  const kept = typeof annotations === 'object' ? { annotations } : {};
  switch (block.type) {
    case 'image':
    case 'audio': {
      const { type, data, mimeType } = block;
      const kind = type === 'image' ? 'an image' : 'an audio';
      if (typeof data !== 'string') return `is ${kind} block without string data`;
      if (typeof mimeType !== 'string' || !(type === 'image' ? IMAGE_MEDIA_TYPE : AUDIO_MEDIA_TYPE).test(mimeType)) {
        return `is ${kind} block whose mimeType is not an ${type}/* type`;
      }
      if (!isBase64(data)) return `is ${kind} block whose data is not base64`;
      return { type, source: { type: 'base64', media_type: mimeType, data }, ...kept };
    }
    case 'resource': {
      if (!isRecord(block.resource)) return { type: 'resource', resource: block.resource };
      const { uri, mimeType, text, blob } = block.resource;
      if (typeof blob === 'string' && text === undefined && !isBase64(blob)) return 'is a resource block whose blob is not base64';
      const resource = {
        uri,
        ...(typeof mimeType === 'string' ? { mimeType } : {}),
        ...(text !== undefined ? { text } : {}),
        ...(blob !== undefined ? { blob } : {}),
      };
      return { type: 'resource', resource, ...kept };
    }
    case 'resource_link': {
      const { uri, name, title, description, mimeType, size } = block;
      const optional = Object.entries({ title, description, mimeType }).filter(([, value]) => typeof value === 'string');
      const bytes = Number.isSafeInteger(size) && (size as number) >= 0 ? { size } : {};
      return { type: 'resource_link', uri, name, ...Object.fromEntries(optional), ...bytes, ...kept };
    }
    default:
      return { type: block.type, text: block.text, ...kept };
  }
}

/** Whether `data` is base64 as the model providers take it: the standard alphabet, padded, nothing else. */
function isBase64(data: string): boolean {
  if (data.length % 4 !== 0 || NOT_BASE64.test(data)) return false;
  const padding = data.indexOf('=');
  return padding === -1 || padding === data.length - 1 || (padding === data.length - 2 && data.endsWith('='));
}

function note(text: string): TextBlock {
  return { type: 'text', text: `[${text}]` };
}

function describe(value: unknown): string {
  if (value === null || value === undefined) return String(value);
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return 'an object';
  return typeof value === 'string' ? 'a string' : `a ${typeof value}`;
}
