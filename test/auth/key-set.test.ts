import assert from 'node:assert/strict';
import { test } from 'node:test';
import { exportJWK, generateKeyPair } from 'jose';
import { JWKS_MAX_AGE_MS, MAX_JWKS_BYTES, remoteKeySet } from '#src/auth/key-set.js';

async function signingKey(kid: string) {
  const { publicKey } = await generateKeyPair('ES256');
  return { jwk: { ...(await exportJWK(publicKey)), kid, alg: 'ES256' } };
}

/** A JWKS endpoint whose answer the test sets, counting what it is asked. */
function endpoint(answer: () => Response) {
  let fetches = 0;
  const fetchFn = (async () => {
    fetches += 1;
    return answer();
  }) as typeof fetch;
  return {
    fetchFn,
    get fetches() {
      return fetches;
    },
  };
}

const json = (body: unknown) => new Response(JSON.stringify(body), { headers: { 'content-type': 'application/json' } });

test('keys older than the maximum age are fetched again; while that fails, the keys held keep working, one attempt per cooldown', async () => {
  let now = 0;
  const key = await signingKey('k1');
  let failing = false;
  const jwks = endpoint(() => (failing ? new Response('no', { status: 503 }) : json({ keys: [key.jwk] })));
  const set = remoteKeySet('https://idp.example.com/jwks', { now: () => now, fetchFn: jwks.fetchFn });
  await set.reload();
  const header = { alg: 'ES256', kid: 'k1' };
  const use = () => set.getKey(header, { payload: '', signature: '' } as never);
  await use();
  failing = true;
  now = JWKS_MAX_AGE_MS;
  // Requests arriving together share the one attempt, and all still get the key.
  await Promise.all([use(), use(), use()]);
  assert.equal(jwks.fetches, 2);
  now += 29_999;
  await use();
  assert.equal(jwks.fetches, 2, 'within the cooldown of the failed attempt');
  now += 1;
  await use();
  assert.equal(jwks.fetches, 3);
});

test('a key set that is too large, not JSON, or not a key set is a failure', async () => {
  const cases: Array<[Response, string]> = [
    [new Response('x'.repeat(MAX_JWKS_BYTES + 1)), `the key set is larger than ${MAX_JWKS_BYTES} bytes`],
    [new Response('{'), 'the answer is not JSON'],
    [json({ keys: 'none' }), 'the answer is not a JSON Web Key Set'],
    [json([1]), 'the answer is not a JSON Web Key Set'],
    [new Response('', { status: 500 }), 'HTTP 500'],
  ];
  for (const [response, message] of cases) {
    const set = remoteKeySet('https://idp.example.com/jwks', { fetchFn: endpoint(() => response).fetchFn });
    await assert.rejects(set.reload(), { message });
    assert.equal(set.jwks(), undefined);
  }
});
