import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { ToolportError } from '../../core/errors.js';
import { ErrorRef } from '../schemas.js';

const Status = Type.Object({ status: Type.String() });

/** Liveness and readiness, for orchestrators and load balancers. */
export function healthRoutes(app: FastifyInstance, isDraining: () => boolean): void {
  app.get('/healthz', {
    schema: { operationId: 'healthz', summary: 'The process is up', tags: ['service'], response: { 200: Status } },
  }, async () => ({ status: 'ok' }));

  app.get('/readyz', {
    schema: {
      operationId: 'readyz',
      summary: 'Ready to take tool calls (503 while shutting down)',
      tags: ['service'],
      response: { 200: Status, 503: ErrorRef },
    },
  }, async () => {
    if (isDraining()) throw new ToolportError('SHUTTING_DOWN', 'The server is shutting down.');
    return { status: 'ready' };
  });
}
