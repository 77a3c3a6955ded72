import type { CallToolResult, ContentBlock as McpContentBlock } from '@modelcontextprotocol/server';
import { readableContent } from '../core/result.js';
import type { ToolResult } from '../core/types.js';

/**
 * Turns toolport's content blocks (the Anthropic API's shape) into MCP content blocks. Text is the
 * same in both. MCP's image block is `{type: 'image', data, mimeType}` where Anthropic's is
 * `{type: 'image', source: {type: 'base64', media_type, data}}`. A block of any other shape passes
 * through unchanged (the gateway normalises results, so none is expected).
 */
export function toMcpContent(blocks: ToolResult['content']): McpContentBlock[] {
  const out: McpContentBlock[] = new Array(blocks.length);
  for (let i = 0; i < blocks.length; i++) {
    const block = blocks[i]!;
    if (block.type === 'text') {
      out[i] = { type: 'text', text: block.text };
    } else if (block.type === 'image' && block.source?.type === 'base64') {
      out[i] = { type: 'image', data: block.source.data, mimeType: block.source.media_type };
    } else {
      out[i] = block as unknown as McpContentBlock;
    }
  }
  return out;
}

/**
 * A ToolResult as an MCP `CallToolResult`: content converted, `isError` always present (a tool's
 * own failure stays a result the model can read, as every revision wants). `structuredContent`
 * passes through when a tool returns one, and the content then holds it as JSON text when the
 * tool wrote no text of its own (`readableContent`), for clients that do not read it.
 * `structured` false leaves the field out, for revisions before 2025-06-18, which lack it.
 */
export function toMcpCallResult(result: ToolResult, structured = true): CallToolResult {
  const out: CallToolResult = { content: toMcpContent(readableContent(result)), isError: result.isError === true };
  if (structured && result.structuredContent !== undefined) out.structuredContent = result.structuredContent;
  return out;
}
