import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { CallAbort, type AbortSource } from '../../core/call-abort.js';
import { errorBody, ToolportError } from '../../core/errors.js';
import type { Caller, CallRequest, Gateway } from '../../core/gateway.js';
import type { CallTaskStore } from '../../core/call-task.js';
import type { ObjectSchema, ToolDef } from '../../core/types.js';
import { RequestCaller } from '../caller.js';
import { whenClientGoes } from '../client-gone.js';
import { sendPrebuilt } from '../compressed-lists.js';
import { TOOL_CALL_TEMPLATE } from '../openapi/live-tools.js';
import { toolResultComponent } from '../openapi/tools-document.js';
import { asToolportError, sendError } from '../error-handler.js';
import {
  BAD_QUERY,
  CallAnswer,
  CallQuery,
  ErrorRef,
  FormatQuery,
  REFUSALS,
  ToolDefinitionAnswer,
  ToolListAnswer,
  ToolNameParams,
} from '../openapi/response-schemas.js';
import { hasStrictMode, STRICT_FORMATS, type APIFormat } from '../../core/formats.js';
import { toAnthropicToolResult, toMCPCallToolResult, toOpenAIFunctionCallOutput, toOpenAIToolMessages } from '../../providers/results.js';
import type { Progress, ToolResult } from '../../core/types.js';
import { DEFAULT_IDLE_TIMEOUT_MS } from '../defaults.js';
import { acceptsEventStream, CALL_EVENTS, EventStream, keepAliveInterval, withEventStream } from '../sse.js';
import { PreferHeader, prefersAsync, TASK_ACCEPTED } from './prefer.js';
import { taskAnswer, taskLocation } from './tasks.js';

export interface ToolRoutesOptions {
  /** Every rule of a call (scope, validation, admission, audit, metrics, calls in flight) is the gateway's. */
  gateway: Gateway;
  /** The connections' idle timeout: an event stream sends a comment at least twice per period. Default 30 s. */
  idleTimeoutMs?: number;
  /** Where a call with `Prefer: respond-async` runs as a task; without, the preference is ignored (RFC 7240 allows it). */
  tasks?: CallTaskStore | undefined;
}

/** The transport label of calls that come through these routes. */
export const REST_TRANSPORT = 'rest';

const JSON_TYPE = 'application/json; charset=utf-8';
// Made once: an Error captures a stack trace, which is not free on every disconnect.
const CLIENT_GONE = new Error('the client disconnected');

// A ToolResult is already normalised by the pipeline; plain JSON.stringify is the cheapest
// correct serialiser for it (a schema-driven one would re-check every content block's union).
const stringify = (): ((data: unknown) => string) => JSON.stringify;

const CALL_RESPONSES = {
  ...REFUSALS,
  200: withEventStream(CallAnswer, CALL_EVENTS),
  400: {
    ...ErrorRef,
    description:
      "The body is not valid JSON (INVALID_JSON), not an object or fails the tool's input schema (INVALID_INPUT: the first 50 violations with their JSON paths, and how many more), or the query is not allowed (INVALID_QUERY).",
  },
  403: {
    ...ErrorRef,
    description:
      'The key may not use this tool, or the Host and Origin guard refused the request: a Host or web Origin that is neither local nor allowed (FORBIDDEN).',
  },
  413: { ...ErrorRef, description: 'The body is over the size limit (PAYLOAD_TOO_LARGE).' },
  415: { ...ErrorRef, description: 'The Content-Type is not application/json (UNSUPPORTED_MEDIA_TYPE).' },
  429: {
    ...ErrorRef,
    description:
      'Over the rate limit (RATE_LIMITED; Retry-After says when to retry), or, with `Prefer: respond-async`, the key has as many tasks working as it may (TOO_MANY_TASKS).',
  },
  503: {
    ...ErrorRef,
    description:
      "Shutting down (SHUTTING_DOWN), overloaded (OVERLOADED), the tool's queue is full (QUEUE_FULL), or, with `Prefer: respond-async`, the server runs as many tasks as it takes (TASKS_FULL); Retry-After says when to retry.",
  },
  202: TASK_ACCEPTED,
};
const NOT_MODIFIED = {
  type: 'null',
  description: 'The list is the one whose ETag the request gave in If-None-Match: no body; use the one you have.',
};
// Only the generic route, which names the tool in its path, can be asked for a tool that does not exist.
const NO_SUCH_TOOL = { ...ErrorRef, description: 'No such tool (TOOL_NOT_FOUND); the message lists the available ones.' };

