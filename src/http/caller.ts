import type { FastifyRequest } from 'fastify';
import type { ToolportError } from '../core/errors.js';
import type { Caller } from '../core/gateway.js';
import type { ToolScope } from '../core/principal.js';
import type { Permissions } from '../core/permissions.js';
import { isTokenPrincipal } from '../auth/identity.js';
import { countAnotherCall } from './guards/protection.js';

/**
 * The caller of a request, as the gateway sees it: the key the request authenticated with (its
 * label, scope and workspace). The fields are read only when needed: the client address (which, behind a
 * trusted proxy, is parsed from X-Forwarded-For) only for the audit line of a refusal. Shared by
 * the REST routes and `/mcp`, so both name the same caller the same way.
 */
export class RequestCaller implements Caller {
  readonly #request: FastifyRequest;

  constructor(request: FastifyRequest) {
    this.#request = request;
  }

  get label(): string | undefined {
    return this.#request.principal?.label;
  }

  get scope(): ToolScope | undefined {
    return this.#request.principal?.tools;
  }

  get workspace(): string | undefined {
    return this.#request.principal?.workspace;
  }

  get credential(): 'key' | 'token' {
    return isTokenPrincipal(this.#request.principal) ? 'token' : 'key';
  }

  get client(): string | undefined {
    const identity = this.#request.principal;
    return isTokenPrincipal(identity) ? identity.client : undefined;
  }

  get permissions(): Permissions | undefined {
    return this.#request.principal?.permissions;
  }

  get ip(): string {
    return this.#request.ip;
  }

  countAnotherCall(): Promise<ToolportError | undefined> {
    return countAnotherCall(this.#request);
  }
}
