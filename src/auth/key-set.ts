import { createLocalJWKSet, errors, type JSONWebKeySet, type JWTVerifyGetKey } from 'jose';

/** The key set's refetches, whatever their answer, are at least this far apart (an unknown `kid`, or a failure). */
export const JWKS_COOLDOWN_MS = 30_000;
/** Keys are refetched after this long even when every `kid` is known, so a key the issuer withdrew stops working. */
export const JWKS_MAX_AGE_MS = 10 * 60_000;
/** The longest a JWKS fetch may take. */
export const JWKS_TIMEOUT_MS = 5_000;
/** The largest JWKS read; a bigger answer is a failure (a key set is a few KiB). */
export const MAX_JWKS_BYTES = 512 * 1024;

export interface KeySetOptions {
  /** Fetches are at least this far apart, whatever they answered (default `JWKS_COOLDOWN_MS`). */
  cooldownMs?: number;
  /** The clock, epoch ms (tests move it). */
  now?: () => number;
  fetchFn?: typeof fetch;
}

/** An issuer's keys, as the verifier uses them: `getKey` for jose, `reload` and `jwks` for start-up. */
export interface RemoteKeySet {
  readonly getKey: JWTVerifyGetKey;
  /** Fetches the keys now (start-up); rejects when they cannot be fetched. */
  reload(): Promise<void>;
  /** The key set last fetched, if any. */
  jwks(): JSONWebKeySet | undefined;
}

/**
 * An issuer's JWKS, fetched at most once per `cooldownMs` whatever the answer. jose's
 * `createRemoteJWKSet` starts its cooldown only after a success, so while the endpoint failed
 * every token with an unknown `kid` fetched it again (about 700 fetches a second from anonymous
 * clients, issue 31). Here every attempt starts the cooldown. A token whose `kid` the keys held do
 * not have fetches them again when an attempt is due (a rotation); otherwise it is refused as jose
 * refuses it (`JWKSNoMatchingKey`), without a fetch. The one request whose fetch failed gets the
 * failure (an Error, logged once per attempt by whoever answers it); requests that arrived while
 * it was in flight share it and get the refusal. Keys older than `JWKS_MAX_AGE_MS` are fetched
 * again on the next request, under the same cooldown; while that fails, the keys held are used,
 * so a provider that is down does not take toolport down with it.
 */
export function remoteKeySet(jwksUri: string, options: KeySetOptions = {}): RemoteKeySet {
  const cooldownMs = options.cooldownMs ?? JWKS_COOLDOWN_MS;
  const now = options.now ?? Date.now;
  const fetchFn = options.fetchFn ?? fetch;
  let keys: JSONWebKeySet | undefined;
  let local: JWTVerifyGetKey | undefined;
  let fetchedAt = -Infinity;
  let attemptedAt = -Infinity;
  let pending: Promise<void> | undefined;

  const fetchKeys = async (): Promise<void> => {
    attemptedAt = now();
    const fetched = await readKeySet(fetchFn, jwksUri);
    local = createLocalJWKSet(fetched);
    keys = fetched;
    fetchedAt = now();
  };
  const reload = (): Promise<void> => (pending ??= fetchKeys().finally(() => (pending = undefined)));
  // Fetches when an attempt is due: 'fetched', 'held' (the cooldown holds it back, or another
  // request's fetch failed), or the failure of the fetch this request made.
  const refetch = async (): Promise<'fetched' | 'held' | Error> => {
    if (pending !== undefined)
      return pending.then(
        () => 'fetched' as const,
        () => 'held' as const,
      );
    if (now() - attemptedAt < cooldownMs) return 'held';
    return reload().then(
      () => 'fetched' as const,
      (err: unknown) => (err instanceof Error ? err : new Error(String(err))),
    );
  };

  const getKey: JWTVerifyGetKey = async (header, token) => {
    if (local === undefined || now() - fetchedAt >= JWKS_MAX_AGE_MS) {
      const outcome = await refetch();
      if (local === undefined) throw outcome instanceof Error ? outcome : new Error(`the keys at ${jwksUri} could not be fetched`);
    }
    try {
      return await local(header, token);
    } catch (err) {
      if (!(err instanceof errors.JWKSNoMatchingKey)) throw err;
      const outcome = await refetch();
      if (outcome === 'held') throw err;
      if (outcome instanceof Error) throw outcome;
      return local(header, token);
    }
  };
  return { getKey, reload, jwks: () => keys };
}

async function readKeySet(fetchFn: typeof fetch, jwksUri: string): Promise<JSONWebKeySet> {
  const response = await fetchFn(jwksUri, {
    headers: { accept: 'application/json, application/jwk-set+json' },
    signal: AbortSignal.timeout(JWKS_TIMEOUT_MS),
    redirect: 'error',
  });
  if (!response.ok) {
    await response.body?.cancel();
    throw new Error(`HTTP ${response.status}`);
  }
  const declared = Number(response.headers.get('content-length') ?? 0);
  if (declared > MAX_JWKS_BYTES) {
    await response.body?.cancel();
    throw new Error(`the key set is larger than ${MAX_JWKS_BYTES} bytes`);
  }
  const text = await boundedText(response, MAX_JWKS_BYTES);
  let document: unknown;
  try {
    document = JSON.parse(text);
  } catch {
    throw new Error('the answer is not JSON');
  }
  const keys = (document as { keys?: unknown } | null)?.keys;
  if (!Array.isArray(keys) || !keys.every((key) => typeof key === 'object' && key !== null && !Array.isArray(key))) {
    throw new Error('the answer is not a JSON Web Key Set');
  }
  return document as JSONWebKeySet;
}

async function boundedText(response: Response, max: number): Promise<string> {
  const reader = response.body?.getReader();
  if (reader === undefined) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > max) {
      await reader.cancel();
      throw new Error(`the key set is larger than ${max} bytes`);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}
