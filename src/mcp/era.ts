import { isRecord } from '../core/json.js';
import { errorResponse, RpcCodes, type JsonRpcErrorResponse, type JsonRpcRequest } from '../core/json-rpc.js';
import { DEFAULT_LEGACY_VERSION, isModernVersion, isServedLegacy, isServedModern, LEGACY_VERSIONS, MODERN_VERSIONS } from './protocol-versions.js';

export const PROTOCOL_VERSION_KEY = 'io.modelcontextprotocol/protocolVersion';
export const CLIENT_CAPABILITIES_KEY = 'io.modelcontextprotocol/clientCapabilities';
export const SERVER_INFO_KEY = 'io.modelcontextprotocol/serverInfo';
/** The `_meta` key of every message on a `subscriptions/listen` stream: the listen request's id. */
export const SUBSCRIPTION_ID_KEY = 'io.modelcontextprotocol/subscriptionId';

/** The revision one request is served under, or why it is refused before any method runs. */
export type Era = { modern: boolean; version: string } | { refused: JsonRpcErrorResponse };

/**
 * Decides the revision of one request, body first, as the SDK's dual-era entry does: a request
 * whose `_meta` names a protocol version (the stateless revisions' envelope) is served in that
 * revision; `initialize` is the legacy handshake unless such an envelope names a modern revision;
 * any other request is legacy, in the revision the transport declares (HTTP's
 * `MCP-Protocol-Version` header, or what a stdio client agreed in `initialize`), else 2025-03-26.
 * The transport's version is a cross-check only: when it disagrees with the body, the request is
 * refused with HeaderMismatch (-32020); when it names a stateless revision and the body carries no
 * envelope, with invalid params (-32602), since the envelope's fields are required there.
 */
export function eraOf(request: JsonRpcRequest, declared: string | undefined): Era {
  const meta = request.params?.['_meta'];
  const envelope = isRecord(meta) && Object.hasOwn(meta, PROTOCOL_VERSION_KEY) ? meta : undefined;
  if (request.method === 'initialize' && !validModernEnvelope(envelope)) {
    if (declared !== undefined && isModernVersion(declared)) {
      return refuse(request, RpcCodes.HEADER_MISMATCH, `Header mismatch: initialize (the legacy handshake) was sent with protocol version ${declared}`);
    }
    return { modern: false, version: declared ?? DEFAULT_LEGACY_VERSION };
  }
  if (envelope) {
    const claimed = envelope[PROTOCOL_VERSION_KEY];
    if (typeof claimed !== 'string') {
      return refuse(request, RpcCodes.INVALID_PARAMS, `Invalid params: _meta["${PROTOCOL_VERSION_KEY}"] must be a string`);
    }
    if (declared !== undefined && declared !== claimed) {
      return refuse(request, RpcCodes.HEADER_MISMATCH, `Header mismatch: the MCP-Protocol-Version header names ${declared} but _meta names ${claimed}`);
    }
    if (isServedModern(claimed)) {
      if (!isRecord(envelope[CLIENT_CAPABILITIES_KEY])) {
        return refuse(request, RpcCodes.INVALID_PARAMS, `Invalid params: _meta["${CLIENT_CAPABILITIES_KEY}"] must be an object`, {
          missing: [CLIENT_CAPABILITIES_KEY],
        });
      }
      return { modern: true, version: claimed };
    }
    if (isServedLegacy(claimed)) return { modern: false, version: claimed };
    return unsupported(request, claimed);
  }
  if (declared === undefined) return { modern: false, version: DEFAULT_LEGACY_VERSION };
  if (isModernVersion(declared)) {
    return refuse(
      request,
      RpcCodes.INVALID_PARAMS,
      `Invalid params: protocol version ${declared} requires _meta["${PROTOCOL_VERSION_KEY}"] and _meta["${CLIENT_CAPABILITIES_KEY}"] on every request`,
      { missing: isRecord(meta) ? [PROTOCOL_VERSION_KEY] : ['_meta'] },
    );
  }
  return isServedLegacy(declared) ? { modern: false, version: declared } : unsupported(request, declared);
}

function validModernEnvelope(envelope: Record<string, unknown> | undefined): boolean {
  const claimed = envelope?.[PROTOCOL_VERSION_KEY];
  return typeof claimed === 'string' && isServedModern(claimed) && isRecord(envelope?.[CLIENT_CAPABILITIES_KEY]);
}

/** UnsupportedProtocolVersionError, listing the served revisions of the era the client asked in. */
function unsupported(request: JsonRpcRequest, requested: string): Era {
  const supported = isModernVersion(requested) ? MODERN_VERSIONS : LEGACY_VERSIONS;
  return refuse(request, RpcCodes.UNSUPPORTED_PROTOCOL_VERSION, 'Unsupported protocol version', {
    supported: [...supported],
    requested,
  });
}

function refuse(request: JsonRpcRequest, code: number, message: string, data?: unknown): Era {
  return { refused: errorResponse(request.id, code, message, data) };
}