/**
 * The REST adapter over the gateway: each route parses, calls the gateway, and renders. Refusals
 * the routes make before the gateway sees the call (no key, rate limit, body too large or not
 * JSON, overload, the caller's scope) go to `gateway.refused` from the call routes' own onError
 * hook, so they get the same audit line and metric as the gateway's.
 */
export function toolRoutes(fastify: FastifyInstance, { gateway, idleTimeoutMs = DEFAULT_IDLE_TIMEOUT_MS, tasks }: ToolRoutesOptions): void {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const keepAliveMs = keepAliveInterval(idleTimeoutMs);
  const { registry } = gateway;
  // Before the body is parsed: a call outside the key's scope is refused whatever it carries.
  const checkScope = (request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction): void => {
    done(gateway.scopeRefusal(new RequestCaller(request), toolName(request)));
  };
  // Runs only for errors raised before the handler called the gateway (the handler answers the
  // gateway's own refusals itself, so they are not counted twice).
  const refusedBeforeGateway = (request: FastifyRequest, _reply: FastifyReply, error: FastifyError, done: () => void): void => {
    gateway.refused(
      { caller: new RequestCaller(request), tool: toolName(request), requestId: request.id, transport: REST_TRANSPORT },
      asToolportError(error, request),
    );
    done();
  };

  app.get(
    '/tools',
    {
      schema: {
        operationId: 'listTools',
        summary: "List the tools, in a model provider's format",
        description:
          'The list carries a strong ETag (and Cache-Control: no-cache): send it back in If-None-Match to be answered 304 with no body while the list is the same.',
        tags: ['service'],
        querystring: FormatQuery,
        response: { ...REFUSALS, 200: ToolListAnswer, 304: NOT_MODIFIED, 400: BAD_QUERY },
      },
      // The list is JSON made once, as bytes; a schema-driven serialiser would only be in the way.
      serializerCompiler: stringify,
    },
    // Not async: a list is answered without a promise (once compressed, if it is).
    (request, reply) => {
      const { format, strict } = listQuery(request.query);
      sendPrebuilt(request, reply, gateway.listBytes(new RequestCaller(request), format, { strict }), JSON_TYPE);
    },
  );

  app.get(
    '/tools/:name',
    {
      schema: {
        operationId: 'getTool',
        summary: "One tool's definition, in a model provider's format",
        tags: ['service'],
        params: ToolNameParams,
        querystring: FormatQuery,
        response: {
          ...REFUSALS,
          200: ToolDefinitionAnswer,
          400: BAD_QUERY,
          403: {
            ...ErrorRef,
            description: 'The key may not use this tool (or no such tool exists), or the Host and Origin guard refused the request (FORBIDDEN).',
          },
          404: NO_SUCH_TOOL,
        },
      },
      serializerCompiler: stringify,
      onRequest: checkScope,
    },
    async (request) => {
      const { format, strict } = listQuery(request.query);
      return gateway.describe(new RequestCaller(request), request.params.name, format, { strict });
    },
  );

  const call = async (request: FastifyRequest, reply: FastifyReply) => {
    if (tasks !== undefined && prefersAsync(request.headers.prefer)) return startTask(request, reply, tasks);
    const shape = shapeQuery(request.query as CallShape);
    if (acceptsEventStream(request.headers.accept)) return streamedCall(request, reply, shape);
    const call = new RestCall(request);
    // The call is aborted when the client goes away (and by shutdown, through the gateway).
    const stopWatching = whenClientGoes(request, () => gateway.cancel(call, CLIENT_GONE));
    try {
      // In a provider's shape, a refusal is an error result for the model like any other failure.
      // Sent as text: Fastify then skips its serializer lookup by status and content type.
      if (shape !== undefined) return await reply.type(JSON_TYPE).send(JSON.stringify(shape(await gateway.callSafe(call))));
      const result = await gateway.call(call);
      return await reply.type(JSON_TYPE).send(JSON.stringify(result));
    } catch (err) {
      // Already logged and counted by the gateway: answered here, so the onError hook never sees it.
      if (err instanceof ToolportError) return sendError(reply, err);
      throw err;
    } finally {
      stopWatching();
    }
  };

  // `Prefer: respond-async` (RFC 7240): the call runs as a task; 202 with where to find it.
  const startTask = async (request: FastifyRequest, reply: FastifyReply, store: CallTaskStore) => {
    if ((request.query as CallShape).format !== undefined) {
      throw invalidQuery('$.format', 'does not apply with Prefer: respond-async: a task keeps a ToolResult (GET /tasks/{id})');
    }
    try {
      const task = await store.start(new RestCall(request));
      return await reply
        .code(202)
        .header('location', taskLocation(task.id))
        .header('preference-applied', 'respond-async')
        .type(JSON_TYPE)
        .send(JSON.stringify(taskAnswer(task)));
    } catch (err) {
      // Already logged and counted (by the gateway, or the store for its caps).
      if (err instanceof ToolportError) return sendError(reply, err);
      throw err;
    }
  };

  // `Accept: text/event-stream`: the same call, its progress streamed (see EventStream).
  const streamedCall = async (request: FastifyRequest, reply: FastifyReply, shape: ((result: ToolResult) => unknown) | undefined) => {
    const abort = new CallAbort();
    const stream = new EventStream(reply, keepAliveMs);
    const progress = stream.progressOf('call', {}, abort);
    const call = new RestCall(request, abort, progress.report);
    const stopWatching = whenClientGoes(request, () => abort.abort(CLIENT_GONE));
    try {
      const answer = shape !== undefined ? shape(await gateway.callSafe(call)) : await gateway.call(call);
      progress.finish();
      return stream.end(JSON.stringify(answer));
    } catch (err) {
      progress.drop();
      // Already logged and counted by the gateway. Before the stream began, answered as without it.
      const refusal = err instanceof ToolportError ? err : undefined;
      if (!stream.started) {
        if (refusal !== undefined) return sendError(reply, refusal);
        throw err;
      }
      if (refusal === undefined) request.log.error({ err }, 'unexpected error');
      const known = refusal ?? new ToolportError('INTERNAL_ERROR', `Internal server error (request id ${request.id}).`);
      return stream.end(JSON.stringify(errorBody(known.code, known.message, known.details)));
    } finally {
      stream.close();
      stopWatching();
    }
  };

  // Every tool is its own documented operation (see liveDocument), so OpenAPI consumers that turn
  // operations into tools can use the service directly; all are served by the one route below, and
  // its own operation is the template of theirs. A route per tool cost about 30 KB of memory and
  // 0.4 ms of start-up a tool. The pipeline, not Fastify, validates the body, so that every adapter
  // applies the same strict rules. A tool's typed ToolResult is a component of the document.
  for (const tool of registry.list()) {
    if (tool.outputSchema !== undefined) app.addSchema(toolResultSchema(tool as ToolDef & { outputSchema: ObjectSchema }));
  }

  app.post(
    '/tools/:name',
    {
      serializerCompiler: stringify,
      onRequest: checkScope,
      onError: refusedBeforeGateway,
      config: { runsTools: true },
      schema: {
        operationId: TOOL_CALL_TEMPLATE,
        tags: ['tools'],
        params: ToolNameParams,
        querystring: CallQuery,
        headers: PreferHeader,
        response: { ...CALL_RESPONSES, 404: NO_SUCH_TOOL },
      },
    },
    call,
  );
}

