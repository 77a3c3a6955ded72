import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { CallAbort } from '../../core/call-abort.js';
import { errorBody, ToolportError } from '../../core/errors.js';
import type { Gateway } from '../../core/gateway.js';
import { toAnthropicToolResultMessage, toOpenAIFunctionCallOutputs, toOpenAIToolMessages, type AnsweredCall } from '../../providers/results.js';
import { DEFAULT_IDLE_TIMEOUT_MS } from '../defaults.js';
import type { ProgressReporter } from '../../mcp/progress.js';
import { runTurn, turnSizeRefusal, type TurnContext } from '../../providers/turn-runner.js';
import { DIALECTS, readTurn, TurnShapeError, type Dialect, type Turn } from '../../providers/turns.js';
import { RequestCaller } from '../caller.js';
import { whenClientGoes } from '../client-gone.js';
import { asToolportError } from '../error-handler.js';
import { ErrorRef, TurnAnswer } from '../openapi/response-schemas.js';
import { acceptsEventStream, EventStream, keepAliveInterval, TURN_EVENTS, withEventStream } from '../sse.js';

/** The transport label of the calls of `POST /calls` turns, in audit lines and metrics. */
export const CALLS_TRANSPORT = 'calls';

const JSON_TYPE = 'application/json; charset=utf-8';
const CLIENT_GONE = new Error('the client disconnected');

const CallsQuery = Type.Object(
  {
    format: Type.Optional(
      Type.Enum([...DIALECTS], { type: 'string', description: 'The provider whose turn the body is; detected from its shape when absent.' }),
    ),
  },
  { additionalProperties: false },
);

/**
 * `POST /calls`: an assistant's turn in, exactly as the provider returned it, and what goes back
 * to the model out, so an agent loop is one request per turn. The calls run through `runTurn`:
 * each as a single call would, in the order the model meant (read-only calls together, any other
 * alone), answered in the order of the calls.
 */
export function callsRoutes(
  fastify: FastifyInstance,
  { gateway, idleTimeoutMs = DEFAULT_IDLE_TIMEOUT_MS }: { gateway: Gateway; idleTimeoutMs?: number },
): void {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const keepAliveMs = keepAliveInterval(idleTimeoutMs);
  const refusedBeforeGateway = (request: FastifyRequest, _reply: FastifyReply, error: FastifyError, done: () => void): void => {
    gateway.refused({ caller: new RequestCaller(request), requestId: request.id, transport: CALLS_TRANSPORT }, asToolportError(error, request));
    done();
  };

  app.post(
    '/calls',
    {
      onError: refusedBeforeGateway,
      // The body's schema is for the document only: readTurn reads the body and says which provider's shape was expected.
      config: { runsTools: true, bodyIs: "the assistant's turn", documentedBody: Type.Ref('AssistantTurn') },
      schema: {
        operationId: 'callTools',
        summary: "Run the tool calls of an assistant's turn; answer the next turn",
        description:
          'The body is an assistant turn as the provider returned it: an Anthropic message or its content array, an OpenAI Chat Completions assistant message or its tool_calls, or an OpenAI Responses output list. The answer is what goes back to the model: an Anthropic user message of tool_result blocks, the Chat Completions tool messages (and one user message with their images), or Responses function_call_output items.',
        tags: ['calls'],
        querystring: CallsQuery,
        response: {
          200: withEventStream(TurnAnswer, TURN_EVENTS),
          400: {
            ...ErrorRef,
            description:
              'The body is not a turn of any provider (or not of the one `format` names), is ambiguous, or holds more than 64 calls (BAD_REQUEST); or it is not valid JSON (INVALID_JSON); or the query is not allowed (INVALID_QUERY).',
          },
          401: { ...ErrorRef, description: 'No valid API key (UNAUTHORIZED).' },
          403: { ...ErrorRef, description: 'The Host and Origin guard refused the request (FORBIDDEN).' },
          413: { ...ErrorRef, description: 'The body is over the size limit.' },
          415: { ...ErrorRef, description: 'The Content-Type is not application/json.' },
          429: { ...ErrorRef, description: 'Over the rate limit (RATE_LIMITED); a later call of a turn over the limit is an error result instead.' },
          500: { ...ErrorRef, description: 'An unexpected failure of the service itself.' },
          503: { ...ErrorRef, description: 'Shutting down or overloaded; Retry-After says when to retry.' },
        },
      },
    },
    async (request, reply) => {
      let turn: Turn;
      try {
        turn = readTurn(request.body, request.query.format);
      } catch (err) {
        if (err instanceof TurnShapeError) throw new ToolportError('BAD_REQUEST', err.message);
        throw err;
      }
      const tooMany = turnSizeRefusal(turn.calls);
      if (tooMany !== undefined) throw tooMany;

      // Aborts the turn's calls when the client goes away, with no AbortController unless a tool asks for a signal.
      const abort = new CallAbort();
      const stopWatching = whenClientGoes(request, () => abort.abort(CLIENT_GONE));
      const context: TurnContext = { caller: new RequestCaller(request), requestId: request.id, transport: CALLS_TRANSPORT, signal: abort };
      // `Accept: text/event-stream`: each call's progress as events naming the call, then the answer.
      const stream = acceptsEventStream(request.headers.accept) ? new EventStream(reply, keepAliveMs) : undefined;
      const reporters = new Map<number, ProgressReporter>();
      if (stream !== undefined) {
        context.onProgress = (index, progress) => {
          let reporter = reporters.get(index);
          if (reporter === undefined) {
            reporter = stream.progressOf(String(index), { id: turn.calls[index]!.id, index }, abort);
            reporters.set(index, reporter);
          }
          reporter.report(progress);
        };
      }
      try {
        const answer = JSON.stringify(render(turn.dialect, await runTurn(gateway, turn.calls, context)));
        if (stream === undefined) return await reply.type(JSON_TYPE).send(answer);
        for (const reporter of reporters.values()) reporter.finish();
        return stream.end(answer);
      } catch (err) {
        if (!stream?.started) throw err;
        // Too late for a status: the stream ends with the error body the error handler would have sent.
        request.log.error({ err }, 'unexpected error');
        return stream.end(JSON.stringify(errorBody('INTERNAL_ERROR', `Internal server error (request id ${request.id}).`)));
      } finally {
        stream?.close();
        stopWatching();
      }
    },
  );
}

function render(dialect: Dialect, answered: AnsweredCall[]): unknown {
  switch (dialect) {
    case 'anthropic':
      return toAnthropicToolResultMessage(answered);
    case 'openai':
      return toOpenAIToolMessages(answered);
    case 'openai-responses':
      return toOpenAIFunctionCallOutputs(answered);
  }
}
