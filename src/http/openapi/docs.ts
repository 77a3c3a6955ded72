import type { IncomingHttpHeaders } from 'node:http';
import type { StaticDocumentSpec } from '@fastify/swagger';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { OpenAPIDocument } from './tools-document.js';

// Headers that describe one connection or are made anew for the answer, not passed along.
const NOT_PASSED = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length', 'date', 'host']);

/**
 * The API browser at `/docs` (@fastify/swagger-ui over the app's OpenAPI document), loaded on
 * its first request: its module, static files and routes cost start-up about 25 ms for a page
 * few servers are ever asked for. The browser is a small Fastify app of its own, built once and
 * called in process; these routes carry the app's hooks (keys, Host guard), as the browser's own
 * did, and answer what it answers.
 */
export function docsRoutes(app: FastifyInstance, current: () => OpenAPIDocument, served: (request: FastifyRequest, reply: FastifyReply) => void): void {
  let browser: Promise<FastifyInstance> | undefined;
  const answer = async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> => {
    // The document itself follows the caller's scope, as /openapi.json does (`served` answers it);
    // the YAML form exists for the whole document only.
    const file = request.url.split('?')[0];
    if (file === '/docs/json') {
      served(request, reply);
      return reply;
    }
    if (file === '/docs/yaml' && request.principal?.tools !== undefined) {
      reply.callNotFound();
      return reply;
    }
    browser ??= documentBrowser(current()).catch((err: unknown) => {
      browser = undefined;
      throw err;
    });
    // GET for a HEAD too: Fastify answers a HEAD with the GET's headers and length, and no body.
    const res = await (await browser).inject({ method: 'GET', url: request.url, headers: passed(request.headers) });
    // Not one of the browser's files: the app's own answer to an unknown route.
    if (res.statusCode === 404) {
      reply.callNotFound();
      return reply;
    }
    for (const [name, value] of Object.entries(res.headers)) if (value !== undefined && !NOT_PASSED.has(name)) reply.header(name, value);
    return reply.code(res.statusCode).send(res.rawPayload);
  };
  app.get('/docs', { schema: { hide: true } }, answer);
  app.get('/docs/*', { schema: { hide: true } }, answer);
}

async function documentBrowser(served: OpenAPIDocument): Promise<FastifyInstance> {
  const [{ default: Fastify }, { default: swagger }, { default: swaggerUi }] = await Promise.all([
    import('fastify'),
    import('@fastify/swagger'),
    import('@fastify/swagger-ui'),
  ]);
  const browser = Fastify();
  // The app's document as /openapi.json serves it at the first request (the routes are all there by
  // then). The static mode's types know OpenAPI 3.0 only; it serves the 3.1 document as it is.
  const document = served as unknown as StaticDocumentSpec['document'];
  await browser.register(swagger, { mode: 'static', specification: { document } });
  await browser.register(swaggerUi, { routePrefix: '/docs' });
  await browser.ready();
  return browser;
}

function passed(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const kept: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) if (value !== undefined && !NOT_PASSED.has(name)) kept[name] = value;
  return kept;
}
