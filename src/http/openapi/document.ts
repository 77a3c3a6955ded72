import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import swagger from '@fastify/swagger';
import type { ToolScope } from '../../core/principal.js';
import { VERSION } from '../../infra/version.js';
import { namedSchemas } from './components.js';
import { docsRoutes } from './docs.js';
import { PUBLISHED_SCHEMAS } from './response-schemas.js';
import { scopedDocument, TOOLS_DOCUMENT_URL, toolsDocument, type OpenAPIDocument } from './tools-document.js';
import { liveDocument } from './live-tools.js';
import { sendPrebuilt } from '../compressed-lists.js';
import type { ToolRegistry } from '../../core/registry.js';
import type { IssuerMetadata } from '../../auth/issuer-metadata.js';
import { securitySchemes } from './security.js';

const CONTRACT = `
Every error body is itself a ToolResult (\`isError: true\`, one text block) with a machine-readable
\`error: { code, message, details? }\`, so an agent loop can forward any response to the model unchanged.

| case | status | body |
| --- | --- | --- |
| the tool ran, whatever it returned | 200 | ToolResult; \`isError\` is \`false\` or \`true\` |
| the tool threw, timed out, or returned garbage | 200 | ToolResult with \`isError: true\` |
| no body at all | as for the input \`{}\` | as for the input \`{}\` |
| body is not valid JSON, or not an object | 400 | error body (\`INVALID_JSON\`, \`INVALID_INPUT\`) |
| input fails the tool's schema | 400 | error body (\`INVALID_INPUT\`), the first 50 violations with their JSON paths, and how many more |
| no such tool | 404 | error body (\`TOOL_NOT_FOUND\`), lists the available tools |
| wrong Content-Type | 415 | error body (\`UNSUPPORTED_MEDIA_TYPE\`) |
| body over the limit | 413 | error body (\`PAYLOAD_TOO_LARGE\`) |
| no valid API key (when keys are configured) | 401 | error body (\`UNAUTHORIZED\`), \`WWW-Authenticate: Bearer\` |
| the key may not use the tool; a non-local Host or Origin on loopback | 403 | error body (\`FORBIDDEN\`) |
| over the rate limit | 429 | error body (\`RATE_LIMITED\`), \`Retry-After\` |
| anything unexpected in the service itself | 500 | error body (\`INTERNAL_ERROR\`), no internals |
| shutting down, overloaded, or the tool's queue is full | 503 | error body (\`SHUTTING_DOWN\`, \`OVERLOADED\`, \`QUEUE_FULL\`), \`Retry-After\` |
`;

const JSON_TYPE = 'application/json; charset=utf-8';

/**
 * Registers the OpenAPI 3.1 document (`/openapi.json`), the tools-only document for consumers
 * that turn every operation into a tool (`/openapi.tools.json`, see `toolsDocument`) and,
 * optionally, the document's browser (`/docs`).
 */
export async function registerOpenAPI(
  app: FastifyInstance,
  options: { docs: boolean; registry: ToolRegistry; oauth?: { issuer: IssuerMetadata; scopes: readonly string[] } | undefined },
): Promise<void> {
  const security = securitySchemes(options.oauth);
  for (const schema of namedSchemas(PUBLISHED_SCHEMAS)) app.addSchema(schema);
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'toolport',
        version: VERSION,
        description: `Agent tools behind one registry, served over REST.\n${CONTRACT}`,
        license: { name: 'MIT', identifier: 'MIT' },
      },
      // Relative: the document describes the server that serves it, whatever name reaches it.
      servers: [{ url: '/', description: 'The server that serves this document.' }],
      components: { securitySchemes: security.schemes },
      // Keys are optional: a server without keys takes calls without one.
      security: security.requirements,
      tags: [
        { name: 'tools', description: 'One operation per tool: POST the tool input, get a ToolResult.' },
        { name: 'calls', description: 'An assistant\'s turn in, in its provider\'s shape; the results out, as the next turn.' },
        { name: 'tasks', description: 'Tool calls run as tasks: started with `Prefer: respond-async`, then asked for (or streamed) by id, or cancelled.' },
        { name: 'service', description: 'Tool listing and health.' },
      ],
    },
    // A route that reads its body itself documents it through its config (see FastifyContextConfig.documentedBody).
    transform: ({ schema, url, route }) => {
      const body = (route.config as { documentedBody?: object } | undefined)?.documentedBody;
      return { schema: body === undefined ? schema : { ...schema, body }, url };
    },
    refResolver: {
      // Name shared schemas after their $id, so the document reads `#/components/schemas/ToolResult`.
      buildLocalReference: (json, _baseUri, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`),
    },
  });
  const live = liveDocument(options.registry);
  const current = (): OpenAPIDocument => live(() => app.swagger() as unknown as OpenAPIDocument);
  app.decorate('openapiDocument', current);
  // Each document is serialised once per change of the tools (and per key scope for the tools-only
  // one), on its first request, and sent as lists are: compressed when the client accepts it, with
  // a strong ETag per coding. Weakly held: a keys reload that drops a scope drops its document too.
  // Both documents follow the caller's scope: a token or key scoped to some tools reads no other tool here.
  let madeFrom: OpenAPIDocument | undefined;
  let full: Buffer | undefined;
  let unscoped: Buffer | undefined;
  let scoped = new WeakMap<ToolScope, Buffer>();
  let scopedFull = new WeakMap<ToolScope, Buffer>();
  const fresh = (): OpenAPIDocument => {
    const document = current();
    if (madeFrom !== document) {
      madeFrom = document;
      full = unscoped = undefined;
      scoped = new WeakMap();
      scopedFull = new WeakMap();
    }
    return document;
  };
  const bytes = (document: unknown): Buffer => Buffer.from(JSON.stringify(document));
  const served = (request: FastifyRequest, reply: FastifyReply): void => {
    const document = fresh();
    const scope = request.principal?.tools;
    let body: Buffer | undefined;
    if (scope === undefined) body = full ??= bytes(document);
    else if ((body = scopedFull.get(scope)) === undefined) scopedFull.set(scope, (body = bytes(scopedDocument(document, scope))));
    sendPrebuilt(request, reply, body, JSON_TYPE);
  };
  app.get('/openapi.json', { schema: { hide: true } }, served);
  if (options.docs) docsRoutes(app, current, served);
  app.get(TOOLS_DOCUMENT_URL, { schema: { hide: true } }, (request, reply) => {
    const document = fresh();
    const scope = request.principal?.tools;
    let body: Buffer | undefined;
    if (scope === undefined) body = unscoped ??= bytes(toolsDocument(document));
    else if ((body = scoped.get(scope)) === undefined) scoped.set(scope, (body = bytes(toolsDocument(document, scope))));
    sendPrebuilt(request, reply, body, JSON_TYPE);
  });
}
