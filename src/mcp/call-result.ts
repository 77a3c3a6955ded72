import { resultResponse, type JsonRpcRequest } from '../core/json-rpc.js';
import type { ToolResult } from '../core/types.js';
import { toMCPCallToolResult, type MCPContentKinds } from '../providers/results.js';
import type { McpErrorBody } from './backend.js';
import type { DispatchOutcome } from './dispatcher.js';
import { inputErrorsAreToolResults, toolFieldsOf } from './protocol-versions.js';
import { methodError, refusalRpcCode } from './rpc-errors.js';
import type { ToolsCallDeps } from './tools-call.js';

/** A tool's result as a revision's CallToolResult. */
export function callToolResult(outcome: ToolResult, version: string): Record<string, unknown> {
  const result: Record<string, unknown> = toMCPCallToolResult(outcome, contentKindsOf(version));
  // structuredContent arrived with outputSchema (2025-06-18); earlier revisions get the content only.
  if (result['structuredContent'] !== undefined && !toolFieldsOf(version).titleAndOutput) delete result['structuredContent'];
  return result;
}

/** Audio content arrived in revision 2025-03-26, resource links in 2025-06-18: a client of an earlier one may refuse a result that holds them. */
function contentKindsOf(version: string): MCPContentKinds {
  return { audio: version >= '2025-03-26', resourceLinks: version >= '2025-06-18' };
}

/** A refused call: a JSON-RPC error, except invalid input from 2025-11-25 on (a tool error result). */
export function refusal<Caller>(deps: ToolsCallDeps<Caller>, request: JsonRpcRequest, body: McpErrorBody, version: string, modern: boolean): DispatchOutcome {
  const { code, message, details } = body.error;
  if (code === 'INVALID_INPUT' && inputErrorsAreToolResults(version)) {
    const result: Record<string, unknown> = { content: body.content.map((block) => ({ type: 'text', text: block.text })), isError: true };
    if (modern) {
      result['resultType'] = 'complete';
      result['_meta'] = deps.resultMeta;
    }
    return { reply: resultResponse(request.id, result), status: 200 };
  }
  const rpcCode = refusalRpcCode(deps.backend.rpcCodeOf?.(code), code);
  return methodError(request, rpcCode, message, details === undefined ? { code } : { code, details });
}
