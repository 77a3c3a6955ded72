import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import type { BackgroundWork } from '../../core/background.js';
import { ToolportError } from '../../core/errors.js';
import { ErrorRef, REFUSALS } from '../openapi/response-schemas.js';

const Status = Type.Ref('HealthStatus');
// Probes need no key and are never rate limited; the Host guard still applies (see local-only.ts).
const PROBE_REFUSALS = { 403: REFUSALS[403], 500: REFUSALS[500] };

/** What readiness reports of the upstream MCP servers: each one's state, by name. */
export interface UpstreamStates {
  status(): Record<string, { state: string; transport: string; tools: number; held: number; restarts: number; reason?: string }>;
}

const HEALTHY = JSON.stringify({ status: 'ok' });

/**
 * Liveness and readiness, for orchestrators and load balancers. Readiness lists the upstreams'
 * states but does not depend on them: the built-in tools serve while an upstream is down.
 */
export function healthRoutes(
  app: FastifyInstance,
  isDraining: () => boolean,
  upstreams?: UpstreamStates,
  tasks?: Pick<BackgroundWork, 'running'>,
  callTasks?: { readonly running: number },
): void {
  app.get(
    '/healthz',
    {
      schema: { operationId: 'healthz', summary: 'The process is up', tags: ['service'], response: { ...PROBE_REFUSALS, 200: Status } },
    },
    // The answer never varies: sent as text, with no serializer compiled for it on the first probe.
    async (_request, reply) => reply.type('application/json; charset=utf-8').send(HEALTHY),
  );

  app.get(
    '/readyz',
    {
      schema: {
        operationId: 'readyz',
        summary: 'Ready to take tool calls (503 while shutting down)',
        tags: ['service'],
        response: {
          ...PROBE_REFUSALS,
          200: Status,
          503: { ...ErrorRef, description: 'Shutting down (SHUTTING_DOWN) or overloaded (OVERLOADED): send no calls here now.' },
        },
      },
    },
    async () => {
      if (isDraining()) throw new ToolportError('SHUTTING_DOWN', 'The server is shutting down.');
      return {
        status: 'ready',
        ...(tasks === undefined ? {} : { tasks: { running: tasks.running } }),
        ...(callTasks === undefined ? {} : { callTasks: { working: callTasks.running } }),
        ...(upstreams === undefined ? {} : { upstreams: upstreams.status() }),
      };
    },
  );
}
