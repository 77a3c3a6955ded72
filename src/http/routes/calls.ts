import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { CallAbort } from '../../core/call-abort.js';
import { ToolportError } from '../../core/errors.js';
import type { CallRequest, Gateway } from '../../core/gateway.js';
import { errorResult, resultSize } from '../../core/result.js';
import type { ToolResult } from '../../core/types.js';
import { toAnthropicToolResultMessage, toOpenAIFunctionCallOutputs, toOpenAIToolMessages, type AnsweredCall } from '../../providers/results.js';
import { DIALECTS, readTurn, TurnShapeError, type Dialect, type Turn } from '../../providers/turns.js';
import { RequestCaller } from '../caller.js';
import { whenClientGoes } from '../client-gone.js';
import { asToolportError } from '../error-handler.js';
import { ErrorRef, TurnAnswer } from '../schemas.js';
import { REST_TRANSPORT } from './tools.js';

/** Most tool calls one turn may carry; a turn with more is refused whole. */
export const MAX_CALLS_PER_TURN = 64;
/**
 * Most bytes of results one turn answers with. One Read can return 10 MiB, so 64 of them would
 * hold most of a gigabyte: results are counted as they come, and one that would take the turn
 * past this is replaced by an error result saying so (the call did run).
 */
export const MAX_TURN_ANSWER_BYTES = 32 * 1024 * 1024;
/** Most calls of one turn that run (or wait for a slot) at once, so one turn cannot fill a tool's whole queue. */
export const MAX_TURN_CONCURRENCY = 8;

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
 * to the model out, so an agent loop is one request per turn. Every call goes through the gateway
 * as a single call would (scope, validation, admission, audit line, metric; each call after the
 * first counts against the rate limit too), all at once, answered in the order of the calls; a
 * call that is refused or fails is an error result for that call only.
 */
export function callsRoutes(fastify: FastifyInstance, { gateway }: { gateway: Gateway }): void {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const refusedBeforeGateway = (request: FastifyRequest, _reply: FastifyReply, error: FastifyError, done: () => void): void => {
    gateway.refused({ caller: new RequestCaller(request), requestId: request.id, transport: REST_TRANSPORT }, asToolportError(error, request));
    done();
  };

  app.post(
    '/calls',
    {
      onError: refusedBeforeGateway,
      config: { runsTools: true },
      schema: {
        operationId: 'callTools',
        summary: 'Run the tool calls of an assistant\'s turn; answer the next turn',
        description:
          'The body is an assistant turn as the provider returned it: an Anthropic message or its content array, an OpenAI Chat Completions assistant message or its tool_calls, or an OpenAI Responses output list. The answer is what goes back to the model: an Anthropic user message of tool_result blocks, the Chat Completions tool messages (and one user message with their images), or Responses function_call_output items.',
        tags: ['calls'],
        querystring: CallsQuery,
        response: {
          200: TurnAnswer,
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
      if (turn.calls.length > MAX_CALLS_PER_TURN) {
        throw new ToolportError('BAD_REQUEST', `The turn holds ${turn.calls.length} tool calls; at most ${MAX_CALLS_PER_TURN} are taken in one request.`, {
          calls: turn.calls.length,
          limit: MAX_CALLS_PER_TURN,
        });
      }

      const caller = new RequestCaller(request);
      // Aborts the turn's calls when the client goes away, with no AbortController unless a tool asks for a signal.
      const abort = new CallAbort();
      const stopWatching = whenClientGoes(request, () => abort.abort(CLIENT_GONE));
      let answerBytes = 0;
      const withinBudget = (result: ToolResult, name: string): ToolResult => {
        const size = resultSize(result);
        if (answerBytes + size <= MAX_TURN_ANSWER_BYTES) {
          answerBytes += size;
          return result;
        }
        return errorResult(
          `Tool "${name}" ran, but its result (${size} bytes) is left out: the results of one turn may take at most ${MAX_TURN_ANSWER_BYTES} bytes. Make fewer or smaller calls per turn (a Read with offset and limit, say).`,
        );
      };
      try {
        const answered = await inPool(
          MAX_TURN_CONCURRENCY,
          turn.calls.map((call, i) => async (): Promise<AnsweredCall> => {
            const identity = { caller, tool: call.name, requestId: request.id, transport: REST_TRANSPORT };
            if (call.problem !== undefined) {
              const refusal = new ToolportError(call.problem.kind === 'arguments-not-json' ? 'INVALID_JSON' : 'INVALID_INPUT', call.problem.message);
              gateway.refused(identity, refusal);
              return { id: call.id, result: errorResult(refusal.message) };
            }
            const callRequest: CallRequest = { ...identity, input: call.input, signal: abort, extra: i > 0 };
            return { id: call.id, result: withinBudget(await gateway.callSafe(callRequest), call.name) };
          }),
        );
        return await reply.type(JSON_TYPE).send(JSON.stringify(render(turn.dialect, answered)));
      } finally {
        stopWatching();
      }
    },
  );
}

/** Runs the tasks at most `size` at a time; the answers keep the tasks' order. */
async function inPool<T>(size: number, tasks: (() => Promise<T>)[]): Promise<T[]> {
  const results = new Array<T>(tasks.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < tasks.length) {
      const i = next++;
      results[i] = await tasks[i]!();
    }
  };
  await Promise.all(Array.from({ length: Math.min(size, tasks.length) }, worker));
  return results;
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
