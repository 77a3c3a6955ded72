/**
 * Every error a client can cause, with its status and a fixed code. One handler turns them into
 * responses; the body is itself a ToolResult so an agent loop can hand it to the model unchanged.
 */
export const ErrorCodes = {
  INVALID_JSON: 400,
  INVALID_INPUT: 400,
  INVALID_QUERY: 400,
  BAD_REQUEST: 400,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  TOOL_NOT_FOUND: 404,
  ROUTE_NOT_FOUND: 404,
  REQUEST_TIMEOUT: 408,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  RATE_LIMITED: 429,
  HEADERS_TOO_LARGE: 431,
  INTERNAL_ERROR: 500,
  SHUTTING_DOWN: 503,
  QUEUE_FULL: 503,
  OVERLOADED: 503,
} as const;

export type ErrorCode = keyof typeof ErrorCodes;

/** An error with a catalog code; its message is safe to show to a client and to a model. */
export class ToolportError extends Error {
  override readonly name = 'ToolportError';
  readonly code: ErrorCode;
  readonly statusCode: number;
  readonly details: unknown;
  /** Response headers that go with the error (`Retry-After`, `WWW-Authenticate`). */
  readonly headers: Readonly<Record<string, string>>;

  constructor(code: ErrorCode, message: string, details?: unknown, headers: Record<string, string> = {}) {
    super(message);
    this.code = code;
    this.statusCode = ErrorCodes[code];
    this.details = details;
    this.headers = headers;
  }
}

/** The body of every error response: a ToolResult with `isError: true`, plus a machine-readable error. */
export interface ErrorBody {
  content: [{ type: 'text'; text: string }];
  isError: true;
  error: { code: ErrorCode; message: string; details?: unknown };
}

export function errorBody(code: ErrorCode, message: string, details?: unknown): ErrorBody {
  const error: ErrorBody['error'] = { code, message };
  if (details !== undefined) error.details = details;
  return { content: [{ type: 'text', text: message }], isError: true, error };
}

/** Raised by `ToolRegistry.register` for a tool that breaks a registration rule. */
export class ToolRegistrationError extends Error {
  override readonly name = 'ToolRegistrationError';
  readonly tool: string;

  constructor(tool: string, rule: string) {
    super(`Cannot register tool "${tool}": ${rule}`);
    this.tool = tool;
  }
}
