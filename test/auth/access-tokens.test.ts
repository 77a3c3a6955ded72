import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AccessTokens, MAX_INTROSPECTIONS } from '../../src/auth/access-tokens.js';
import { IdentityMapper } from '../../src/auth/identity.js';
import { Introspector } from '../../src/auth/introspection.js';
import { JwtVerifier } from '../../src/auth/jwt-verifier.js';
import { ToolportError } from '../../src/core/errors.js';

test('a flood of made-up opaque tokens asks the identity provider at most MAX_INTROSPECTIONS questions at once; the rest are refused as overloaded', async () => {
  let asked = 0;
  const answers: Array<() => void> = [];
  // An introspection endpoint that answers only when told to: every question stays open.
  const fetchFn = (async () => {
    asked += 1;
    await new Promise<void>((resolve) => answers.push(resolve));
    return new Response(JSON.stringify({ active: false }), { status: 200, headers: { 'content-type': 'application/json' } });
  }) as typeof fetch;
  const introspector = new Introspector({
    endpoint: 'http://127.0.0.1:1/introspect',
    client: { id: 'toolport', secret: 'secret-secret-secret' },
    issuer: 'http://127.0.0.1:1',
    audiences: ['http://127.0.0.1:3000'],
    fetchFn,
  });
  const verifier = new JwtVerifier({ issuers: new Map(), audiences: [], keySets: () => undefined as never });
  const tokens = new AccessTokens({ verifier, mapper: new IdentityMapper(), introspector });
  const checks = Array.from({ length: MAX_INTROSPECTIONS + 50 }, (_, i) =>
    tokens.verify(`made-up-token-${i}`)!.then(
      () => 'passed',
      (err: unknown) => err,
    ),
  );
  const early = await Promise.all(checks.slice(MAX_INTROSPECTIONS));
  assert.equal(asked, MAX_INTROSPECTIONS);
  for (const refusal of early) {
    assert.ok(refusal instanceof ToolportError);
    assert.equal(refusal.code, 'OVERLOADED');
    assert.equal(refusal.message, 'Too many access tokens are being checked with the identity provider at once; try again shortly.');
  }
  for (const answer of answers) answer();
  for (const outcome of await Promise.all(checks.slice(0, MAX_INTROSPECTIONS))) assert.equal((outcome as Error).name, 'TokenRefusal');
  // Room again once the questions are answered.
  const again = tokens.verify('made-up-token-again')!.catch((err: unknown) => err);
  while (answers.length < MAX_INTROSPECTIONS + 1) await new Promise((resolve) => setImmediate(resolve));
  answers.at(-1)!();
  assert.equal(((await again) as Error).name, 'TokenRefusal');
  assert.equal(asked, MAX_INTROSPECTIONS + 1);
});
