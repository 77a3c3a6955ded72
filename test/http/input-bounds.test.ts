import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ToolRegistry } from '#src/core/registry.js';
import { buildApp } from '#src/http/app.js';
import { Echo } from '#src/tools/echo.js';
import { Nested } from '../fixtures/tools.js';
import { errorBody } from '#src/core/errors.js';

// Hostile inputs that fit in the default 1 MiB body and break a tool's schema tens or hundreds of
// thousands of times: the error body must stay small, whatever the count.

async function app() {
  return buildApp({ registry: new ToolRegistry().register(Nested).register(Echo) });
}

const STOPPED = '(The input holds more than 10000 values, so checking stopped at the first violation; fix it and send the input again to see any others.)';

test('POST /tools/:name with 9,000 wrong-typed items answers 400 listing the first 50 and counting the rest', async (t) => {
  const server = await app();
  t.after(() => server.close());
  const payload = { name: 'n', count: 1, options: { tags: Array.from({ length: 9000 }, () => 0) } };
  const res = await server.inject({ method: 'POST', url: '/tools/Nested', payload });
  assert.equal(res.statusCode, 400);
  const violations = Array.from({ length: 50 }, (_, i) => ({ path: `$.options.tags[${i}]`, message: 'must be string' }));
  const message = `Invalid input for tool "Nested":\n${violations.map((v) => `- ${v.path}: ${v.message}`).join('\n')}\n- ... and 8950 more violations`;
  assert.deepEqual(res.json(), errorBody('INVALID_INPUT', message, { violations, omitted: 8950 }));
  assert.ok(res.body.length < 8 * 1024, `${res.body.length} bytes`);
});

test('POST /tools/:name with half a million wrong-typed items in 1 MiB answers 400 with the first violation only', async (t) => {
  const server = await app();
  t.after(() => server.close());
  const payload = JSON.stringify({ name: 'n', count: 1, options: { tags: Array.from({ length: 500_000 }, () => 0) } });
  assert.ok(payload.length < 1024 * 1024);
  const res = await server.inject({ method: 'POST', url: '/tools/Nested', headers: { 'content-type': 'application/json' }, payload });
  assert.equal(res.statusCode, 400);
  const message = `Invalid input for tool "Nested":\n- $.options.tags[0]: must be string\n${STOPPED}`;
  assert.deepEqual(
    res.json(),
    errorBody('INVALID_INPUT', message, { violations: [{ path: '$.options.tags[0]', message: 'must be string' }], complete: false }),
  );
});

test('POST /tools/:name with 90,000 unknown properties answers 400 with the first violation only', async (t) => {
  const server = await app();
  t.after(() => server.close());
  const payload = JSON.stringify(Object.fromEntries(Array.from({ length: 90_000 }, (_, i) => [`k${i}`, 0])));
  assert.ok(payload.length < 1024 * 1024);
  const res = await server.inject({ method: 'POST', url: '/tools/Echo', headers: { 'content-type': 'application/json' }, payload });
  assert.equal(res.statusCode, 400);
  const message = `Invalid input for tool "Echo":\n- $.text: is required\n${STOPPED}`;
  assert.deepEqual(res.json(), errorBody('INVALID_INPUT', message, { violations: [{ path: '$.text', message: 'is required' }], complete: false }));
});

test('POST /tools/:name with a property name of 500,000 characters answers 400 with the path cut short', async (t) => {
  const server = await app();
  t.after(() => server.close());
  const key = '"'.repeat(500_000);
  const res = await server.inject({ method: 'POST', url: '/tools/Echo', payload: { text: 'x', [key]: 1 } });
  assert.equal(res.statusCode, 400);
  const path = `$["${'\\"'.repeat(97)}...`;
  const message = `Invalid input for tool "Echo":\n- ${path}: is not an allowed property`;
  assert.deepEqual(res.json(), errorBody('INVALID_INPUT', message, { violations: [{ path, message: 'is not an allowed property' }] }));
});