/** `?format=&strict=` of a list, checked: strict mode is OpenAI's. */
function listQuery(query: { format?: APIFormat; strict?: boolean }): { format: APIFormat; strict: boolean } {
  const format = query.format ?? 'anthropic';
  const strict = query.strict === true;
  if (strict && !hasStrictMode(format)) {
    const message = `Invalid querystring:\n- $.strict: applies to format ${STRICT_FORMATS.join(' and ')}, not ${format}`;
    throw new ToolportError('INVALID_QUERY', message, {
      violations: [{ path: '$.strict', message: `applies to format ${STRICT_FORMATS.join(' and ')}, not ${format}` }],
    });
  }
  return { format, strict };
}

interface CallShape {
  format?: APIFormat;
  id?: string;
}

/** How a single call answers when `?format=` asks for a provider's shape; undefined for a plain ToolResult. */
function shapeQuery({ format, id }: CallShape): ((result: ToolResult) => unknown) | undefined {
  if (format === undefined) {
    if (id !== undefined) throw invalidQuery('$.id', 'is taken only with format');
    return undefined;
  }
  if (format === 'mcp') return toMCPCallToolResult;
  if (id === undefined) throw invalidQuery('$.id', `is required with format ${format}: the provider's id of the call, which the answer must carry`);
  switch (format) {
    case 'anthropic':
      return (result) => toAnthropicToolResult(id, result);
    case 'openai':
      return (result) => toOpenAIToolMessages([{ id, result }]);
    case 'openai-responses':
      return (result) => toOpenAIFunctionCallOutput(id, result);
  }
}

