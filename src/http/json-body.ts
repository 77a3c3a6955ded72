import type { FastifyInstance } from 'fastify';
import { ToolportError } from '../core/errors.js';
import { bodyOf } from './error-handler.js';

const CHARSET = /;\s*charset\s*=\s*"?([^";\s]+)/i;

/**
 * JSON is the only body type. The body must be UTF-8 (RFC 8259): another declared charset is a
 * 415, and bytes that are not UTF-8 are refused rather than turned into U+FFFD, since input is
 * taken as sent. An empty body means "no arguments", as `{}`; `__proto__` and
 * `constructor.prototype` keys are refused rather than parsed.
 */
export function installJsonBody(app: FastifyInstance): void {
  const parseJson = app.getDefaultJsonParser('error', 'error');
  const utf8 = new TextDecoder('utf-8', { fatal: true });
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    const charset = CHARSET.exec(request.headers['content-type'] ?? '')?.[1]?.toLowerCase();
    if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
      return done(
        new ToolportError('UNSUPPORTED_MEDIA_TYPE', `Unsupported charset ${JSON.stringify(charset)}: send ${bodyOf(request)} as UTF-8 JSON.`),
        undefined,
      );
    }
    let text: string;
    try {
      text = utf8.decode(body as Buffer);
    } catch {
      return done(new ToolportError('INVALID_JSON', `Request body is not valid UTF-8; send ${bodyOf(request)} as UTF-8 JSON.`), undefined);
    }
    if (text === '') return done(null, {});
    return parseJson(request, text, done);
  });
}
