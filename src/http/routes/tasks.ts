import { PassThrough } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type, type Static } from 'typebox';
import { isFinal, type CallTaskStore, type TaskSnapshot } from '../../core/call-task.js';
import { taskOwner } from '../../core/call-task-store.js';
import { ToolportError } from '../../core/errors.js';
import { RequestCaller } from '../caller.js';
import { whenClientGoes } from '../client-gone.js';
import { DEFAULT_IDLE_TIMEOUT_MS } from '../defaults.js';
import { ErrorRef, REFUSALS, type TaskAnswerSchema } from '../openapi/response-schemas.js';
import { acceptsEventStream, EVENT_STREAM_TYPE, keepAliveInterval } from '../sse.js';

/** A task as REST answers it (the `Task` component). */
export type TaskAnswer = Static<typeof TaskAnswerSchema>;

const TaskRef = Type.Ref('Task');
const TaskIdParams = Type.Object({ id: Type.String({ description: 'The task id, as `Location` gave it.' }) });
const NOT_FOUND = {
  ...ErrorRef,
  description: "No such task for this caller (TASK_NOT_FOUND): unknown, forgotten after its TTL, or another caller's. The body is the same in all three cases.",
};
/** What `GET /tasks/{id}` streams with `Accept: text/event-stream`. */
export const TASK_EVENTS =
  "With `Accept: text/event-stream`, Server-Sent Events: one `event: task` at once, then one on each change of status or progress, each with data the Task as `application/json` would give it; the stream ends after the event of a final status (`completed`, `failed`, `cancelled`), which carries the `result` or `error`. Comment lines (`:`) keep a silent task's connection open.";

export interface TaskRoutesOptions {
  tasks: CallTaskStore;
  /** The connections' idle timeout: an event stream sends a comment at least twice per period. Default 30 s. */
  idleTimeoutMs?: number;
}

/** A task's JSON: timestamps as RFC 3339 text, and only the fields that apply. */
export function taskAnswer(task: TaskSnapshot, withResult = true): TaskAnswer {
  return {
    id: task.id,
    tool: task.tool,
    status: task.status,
    createdAt: new Date(task.createdAt).toISOString(),
    lastUpdatedAt: new Date(task.lastUpdatedAt).toISOString(),
    ttlMs: task.ttlMs,
    pollIntervalMs: task.pollIntervalMs,
    ...(task.progress === undefined ? {} : { progress: task.progress }),
    ...(withResult && task.result !== undefined ? { result: task.result } : {}),
    ...(withResult && task.error !== undefined ? { error: task.error } : {}),
  } as TaskAnswer;
}

/** Where a task is found: the `Location` of a 202. */
export function taskLocation(id: string): string {
  return `/tasks/${encodeURIComponent(id)}`;
}

/**
 * `/tasks`: the caller's tasks (tool calls started with `Prefer: respond-async`), each known only to
 * the key that started it: another key's task id is answered exactly as an unknown one.
 */
export function taskRoutes(fastify: FastifyInstance, { tasks, idleTimeoutMs = DEFAULT_IDLE_TIMEOUT_MS }: TaskRoutesOptions): void {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const keepAliveMs = keepAliveInterval(idleTimeoutMs);
  const ownerOf = (request: FastifyRequest): string => taskOwner(new RequestCaller(request));

  app.get(
    '/tasks',
    {
      schema: {
        operationId: 'listTasks',
        summary: "The caller's tasks",
        tags: ['tasks'],
        response: { ...REFUSALS, 200: Type.Ref('TaskList') },
      },
    },
    async (request) => ({ tasks: tasks.list(ownerOf(request)).map((task) => taskAnswer(task, false)) }),
  );

  app.get(
    '/tasks/:id',
    {
      schema: {
        operationId: 'getTask',
        summary: 'A task: its status and, once it is done, its result',
        description: 'Poll it (`pollIntervalMs` says how often), or ask for `text/event-stream` to hear each change until the task ends.',
        tags: ['tasks'],
        params: TaskIdParams,
        response: {
          ...REFUSALS,
          200: {
            description: 'The task now.',
            content: { 'application/json': { schema: TaskRef }, [EVENT_STREAM_TYPE]: { schema: { type: 'string', description: TASK_EVENTS } } },
          },
          404: NOT_FOUND,
          429: {
            ...ErrorRef,
            description:
              'Over the rate limit (RATE_LIMITED; Retry-After says when to retry), or, for `text/event-stream`, the key holds as many streams and waits on tasks open as it may (TOO_MANY_TASKS).',
          },
        },
      },
      config: { runsTools: true },
    },
    async (request, reply) => {
      const owner = ownerOf(request);
      const task = tasks.get(owner, request.params.id);
      if (!acceptsEventStream(request.headers.accept)) return taskAnswer(task);
      // A stream holds a connection: counted against the key's bound on them (429 TOO_MANY_TASKS past it).
      const release = tasks.hold(owner);
      return streamTask(request, reply, tasks, owner, task, keepAliveMs, release);
    },
  );

  app.delete(
    '/tasks/:id',
    {
      schema: {
        operationId: 'cancelTask',
        summary: "Cancels a working task through its call's abort signal",
        description: 'The task is `cancelled` at once, whatever its call then does; a task that already ended is answered as it is.',
        tags: ['tasks'],
        params: TaskIdParams,
        response: { ...REFUSALS, 200: { ...TaskRef, description: 'The task after the cancellation.' }, 404: NOT_FOUND },
      },
    },
    async (request) => taskAnswer(tasks.cancel(ownerOf(request), request.params.id)),
  );
}

/**
 * The task's changes as Server-Sent Events until it ends or the client goes. Through
 * `reply.send`, so the app's onSend hooks run (the request id, closing while draining).
 */
function streamTask(
  request: FastifyRequest,
  reply: FastifyReply,
  tasks: CallTaskStore,
  owner: string,
  first: TaskSnapshot,
  keepAliveMs: number,
  release: () => void,
): FastifyReply {
  const body = new PassThrough();
  void reply.code(200).header('content-type', EVENT_STREAM_TYPE).header('cache-control', 'no-cache').header('x-accel-buffering', 'no').send(body);
  let ended = false;
  let stopWatching = (): void => {};
  let stopClient = (): void => {};
  const keepAlive = setInterval(() => body.write(':\n\n'), keepAliveMs);
  const end = (): void => {
    if (ended) return;
    ended = true;
    clearInterval(keepAlive);
    stopWatching();
    stopClient();
    release();
    body.end();
  };
  const send = (task: TaskSnapshot): void => {
    if (ended) return;
    body.write(`event: task\ndata: ${JSON.stringify(taskAnswer(task))}\n\n`);
    if (isFinal(task.status)) end();
  };
  send(first);
  if (ended) return reply;
  try {
    stopWatching = tasks.watch(owner, first.id, send);
  } catch (err) {
    // Forgotten between the two looks (its TTL ran out): the stream just ends.
    if (!(err instanceof ToolportError)) throw err;
    end();
    return reply;
  }
  stopClient = whenClientGoes(request, end);
  return reply;
}