function invalidQuery(path: string, message: string): ToolportError {
  return new ToolportError('INVALID_QUERY', `Invalid querystring:\n- ${path}: ${message}`, { violations: [{ path, message }] });
}

/** A call through a REST route: the request for the gateway, and its caller, in one object. */
class RestCall extends RequestCaller implements CallRequest {
  readonly tool: string;
  readonly input: unknown;
  readonly requestId: string;
  readonly transport = REST_TRANSPORT;
  readonly inputBytes: number;

  readonly signal?: AbortSource;
  readonly onProgress?: (progress: Progress) => void;

  constructor(request: FastifyRequest, signal?: AbortSource, onProgress?: (progress: Progress) => void) {
    super(request);
    this.tool = toolName(request);
    // No body at all (curl -X POST) means "no arguments": the same as {}.
    this.input = request.body === undefined ? {} : request.body;
    this.requestId = request.id;
    this.inputBytes = Number(request.headers['content-length'] ?? 0);
    if (signal !== undefined) this.signal = signal;
    if (onProgress !== undefined) this.onProgress = onProgress;
  }

  get caller(): Caller {
    return this;
  }
}

/** The tool a request is for, named in its path. */
function toolName(request: FastifyRequest): string {
  return (request.params as { name?: string }).name ?? '';
}

/**
 * The ToolResult of a tool with an output schema, as a component of the document (named by
 * `toolResultComponent`): its `structuredContent` is that schema, so generated clients get its
 * type. Only the document says so: the pipeline, not Fastify, checks what the tool returns.
 */
function toolResultSchema(tool: ToolDef & { outputSchema: ObjectSchema }): { $id: string } & Record<string, unknown> {
  // The document resolves a local `#/$defs/...` against the component's root, so the definitions
  // go there; `$schema` goes, as the document's own dialect applies.
  const { $defs, definitions, ...structured } = tool.outputSchema;
  delete structured.$schema;
  return {
    $id: toolResultComponent(tool.name),
    type: 'object',
    required: ['content', 'isError'],
    properties: {
      content: { type: 'array', items: { $ref: 'ContentBlock' } },
      isError: { type: 'boolean', description: 'True when the call failed; the content says why, for the model.' },
      structuredContent: { ...structured, description: structured.description ?? 'The result as JSON, for programs: always present on success.' },
    },
    additionalProperties: false,
    description: `What ${tool.name} returned: a ToolResult whose structuredContent, always present on success, follows the tool's output schema.`,
    ...($defs !== undefined ? { $defs } : {}),
    ...(definitions !== undefined ? { definitions } : {}),
  };
}
