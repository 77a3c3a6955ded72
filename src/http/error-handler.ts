import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { errorBody, ToolportError, type ErrorCode } from '../core/errors.js';
import { describeViolations } from '../core/validator.js';
import { UnauthorizedError } from './guards/auth.js';

/**
 * One place turns every error into a response in the error-body shape: the catalog's own errors,
 * the ones Fastify raises (bad JSON, 413, 415, schema violations) and anything unexpected, which
 * becomes a 500 that leaks nothing and is logged with the request id.
 */
export function installErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((err: FastifyError, request, reply) => sendError(reply, knownOrLogged(err, request)));

  app.setNotFoundHandler((request, reply) =>
    sendError(reply, new ToolportError('ROUTE_NOT_FOUND', `Route ${request.method} ${request.url.split('?')[0]} not found.`)),
  );
}

/** What the request's body holds, in words, for the errors about a body that cannot be read. */
export function bodyOf(request: FastifyRequest): string {
  return request.routeOptions.config?.bodyIs ?? 'the tool input';
}

function invalidJson(request: FastifyRequest): ToolportError {
  return new ToolportError(
    'INVALID_JSON',
    `Request body is not valid JSON (or it holds a forbidden __proto__ or constructor.prototype key); send ${bodyOf(request)} as a JSON object.`,
  );
}

/**
 * Answers a refusal: its status, the headers HTTP adds to what the error carries (`Retry-After`
 * from `retryAfterSeconds`, `WWW-Authenticate` for a 401), and the error body.
 */
export function sendError(reply: FastifyReply, err: ToolportError): FastifyReply {
  return setErrorHeaders(reply, err)
    .code(err.statusCode)
    .type('application/json; charset=utf-8')
    .send(errorBody(err.code, err.message, err.details));
}

/** The headers HTTP adds to a refusal: `Retry-After` from `retryAfterSeconds`, `WWW-Authenticate` for a 401. */
export function setErrorHeaders(reply: FastifyReply, err: ToolportError): FastifyReply {
  if (err.retryAfterSeconds !== undefined) reply.header('retry-after', String(err.retryAfterSeconds));
  if (err instanceof UnauthorizedError) reply.header('www-authenticate', err.challenge);
  return reply;
}

/**
 * The refusal the error handler answers an error with: the error itself when it is the catalog's,
 * Fastify's own errors (bad JSON, 413, 415, schema violations) in catalog terms, else a 500.
 */
export function asToolportError(err: FastifyError, request: FastifyRequest): ToolportError {
  return toToolportError(err, request) ?? internalError(request);
}

/** As `asToolportError`, and an unexpected error is logged with the request id (the app's error handler does the same). */
export function knownOrLogged(err: FastifyError, request: FastifyRequest): ToolportError {
  const known = toToolportError(err, request);
  if (known) return known;
  request.log.error({ err }, 'unexpected error');
  return internalError(request);
}

function internalError(request: FastifyRequest): ToolportError {
  return new ToolportError('INTERNAL_ERROR', `Internal server error (request id ${request.id}).`);
}

function toToolportError(err: FastifyError, request: FastifyRequest): ToolportError | undefined {
  if (err instanceof ToolportError) return err;
  if (err.validation) {
    const violations = describeViolations(err.validation as Parameters<typeof describeViolations>[0]);
    const part = err.validationContext ?? 'request';
    const code: ErrorCode = part === 'querystring' ? 'INVALID_QUERY' : 'BAD_REQUEST';
    const lines = violations.map((v) => `- ${v.path}: ${v.message}`).join('\n');
    return new ToolportError(code, `Invalid ${part}:\n${lines}`, { violations });
  }
  switch (err.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new ToolportError('PAYLOAD_TOO_LARGE', `Request body is larger than the limit of ${request.routeOptions.bodyLimit} bytes.`);
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new ToolportError(
        'UNSUPPORTED_MEDIA_TYPE',
        `Unsupported Content-Type ${JSON.stringify(request.headers['content-type'] ?? '')}: send ${bodyOf(request)} as application/json.`,
      );
    // Also raised for __proto__ and constructor.prototype keys, which are refused, not parsed.
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return invalidJson(request);
  }
  if (err instanceof SyntaxError) return invalidJson(request);
  if (typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500) {
    return new ToolportError('BAD_REQUEST', err.message);
  }
  return undefined;
}

// The reason phrases of the answers below. Not node:http's STATUS_CODES: an ES module importing
// node:http makes Node 26 load its undici (to fill in the module's lazy exports), 6% of a cold start.
const REASONS: Record<number, string> = { 400: 'Bad Request', 408: 'Request Timeout', 431: 'Request Header Fields Too Large' };

/**
 * Answers requests Node's HTTP parser refuses before Fastify sees them (headers over the limit,
 * malformed HTTP, a request that took too long to arrive) in the error-body shape. No request
 * exists yet, so there is no request id.
 */
export function answerClientError(err: NodeJS.ErrnoException, socket: Socket): void {
  if (err.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  const [code, message]: [ErrorCode, string] =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? ['HEADERS_TOO_LARGE', 'Request headers are larger than the server accepts.']
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? ['REQUEST_TIMEOUT', 'The request did not arrive in time.']
        : ['BAD_REQUEST', 'The request is not valid HTTP.'];
  const status = new ToolportError(code, message).statusCode;
  const body = JSON.stringify(errorBody(code, message));
  socket.end(
    `HTTP/1.1 ${status} ${REASONS[status] ?? 'Bad Request'}\r\nContent-Type: application/json; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}
