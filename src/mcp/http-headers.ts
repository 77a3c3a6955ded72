import { isRecord } from '../core/json.js';
import { PROTOCOL_VERSION_KEY } from './era.js';
import { errorResponse, RpcCodes, type JsonRpcErrorResponse, type RequestId } from '../core/json-rpc.js';
import { isModernVersion, isServedLegacy, LEGACY_VERSIONS } from './protocol-versions.js';

/** The standard MCP request headers of one Streamable HTTP POST, as received (any may be absent). */
export interface McpRequestHeaders {
  /** `MCP-Protocol-Version` */
  protocolVersion?: string | undefined;
  /** `Mcp-Method` */
  method?: string | undefined;
  /** `Mcp-Name` */
  name?: string | undefined;
}

/**
 * The methods whose `Mcp-Name` header mirrors a body field (2026-07-28, "Standard Request
 * Headers"; the tasks extension adds its methods, so a load balancer can route a task's requests
 * to the replica that holds it).
 */
const NAME_SOURCE: Readonly<Record<string, 'name' | 'uri' | 'taskId'>> = {
  'tools/call': 'name',
  'prompts/get': 'name',
  'resources/read': 'uri',
  'tasks/get': 'taskId',
  'tasks/update': 'taskId',
  'tasks/cancel': 'taskId',
};

/**
 * The Streamable HTTP server validation of 2026-07-28: a request of the stateless revision must
 * carry `MCP-Protocol-Version`, `Mcp-Method` and (for `tools/call` and the tasks methods) `Mcp-Name`, and their values
 * must match the body, so a proxy that routes on the headers and the server that reads the body
 * cannot be told two different things. Returns the HeaderMismatch error (-32020, answered with
 * 400) or `undefined`. Legacy requests (no `_meta` version and no stateless-revision header) are
 * never checked: those revisions did not define the headers. The protocol version itself is
 * compared with `_meta` by the dispatcher, which gets the header as `protocolVersion`.
 * `Mcp-Param-*` headers are not checked: no tool here declares `x-mcp-header`.
 */
export function checkStandardHeaders(message: unknown, headers: McpRequestHeaders): JsonRpcErrorResponse | undefined {
  if (!isRecord(message) || typeof message['method'] !== 'string') return undefined;
  const id = message['id'];
  if (typeof id !== 'string' && typeof id !== 'number') return undefined;
  const method = message['method'];
  const params = isRecord(message['params']) ? message['params'] : undefined;
  const meta = params?.['_meta'];
  const claimed = isRecord(meta) ? meta[PROTOCOL_VERSION_KEY] : undefined;
  const declared = trimOws(headers.protocolVersion);
  const modern = (typeof claimed === 'string' && isModernVersion(claimed)) || (declared !== undefined && isModernVersion(declared));
  if (!modern) return undefined;
  if (declared === undefined) return mismatch(id, 'the required MCP-Protocol-Version header is missing');
  const methodHeader = trimOws(headers.method);
  if (methodHeader === undefined) return mismatch(id, `the body names method ${method} but the required Mcp-Method header is missing`);
  if (methodHeader !== method) return mismatch(id, `the Mcp-Method header names ${methodHeader} but the body names ${method}`);
  const field = Object.hasOwn(NAME_SOURCE, method) ? NAME_SOURCE[method] : undefined;
  const bodyName = field ? params?.[field] : undefined;
  if (typeof bodyName !== 'string') return undefined;
  const nameHeader = trimOws(headers.name);
  if (nameHeader === undefined) return mismatch(id, `the body names ${field} "${bodyName}" but the required Mcp-Name header is missing`);
  const decoded = decodeHeaderValue(nameHeader);
  if (decoded === undefined) return mismatch(id, 'the Mcp-Name header holds an invalid =?base64?...?= value');
  if (decoded !== bodyName) return mismatch(id, `the Mcp-Name header names "${decoded}" but the body names "${bodyName}"`);
  return undefined;
}

/** How a GET to the MCP endpoint is answered when it opens no stream: its status, and for 400 and 406 the error. */
export type StreamRequestRefusal = { status: 405 } | { status: 400 | 406; error: JsonRpcErrorResponse };

/**
 * Whether a GET may open the standalone stream of the 2025 revisions (2025-03-26 to 2025-11-25),
 * on which the server sends what concerns no request of the client (here: tool-list changes).
 * 2026-07-28 removed that stream (a client subscribes with `subscriptions/listen`), so a GET of
 * that revision is 405, as every GET is when the server has nothing to send (`live` false); an
 * unknown revision is 400 (the 2025 revisions require it) and a client that does not take an
 * event stream is 406. The errors name no request: there is none.
 */
export function checkStreamRequest(
  headers: { protocolVersion?: string | undefined; accept?: string | undefined },
  live: boolean,
): StreamRequestRefusal | undefined {
  const declared = trimOws(headers.protocolVersion);
  if (!live || (declared !== undefined && isModernVersion(declared))) return { status: 405 };
  if (declared !== undefined && !isServedLegacy(declared)) {
    return {
      status: 400,
      error: errorResponse(null, RpcCodes.UNSUPPORTED_PROTOCOL_VERSION, 'Unsupported protocol version', {
        supported: [...LEGACY_VERSIONS],
        requested: declared,
      }),
    };
  }
  if (headers.accept === undefined || !headers.accept.includes('text/event-stream')) {
    return {
      status: 406,
      error: errorResponse(null, RpcCodes.INVALID_REQUEST, 'Not Acceptable: GET /mcp opens an event stream; the Accept header must list text/event-stream'),
    };
  }
  return undefined;
}

/**
 * A header value as the client meant it: values that are not plain visible ASCII travel as
 * `=?base64?<UTF-8 as Base64>?=`. Returns `undefined` for a sentinel whose Base64 is not valid.
 */
export function decodeHeaderValue(value: string): string | undefined {
  if (!value.startsWith('=?base64?') || !value.endsWith('?=') || value.length < 11) return value;
  const encoded = value.slice(9, -2);
  if (encoded.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(encoded)) return undefined;
  const bytes = Buffer.from(encoded, 'base64');
  const text = bytes.toString('utf8');
  // Refuse bytes that are not UTF-8: they would decode to replacement characters and could match nothing.
  return Buffer.from(text, 'utf8').equals(bytes) ? text : undefined;
}

/** RFC 9110 optional whitespace (spaces, tabs) around a field value is not part of it. */
function trimOws(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  // A loop, not /[ \t]+$/: that regular expression is quadratic on a long run of spaces.
  let start = 0;
  let end = value.length;
  while (start < end && (value[start] === ' ' || value[start] === '\t')) start++;
  while (end > start && (value[end - 1] === ' ' || value[end - 1] === '\t')) end--;
  return start === 0 && end === value.length ? value : value.slice(start, end);
}

function mismatch(id: RequestId, why: string): JsonRpcErrorResponse {
  return errorResponse(id, RpcCodes.HEADER_MISMATCH, `Header mismatch: ${why}`);
}
