import type { FastifyInstance } from 'fastify';

export interface ProtectionOptions {
  /** Calls per minute per key (or client address without keys); 0 switches the limit off. */
  rateLimit: number;
}

/** Rate limits and load shedding. (Implementation in progress.) */
export async function installProtection(_app: FastifyInstance, _options: ProtectionOptions): Promise<void> {}
