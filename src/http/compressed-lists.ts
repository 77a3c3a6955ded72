import { promisify } from 'node:util';
import zlib from 'node:zlib';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { entityTag, noneMatch } from './entity-tag.js';

/** A content coding a prebuilt body is sent in. */
export type ContentCoding = 'br' | 'gzip' | 'identity';

/** Bodies smaller than this go as they are: compressing them saves less than its headers cost. */
export const MIN_COMPRESSED_BYTES = 1024;

const gzip = promisify(zlib.gzip);
const brotli = promisify(zlib.brotliCompress);

// Each body is compressed once per coding, on the first request that asks for it, in Node's
// thread pool (brotli of a list of a thousand tools takes longer than a request should wait on the
// event loop); later requests send the same bytes. Keyed by the body itself: the registry makes
// a new Buffer when its tools change, and the old one takes its compressed forms with it.
const compressed = new WeakMap<Buffer, Partial<Record<Exclude<ContentCoding, 'identity'>, Buffer | Promise<Buffer>>>>();

/**
 * The coding to send a body in, from an `Accept-Encoding` header (RFC 9110 section 12.5.3):
 * brotli when acceptable, else gzip (or `x-gzip`), else identity. A coding is acceptable when it,
 * or `*`, is named without `q=0`; only that use of q-values is honoured, as identity is always sent
 * when nothing else is acceptable.
 */
export function chooseCoding(header: string | undefined): ContentCoding {
  if (header === undefined || header === '') return 'identity';
  let br: boolean | undefined;
  let gz: boolean | undefined;
  let any: boolean | undefined;
  for (const part of header.split(',')) {
    const [coding = '', ...params] = part.split(';');
    const name = coding.trim().toLowerCase();
    const q = params.map((p) => p.trim().toLowerCase()).find((p) => p.startsWith('q='));
    const acceptable = q === undefined || Number(q.slice(2)) > 0;
    if (name === 'br') br = acceptable;
    else if (name === 'gzip' || name === 'x-gzip') gz = (gz ?? false) || acceptable;
    else if (name === '*') any = acceptable;
  }
  if (br ?? any) return 'br';
  if (gz ?? any) return 'gzip';
  return 'identity';
}

/** The ETag of a body sent in `coding`: the identity body's, with `-br` or `-gz` inside the quotes. */
export function codedEntityTag(body: Buffer, coding: ContentCoding): string {
  const tag = entityTag(body);
  return coding === 'identity' ? tag : `${tag.slice(0, -1)}-${coding === 'br' ? 'br' : 'gz'}"`;
}

/** `body` compressed in `coding`: the same Buffer every time, or the promise of it while it is being made. */
export function compressedBody(body: Buffer, coding: Exclude<ContentCoding, 'identity'>): Buffer | Promise<Buffer> {
  let forms = compressed.get(body);
  if (forms === undefined) compressed.set(body, (forms = {}));
  const known = forms[coding];
  if (known !== undefined) return known;
  const making = (
    coding === 'br'
      ? brotli(body, { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 9, [zlib.constants.BROTLI_PARAM_SIZE_HINT]: body.length } })
      : gzip(body, { level: 9 })
  ).then(
    (made) => (forms[coding] = made),
    (err: unknown) => {
      // Made again by the next request rather than failing every one.
      delete forms[coding];
      throw err;
    },
  );
  forms[coding] = making;
  return making;
}

/**
 * Answers a GET with a body made once (a tool list): in the coding the client accepts best, with
 * that coding's strong ETag, `Vary: Accept-Encoding` and `Cache-Control: no-cache`, or 304 when
 * `If-None-Match` names that ETag. Not async: a body already compressed is sent without a promise.
 */
export function sendPrebuilt(request: FastifyRequest, reply: FastifyReply, body: Buffer, contentType: string): void {
  const coding = body.length < MIN_COMPRESSED_BYTES ? 'identity' : chooseCoding(request.headers['accept-encoding']);
  const tag = codedEntityTag(body, coding);
  // Added to what is there: the CORS guard may have said Vary: Origin.
  const vary = reply.getHeader('vary');
  reply
    .header('etag', tag)
    .header('cache-control', 'no-cache')
    .header('vary', vary === undefined ? 'Accept-Encoding' : `${String(vary)}, Accept-Encoding`);
  if (noneMatch(request.headers['if-none-match'], tag)) {
    reply.code(304).send();
    return;
  }
  reply.type(contentType);
  if (coding === 'identity') {
    reply.send(body);
    return;
  }
  reply.header('content-encoding', coding);
  const coded = compressedBody(body, coding);
  if (Buffer.isBuffer(coded)) reply.send(coded);
  else
    coded.then(
      (made) => reply.send(made),
      (err: unknown) => reply.send(err),
    );
}
