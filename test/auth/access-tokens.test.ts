import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AccessTokens } from '#src/auth/access-tokens.js';
import { IdentityMapper } from '#src/auth/identity.js';
import { Introspector } from '#src/auth/introspection.js';
import {
  INTROSPECTION_QUEUE_PER_ADDRESS,
  INTROSPECTIONS_PER_ADDRESS_PER_MINUTE,
  MAX_INTROSPECTIONS,
  MAX_INTROSPECTIONS_PER_ADDRESS,
} from '#src/auth/introspection-admission.js';
import { JwtVerifier } from '#src/auth/jwt-verifier.js';
import { ToolportError } from '#src/core/errors.js';

/** Access tokens whose introspection endpoint answers only when told to: every question stays open. */
function heldIntrospection(now: () => number = Date.now) {
  const asked: string[] = [];
  const answers: Array<() => void> = [];
  const fetchFn = (async (_url: string, init: { body: URLSearchParams }) => {
    asked.push(init.body.get('token')!);
    await new Promise<void>((resolve) => answers.push(resolve));
    return new Response(JSON.stringify({ active: false }), { status: 200, headers: { 'content-type': 'application/json' } });
  }) as unknown as typeof fetch;
  const introspector = new Introspector({
    endpoint: 'http://127.0.0.1:1/introspect',
    client: { id: 'toolport', secret: 'secret-secret-secret' },
    issuer: 'http://127.0.0.1:1',
    audiences: ['http://127.0.0.1:3000'],
    fetchFn,
  });
  const verifier = new JwtVerifier({ issuers: new Map(), audiences: [], keySets: () => undefined as never });
  const tokens = new AccessTokens({ verifier, mapper: new IdentityMapper(), introspector, now });
  const settle = (from: string, token: string) =>
    tokens.verify(token, from)!.then(
      () => 'passed',
      (err: unknown) => err,
    );
  return { tokens, asked, answers, settle };
}

const ticks = async (n = 5) => {
  for (let i = 0; i < n; i += 1) await new Promise((resolve) => setImmediate(resolve));
};

test("one address's flood of made-up opaque tokens takes its share of the introspection slots; the others' tokens are still asked about", async () => {
  const { asked, answers, settle } = heldIntrospection();
  const flood = Array.from({ length: 50 }, (_, i) => settle('198.51.100.1', `made-up-${i}`));
  await ticks();
  assert.equal(asked.length, MAX_INTROSPECTIONS_PER_ADDRESS, 'the flooding address holds its share only');
  // Past its share and its place in the queue, refused at once, without a question to the provider.
  const refused = await Promise.all(flood.slice(MAX_INTROSPECTIONS_PER_ADDRESS + INTROSPECTION_QUEUE_PER_ADDRESS));
  for (const refusal of refused) {
    assert.ok(refusal instanceof ToolportError);
    assert.equal(refusal.code, 'QUEUE_FULL');
  }
  // Twelve other clients, one token each: every one is asked about at once.
  const others = Array.from({ length: MAX_INTROSPECTIONS - MAX_INTROSPECTIONS_PER_ADDRESS }, (_, i) => settle(`203.0.113.${i}`, `real-${i}`));
  await ticks();
  assert.equal(asked.length, MAX_INTROSPECTIONS);
  assert.deepEqual(
    asked.slice(MAX_INTROSPECTIONS_PER_ADDRESS),
    Array.from({ length: others.length }, (_, i) => `real-${i}`),
  );
  // One more client waits, and its turn comes before the flooding address's queued tokens.
  const late = settle('203.0.113.200', 'real-late');
  await ticks();
  answers.shift()!();
  await ticks();
  assert.equal(asked.at(-1), 'real-late');
  while (answers.length > 0) {
    answers.shift()!();
    await ticks();
  }
  for (const outcome of await Promise.all([...others, late])) assert.equal((outcome as Error).name, 'TokenRefusal');
  assert.equal(asked.length, MAX_INTROSPECTIONS + 1 + INTROSPECTION_QUEUE_PER_ADDRESS);
});

test('an address that used its budget of new tokens for the minute is refused without asking the provider', async () => {
  let now = Date.now();
  const { asked, answers, settle } = heldIntrospection(() => now);
  const answering = setInterval(() => answers.splice(0).forEach((answer) => answer()), 1);
  try {
    for (let i = 0; i < INTROSPECTIONS_PER_ADDRESS_PER_MINUTE; i += 1) assert.equal(((await settle('198.51.100.9', `t-${i}`)) as Error).name, 'TokenRefusal');
    const over = await settle('198.51.100.9', 'one-more');
    assert.ok(over instanceof ToolportError);
    assert.equal(over.code, 'RATE_LIMITED');
    assert.equal(
      over.message,
      `Too many new access tokens from this client address: at most ${INTROSPECTIONS_PER_ADDRESS_PER_MINUTE} a minute are checked with the identity provider; retry in 60 s.`,
    );
    assert.equal(asked.length, INTROSPECTIONS_PER_ADDRESS_PER_MINUTE);
    // Another address has its own budget; the next minute, this one does again.
    assert.equal(((await settle('198.51.100.10', 'other')) as Error).name, 'TokenRefusal');
    now += 60_000;
    assert.equal(((await settle('198.51.100.9', 'next-minute')) as Error).name, 'TokenRefusal');
  } finally {
    clearInterval(answering);
  }
});
