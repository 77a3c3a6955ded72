import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { API_FORMATS, formatTools, type APIFormat } from '../../core/formats.js';
import type { ToolExecutor } from '../../core/executor.js';
import type { ToolDef } from '../../core/types.js';
import { assertMayUse, type ToolScope } from '../auth.js';
import type { InFlight } from '../in-flight.js';
import { ErrorRef, FormatQuery, ToolNameParams, ToolResultRef } from '../schemas.js';

export interface ToolRoutesOptions {
  executor: ToolExecutor;
  /** Tracks calls in flight, for graceful shutdown, which aborts them after its grace period. */
  inFlight: InFlight;
}

const JSON_TYPE = 'application/json; charset=utf-8';
// Made once: an Error captures a stack trace, which is not free on every disconnect.
const CLIENT_GONE = new Error('the client disconnected');

// A ToolResult is already normalised by the pipeline; plain JSON.stringify is the cheapest
// correct serialiser for it (a schema-driven one would re-check every content block's union).
const stringify = (): ((data: unknown) => string) => JSON.stringify;

const CALL_RESPONSES = {
  200: { ...ToolResultRef, description: 'The tool ran. `isError` is true when it failed, threw, timed out or returned garbage.' },
  400: { ...ErrorRef, description: 'The body is not valid JSON, not an object, or fails the tool\'s input schema (the first 50 violations with their JSON paths, and how many more).' },
  401: { ...ErrorRef, description: 'API keys are configured and the request has no valid `Authorization: Bearer` key (UNAUTHORIZED).' },
  403: { ...ErrorRef, description: 'The key may not use this tool, or the Host and Origin guard refused the request: a Host or web Origin that is neither local nor allowed (FORBIDDEN).' },
  404: { ...ErrorRef, description: 'No such tool; the message lists the available ones.' },
  413: { ...ErrorRef, description: 'The body is over the size limit.' },
  415: { ...ErrorRef, description: 'The Content-Type is not application/json.' },
  429: { ...ErrorRef, description: 'Over the rate limit (RATE_LIMITED); Retry-After says when to retry.' },
  500: { ...ErrorRef, description: 'An unexpected failure of the service itself; no internals are included.' },
  503: {
    ...ErrorRef,
    description: 'Shutting down (SHUTTING_DOWN), overloaded (OVERLOADED), or the tool\'s queue is full (QUEUE_FULL); Retry-After says when to retry.',
  },
};

/** The REST adapter over the registry and the execution pipeline. */
export function toolRoutes(fastify: FastifyInstance, { executor, inFlight }: ToolRoutesOptions): void {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { registry } = executor;
  // Tool lists do not change once the app is built: serialise each format once, and once more
  // for each distinct scope of the API keys (a scoped key lists only the tools it may use).
  const lists = new Map<APIFormat, string>(API_FORMATS.map((f) => [f, JSON.stringify(registry.toAPI(f))]));
  const scopedLists = new Map<ToolScope, Map<APIFormat, string>>();
  const listsFor = (scope: ToolScope | undefined): Map<APIFormat, string> => {
    if (scope === undefined) return lists;
    let shaped = scopedLists.get(scope);
    if (shaped === undefined) {
      const tools = registry.list().filter((t) => scope.has(t.name));
      shaped = new Map(API_FORMATS.map((f) => [f, JSON.stringify(formatTools(tools, f))]));
      scopedLists.set(scope, shaped);
    }
    return shaped;
  };
  for (const scope of fastify.hasDecorator('toolScopes') ? fastify.toolScopes : []) listsFor(scope);
  // Before the body is parsed: a call outside the key's scope is refused whatever it carries.
  const checkScope = async (request: FastifyRequest): Promise<void> => assertMayUse(request, toolName(request));

  app.get(
    '/tools',
    {
      schema: {
        operationId: 'listTools',
        summary: 'List the tools, in a model provider\'s format',
        tags: ['service'],
        querystring: FormatQuery,
        response: { 200: { description: 'The tool definitions.', type: 'object', additionalProperties: true }, 400: ErrorRef },
      },
    },
    async (request, reply) =>
      reply.type(JSON_TYPE).serializer(String).send(listsFor(request.apiKey?.tools).get(request.query.format ?? 'anthropic')),
  );

  app.get(
    '/tools/:name',
    {
      schema: {
        operationId: 'getTool',
        summary: 'One tool\'s definition, in a model provider\'s format',
        tags: ['service'],
        params: ToolNameParams,
        querystring: FormatQuery,
        response: { 200: { description: 'The tool definition.', type: 'object', additionalProperties: true }, 400: ErrorRef, 404: ErrorRef },
      },
      onRequest: checkScope,
    },
    async (request) => {
      const { name } = request.params;
      const format = request.query.format ?? 'anthropic';
      executor.lookup(name);
      const index = registry.list().findIndex((t) => t.name === name);
      const shaped = registry.toAPI(format);
      return Array.isArray(shaped) ? shaped[index] : shaped.tools[index];
    },
  );

  const call = async (request: FastifyRequest, reply: FastifyReply) => {
    const name = toolName(request);
    // No body at all (curl -X POST) means "no arguments": the same as {}.
    const input = request.body === undefined ? {} : request.body;
    // Aborted when the client goes away, or by shutdown once its grace period is over.
    const cancel = new AbortController();
    inFlight.enter(cancel);
    const onClose = (): void => {
      if (!reply.raw.writableFinished) cancel.abort(CLIENT_GONE);
    };
    reply.raw.once('close', onClose);
    try {
      const result = await executor.call(name, input, {
        requestId: request.id,
        signal: cancel.signal,
        inputBytes: Number(request.headers['content-length'] ?? 0),
        keyLabel: request.apiKey?.label,
      });
      return await reply.type(JSON_TYPE).send(result);
    } finally {
      inFlight.leave(cancel);
      reply.raw.off('close', onClose);
    }
  };

  // Every tool is its own documented operation, so OpenAPI consumers that turn operations into
  // tools can use the service directly. Its input schema documents the body; the pipeline, not
  // Fastify, validates it, so that every adapter applies the same strict rules.
  for (const tool of registry.list()) {
    app.post(`/tools/${tool.name}`, {
      serializerCompiler: stringify,
      onRequest: checkScope,
      config: { tool: tool.name, swaggerTransform: withBody(tool) },
      schema: {
        operationId: tool.name,
        summary: tool.annotations?.title ?? tool.name,
        description: tool.description,
        tags: ['tools'],
        response: CALL_RESPONSES,
      },
    }, call);
  }

  app.post('/tools/:name', {
    serializerCompiler: stringify,
    onRequest: checkScope,
    schema: { hide: true, params: ToolNameParams, response: CALL_RESPONSES },
  }, call);
}

/** The tool a request is for: a per-tool route says it in its config, the generic one in its path. */
function toolName(request: FastifyRequest): string {
  return (request.params as { name?: string }).name ?? request.routeOptions.config.tool ?? '';
}

function withBody(tool: ToolDef) {
  return ({ schema, url }: { schema: unknown; url: string }) => ({
    url,
    schema: {
      ...(schema as object),
      body: { ...tool.inputSchema, properties: tool.inputSchema.properties ?? {} },
    },
  });
}
