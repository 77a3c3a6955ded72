import {
  context,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  TraceFlags,
  type Context,
  type Link,
  type Span,
  type Tracer,
} from '@opentelemetry/api';
import type { CallOutcome } from '../core/executor.js';
import { ToolportError } from '../core/errors.js';
import type { CallIdentity, CallRequest, CallResult } from '../core/gateway.js';
import type { CallSpan, CallTracer, TraceCarrier, ToolTrace } from '../core/tracer.js';

/** The attributes of a call's span: the conventions' names (gen_ai.*, mcp.*, jsonrpc.*, error.type) and toolport's own. */
export const ATTR = {
  operation: 'gen_ai.operation.name',
  tool: 'gen_ai.tool.name',
  callId: 'gen_ai.tool.call.id',
  mcpMethod: 'mcp.method.name',
  mcpVersion: 'mcp.protocol.version',
  mcpSession: 'mcp.session.id',
  rpcId: 'jsonrpc.request.id',
  networkTransport: 'network.transport',
  errorType: 'error.type',
  transport: 'toolport.transport',
  caller: 'toolport.caller',
  client: 'toolport.client',
  inputSize: 'toolport.tool.input.size',
  resultSize: 'toolport.tool.result.size',
  outcome: 'toolport.tool.outcome',
  waitMs: 'toolport.admission.wait_ms',
} as const;

/** Outcomes that are not errors; every other one is the call's `error.type` (`tool_error` as the MCP conventions name it). */
const FINE: ReadonlySet<CallOutcome> = new Set(['ok']);

const metaGetter = {
  keys: (carrier: Record<string, unknown>) => Object.keys(carrier),
  get: (carrier: Record<string, unknown>, key: string) => (typeof carrier[key] === 'string' ? carrier[key] : undefined),
};

/** A carrier of `ctx`'s trace context; empty for a trace that is neither sampled nor continued from a parent. */
function carrierOf(ctx: Context, continued: boolean): TraceCarrier {
  const spanContext = trace.getSpanContext(ctx);
  if (spanContext === undefined || !(continued || (spanContext.traceFlags & TraceFlags.SAMPLED) !== 0)) return {};
  const carrier: Record<string, string> = {};
  propagation.inject(ctx, carrier);
  return carrier;
}

function bytesOf(value: unknown): number {
  try {
    return Buffer.byteLength(JSON.stringify(value) ?? '');
  } catch {
    return 0;
  }
}

function fail(span: Span, type: string, message?: string): void {
  span.setAttribute(ATTR.errorType, type);
  span.setStatus(message === undefined ? { code: SpanStatusCode.ERROR } : { code: SpanStatusCode.ERROR, message });
}

/** One call's span, and the child span of its tool's work once the tool passes the trace on. */
class OpenCallSpan implements CallSpan {
  readonly #span: Span;
  readonly #context: Context;
  readonly #tracer: Tracer;
  readonly #continued: boolean;
  #work: WorkTrace | undefined;

  constructor(span: Span, ctx: Context, tracer: Tracer, continued: boolean) {
    this.#span = span;
    this.#context = ctx;
    this.#tracer = tracer;
    this.#continued = continued;
  }

  validated(): void {
    this.#span.addEvent('validated');
  }

  admitted(waitMs: number | undefined): void {
    const wait = waitMs ?? 0;
    this.#span.setAttribute(ATTR.waitMs, wait);
    this.#span.addEvent('admitted', { [ATTR.waitMs]: wait });
  }

  work<T>(tool: string, start: (trace: ToolTrace) => T): T {
    this.#work = new WorkTrace(tool, this.#context, this.#tracer, this.#continued);
    return start(this.#work);
  }

  settled(outcome: CallOutcome, result: CallResult): void {
    const span = this.#span;
    span.setAttribute(ATTR.outcome, outcome);
    if (span.isRecording()) span.setAttribute(ATTR.resultSize, bytesOf(result));
    if (!FINE.has(outcome)) {
      fail(span, outcome);
      this.#work?.fail(outcome);
    }
    this.close();
  }

  /** Ends the work span if it is still open (a call the tool's own refusal rejected never settles). */
  close(): void {
    this.#work?.end();
    this.#work = undefined;
  }
}

/**
 * The tool's side: a span of its work, opened (dated from the work's start) the first time the
 * tool passes the trace on, to a process or as a client span. A tool that works in-process (Echo,
 * Read) never asks, and its call's span is its work: a child span would be one more span a call
 * pays for and says nothing the call's `admitted` event and end do not.
 */
class WorkTrace implements ToolTrace {
  readonly #tool: string;
  readonly #parent: Context;
  readonly #tracer: Tracer;
  readonly #continued: boolean;
  // A performance.now() time: the SDK dates such a number on its own precise clock, as it does the spans it starts itself.
  readonly #started = performance.now();
  #span: Span | undefined;
  #context: Context | undefined;
  #carrier: TraceCarrier | undefined;
  #ended = false;

