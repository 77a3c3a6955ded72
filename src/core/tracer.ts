import type { CallOutcome } from './executor.js';
import type { ToolportError } from './errors.js';
import type { CallIdentity, CallRequest, CallResult } from './gateway.js';

// The core's side of tracing: what the gateway and the executor tell a tracer, declared here so
// that the core imports no OpenTelemetry (src/telemetry/ implements it, loaded only when tracing is
// on), as `CallObserver` keeps the metrics library out of it. Without a tracer none of it is called.

/** W3C trace context as text: `traceparent`, and `tracestate` and `baggage` when there are any. */
export type TraceCarrier = Readonly<Record<string, string>>;

/** What a call came with over MCP: the facts its span records (mcp.* and jsonrpc.* attributes). */
export interface McpCallFacts {
  /** The JSON-RPC method (`tools/call`). */
  readonly method: string;
  readonly protocolVersion: string;
  readonly rpcId: string | number | null;
  readonly sessionId?: string | undefined;
  /** The request's `params._meta`, where the client's trace context travels; undefined without one. */
  readonly meta?: Record<string, unknown> | undefined;
}

/** Makes the span of each call; called once per call, so cheap, and never throws. */
export interface CallTracer {
  /** Runs `call` inside the span of `request` (a child of the ambient context, or of the `_meta` trace context over MCP). */
  trace(request: CallRequest, call: (span: CallSpan) => Promise<CallResult>): Promise<CallResult>;
  /** A refusal: recorded on the call's span when it has one, or as a span of its own (a call refused before the gateway ran it). */
  refused(call: CallIdentity, error: ToolportError): void;
}

/** One call's span, as the executor tells it what happens. */
export interface CallSpan {
  /** The input passed its schema. */
  validated(): void;
  /** The call holds a slot; `waitMs` undefined: it took one at once. */
  admitted(waitMs: number | undefined): void;
  /** Runs the tool's start inside a child span of its own work; the tool's context carries that span's `ToolTrace`. */
  work<T>(tool: string, start: (trace: ToolTrace) => T): T;
  /** The tool settled (or the call answered without it): ends the work span and records the outcome and the result's size. */
  settled(outcome: CallOutcome, result: CallResult): void;
}

/** What a tool gets of its call's trace (`ToolContext.trace`), to pass it on. */
export interface ToolTrace {
  /** The trace context of the tool's work span, for a process it starts (TRACEPARENT, TRACESTATE). */
  readonly carrier: TraceCarrier;
  /**
   * Runs `call` to another service inside a client span named `name`, with that span's trace
   * context to send along; the span ends when `call` settles (a rejection is its error).
   */
  client<T>(name: string, attributes: Readonly<Record<string, string | number>>, call: (carrier: TraceCarrier) => Promise<T>): Promise<T>;
}

/**
 * Runs `run`, a round trip to another service (Redis), inside a client span named `name` in the
 * current trace; a rejection is the span's error. Given to an adapter only while tracing is on.
 */
export type RoundTrip = <T>(name: string, attributes: Readonly<Record<string, string | number>>, run: () => Promise<T>) => Promise<T>;
