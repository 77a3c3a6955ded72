import type { Dispatcher } from 'undici';
import type { BudgetShare } from '../byte-budget.js';
import { UpstreamContentError } from './errors.js';

/** A response body as undici's `request` gives it. */
export type Body = Dispatcher.ResponseData['body'];

/**
 * Hands each chunk of `body` to `onChunk` until the body ends; a throw of `onChunk` (or a promise
 * it returns that rejects) destroys the body and rejects. While a promise it returned is pending,
 * the body is paused: the upstream waits.
 */
export function consume(body: Body, onChunk: (chunk: Buffer) => void | Promise<void>): Promise<void> {
  return new Promise((resolve, reject) => {
    let settled = false;
    let ended = false;
    // The chunk being taken while the body is paused: the end waits for it.
    let taking: Promise<void> | undefined;
    const fail = (err: Error): void => {
      if (settled) return;
      settled = true;
      body.off('data', onData);
      body.destroy();
      reject(err);
    };
    const finish = (): void => {
      if (settled) return;
      settled = true;
      resolve();
    };
    const onData = (chunk: Buffer): void => {
      try {
        const later = onChunk(chunk);
        if (later === undefined) return;
        body.pause();
        taking = later.then(
          () => {
            taking = undefined;
            if (ended) finish();
            else if (!settled) body.resume();
          },
          (err: unknown) => fail(err as Error),
        );
      } catch (err) {
        fail(err as Error);
      }
    };
    body.on('data', onData);
    body.once('error', fail);
    body.once('end', () => {
      ended = true;
      if (taking === undefined) finish();
    });
    // Closed without an end or an error: the body was cut short.
    body.once('close', () => {
      if (!ended) fail(new UpstreamContentError('the upstream cut its response short'));
    });
  });
}

/**
 * A body whole, up to `maxBytes`; past it, the error `tooLarge` gives is thrown. Each chunk is
 * counted in `share` before it is kept; the caller ends the share.
 */
export async function readBounded(body: Body, maxBytes: number, tooLarge: () => Error, share: BudgetShare): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let length = 0;
  const keep = (chunk: Buffer): void => {
    chunks.push(chunk);
    share.hold(length);
  };
  await consume(body, (chunk) => {
    length += chunk.length;
    if (length > maxBytes) throw tooLarge();
    const wait = share.room(chunk.length);
    if (wait === undefined) return keep(chunk);
    return wait.then(() => keep(chunk));
  });
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, length);
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
