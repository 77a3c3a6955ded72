import type { Dispatcher } from 'undici';
import { UpstreamContentError } from './http-errors.js';

/** A response body as undici's `request` gives it. */
export type Body = Dispatcher.ResponseData['body'];

/** Hands each chunk of `body` to `onChunk` until the body ends; a throw of `onChunk` destroys the body and rejects. */
export function consume(body: Body, onChunk: (chunk: Buffer) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    let settled = false;
    const fail = (err: Error): void => {
      if (settled) return;
      settled = true;
      body.off('data', onData);
      body.destroy();
      reject(err);
    };
    const onData = (chunk: Buffer): void => {
      try {
        onChunk(chunk);
      } catch (err) {
        fail(err as Error);
      }
    };
    body.on('data', onData);
    body.once('error', fail);
    body.once('end', () => {
      settled = true;
      resolve();
    });
    // Closed without an end or an error: the body was cut short.
    body.once('close', () => fail(new UpstreamContentError('the upstream cut its response short')));
  });
}

/** A body whole as text, up to `maxBytes`; past it, the error `tooLarge` gives is thrown. */
export async function readBounded(body: Body, maxBytes: number, tooLarge: () => Error): Promise<string> {
  const chunks: Buffer[] = [];
  let length = 0;
  await consume(body, (chunk) => {
    length += chunk.length;
    if (length > maxBytes) throw tooLarge();
    chunks.push(chunk);
  });
  return chunks.length === 1 ? chunks[0]!.toString('utf8') : Buffer.concat(chunks, length).toString('utf8');
}

/** Reads what is left of a body without keeping it (a little of it: undici's `dump` stops at 128 KiB and closes the rest). */
export async function discard(body: Body): Promise<void> {
  await body.dump().catch(() => undefined);
}

/** A response header's value (the first, if it came more than once). */
export function header(headers: Dispatcher.ResponseData['headers'], name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** The media type of a response, lower case, without parameters. */
export function mediaType(headers: Dispatcher.ResponseData['headers']): string | undefined {
  return header(headers, 'content-type')?.split(';', 1)[0]!.trim().toLowerCase();
}

/** Resolves after `ms`; rejects with the signal's reason once it aborts. */
export function delay(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason as Error);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal.reason as Error);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