  constructor(tool: string, parent: Context, tracer: Tracer, continued: boolean) {
    this.#tool = tool;
    this.#parent = parent;
    this.#tracer = tracer;
    this.#continued = continued;
  }

  /** The work span's context, opening the span on first use; once the call has settled, the call's own (a span opened then would never end). */
  #opened(): Context {
    if (this.#ended) return this.#context ?? this.#parent;
    if (this.#context === undefined) {
      this.#span = this.#tracer.startSpan(
        `run ${this.#tool}`,
        { kind: SpanKind.INTERNAL, attributes: { [ATTR.tool]: this.#tool }, startTime: this.#started },
        this.#parent,
      );
      this.#context = trace.setSpan(this.#parent, this.#span);
    }
    return this.#context;
  }

  /** Made when a tool asks (Bash does, Echo never): formatting a traceparent is not free. */
  get carrier(): TraceCarrier {
    return (this.#carrier ??= carrierOf(this.#opened(), this.#continued));
  }

  async client<T>(name: string, attributes: Readonly<Record<string, string | number>>, call: (carrier: TraceCarrier) => Promise<T>): Promise<T> {
    const parent = this.#opened();
    const span = this.#tracer.startSpan(name, { kind: SpanKind.CLIENT, attributes }, parent);
    const ctx = trace.setSpan(parent, span);
    try {
      return await context.with(ctx, () => call(carrierOf(ctx, this.#continued)));
    } catch (err) {
      fail(span, err instanceof Error ? err.name : 'error', err instanceof Error ? err.message.slice(0, 200) : undefined);
      throw err;
    } finally {
      span.end();
    }
  }

  fail(outcome: CallOutcome): void {
    if (this.#span !== undefined) fail(this.#span, outcome);
  }

  end(): void {
    this.#ended = true;
    // Ended on the same clock as it was started (a span given its start would take its end from Date.now()).
    this.#span?.end(performance.now());
  }
}

/**
 * A call under a parent that was not sampled, when the sampler would not sample its children
 * either: no span, no attributes, no context switch (the parent's is already the active one).
 * Its tool still passes the parent's context on, so a process or an upstream continues the trace
 * unsampled, as W3C trace context asks.
 */
class UnsampledCallSpan implements CallSpan {
  readonly #context: Context;

  constructor(ctx: Context) {
    this.#context = ctx;
  }

  validated(): void {}

  admitted(): void {}

  work<T>(_tool: string, start: (trace: ToolTrace) => T): T {
    return start(new PassingTrace(this.#context));
  }

  settled(): void {}
}

/** The tool's side of an unsampled call: the parent's context to pass on, and no client spans. */
class PassingTrace implements ToolTrace {
  readonly #context: Context;
  #carrier: TraceCarrier | undefined;

  constructor(ctx: Context) {
    this.#context = ctx;
  }

  get carrier(): TraceCarrier {
    return (this.#carrier ??= carrierOf(this.#context, true));
  }

  client<T>(_name: string, _attributes: Readonly<Record<string, string | number>>, call: (carrier: TraceCarrier) => Promise<T>): Promise<T> {
    return call(this.carrier);
  }
}

/**
 * The tracer the gateway calls: a span per call, named and attributed as the conventions for
 * GenAI tools and MCP say (`execute_tool {tool}`, or `{mcp.method.name} {tool}` for MCP, which is
 * a server span whose parent is the client's `_meta` trace context and which links the HTTP
 * request's span). No key, token, input or result goes in a span: only their sizes.
 */
export class OpenTelemetryCallTracer implements CallTracer {
  readonly #tracer: Tracer;
  // The span of each call in flight, by its request object; null once ended (a late refusal adds nothing).
  readonly #open = new WeakMap<CallIdentity, Span | null>();

  // Whether the sampler leaves a child of an unsampled span unsampled: every sampler but always_on
  // (a parent-based one follows its parent; a ratio one decides by the trace id, which the child shares).
  readonly #followsUnsampled: boolean;

  constructor(tracer: Tracer, { followsUnsampled }: { followsUnsampled: boolean }) {
    this.#tracer = tracer;
    this.#followsUnsampled = followsUnsampled;
  }

  trace(request: CallRequest, call: (span: CallSpan) => Promise<CallResult>): Promise<CallResult> {
    const ambient = context.active();
    // Most calls at a low sampling ratio: their request's span was not sampled, so neither is theirs.
    if (this.#followsUnsampled && request.mcp?.meta?.['traceparent'] === undefined) {
      const parent = trace.getSpanContext(ambient);
      if (parent !== undefined && (parent.traceFlags & TraceFlags.SAMPLED) === 0) return call(new UnsampledCallSpan(ambient));
    }
    return this.#traced(request, ambient, call);
  }

  async #traced(request: CallRequest, ambient: Context, call: (span: CallSpan) => Promise<CallResult>): Promise<CallResult> {
    let parent = ambient;
    let continued = trace.getSpanContext(ambient) !== undefined;
    const links: Link[] = [];
    const { mcp } = request;
    const attributes = identityAttributes(request);
    attributes[ATTR.operation] = 'execute_tool';
    if (request.inputBytes !== undefined) attributes[ATTR.inputSize] = request.inputBytes;
    if (mcp !== undefined) {
      attributes[ATTR.mcpMethod] = mcp.method;
      attributes[ATTR.mcpVersion] = mcp.protocolVersion;
      if (mcp.rpcId !== null) attributes[ATTR.rpcId] = String(mcp.rpcId);
      if (mcp.sessionId !== undefined) attributes[ATTR.mcpSession] = mcp.sessionId;
      if (mcp.meta !== undefined && typeof mcp.meta['traceparent'] === 'string') {
        const extracted = propagation.extract(ROOT_CONTEXT, mcp.meta, metaGetter);
        if (trace.getSpanContext(extracted) !== undefined) {
          const transportSpan = trace.getSpanContext(ambient);
          if (transportSpan !== undefined) links.push({ context: transportSpan });
          parent = extracted;
          continued = true;
        }
      }
    }
    const name = mcp === undefined ? `execute_tool ${request.tool}` : `${mcp.method} ${request.tool}`;
    const span = this.#tracer.startSpan(name, { kind: mcp === undefined ? SpanKind.INTERNAL : SpanKind.SERVER, attributes, links }, parent);
    if (request.inputBytes === undefined && span.isRecording()) span.setAttribute(ATTR.inputSize, bytesOf(request.input));
    this.#open.set(request, span);
    const ctx = trace.setSpan(parent, span);
    const phases = new OpenCallSpan(span, ctx, this.#tracer, continued);
    try {
      return await context.with(ctx, () => call(phases));
    } catch (err) {
      if (err instanceof ToolportError) fail(span, err.code);
      else fail(span, 'INTERNAL_ERROR');
      throw err;
    } finally {
      this.#open.set(request, null);
      phases.close();
      span.end();
    }
  }

  refused(call: CallIdentity, error: ToolportError): void {
    const open = this.#open.get(call);
    if (open === null) return;
    if (open !== undefined) {
      fail(open, error.code);
      return;
    }
    const attributes = identityAttributes(call);
    attributes[ATTR.operation] = 'execute_tool';
    const span = this.#tracer.startSpan(call.tool === undefined ? 'execute_tool' : `execute_tool ${call.tool}`, { kind: SpanKind.INTERNAL, attributes });
    fail(span, error.code);
    span.end();
  }
}

function identityAttributes(call: CallIdentity): Record<string, string | number> {
  const attributes: Record<string, string | number> = { [ATTR.callId]: call.callId ?? call.requestId, [ATTR.transport]: call.transport };
  if (call.tool !== undefined) attributes[ATTR.tool] = call.tool;
  if (call.caller.label !== undefined) attributes[ATTR.caller] = call.caller.label;
  if (call.caller.client !== undefined) attributes[ATTR.client] = call.caller.client;
  if (call.transport === 'stdio') attributes[ATTR.networkTransport] = 'pipe';
  return attributes;
}
