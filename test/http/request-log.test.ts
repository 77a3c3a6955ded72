import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ToolRegistry } from '#src/core/registry.js';
import { buildApp } from '#src/http/app.js';
import { capturedLog } from '../support/log-capture.js';
import { Echo } from '#src/tools/echo.js';

test('request.log makes no child logger for a request that logs nothing, and binds the request id for one that does', async (t) => {
  const { lines, logger } = capturedLog();
  // Every pino logger's child() is its prototype's: this counts the children of children too.
  const children = t.mock.method(Object.getPrototypeOf(logger) as typeof logger, 'child');
  const app = await buildApp({ registry: new ToolRegistry().register(Echo), logger, docs: false, pressure: false });
  t.after(() => app.close());
  app.get('/logs', async (request) => {
    request.log.info({ step: 1 }, 'working');
    return {};
  });
  await app.ready();
  children.mock.resetCalls();
  const call = await app.inject({ method: 'POST', url: '/tools/Echo', payload: { text: 'hi' }, headers: { 'x-request-id': 'call-1' } });
  assert.equal(call.statusCode, 200);
  assert.equal(children.mock.callCount(), 0);
  assert.deepEqual(
    lines.filter((l) => l.msg === 'tool call').map((l) => ({ reqId: l.reqId, tool: l.tool })),
    [{ reqId: 'call-1', tool: 'Echo' }],
  );
  await app.inject({ url: '/logs', headers: { 'x-request-id': 'logs-1' } });
  const afterFirst = children.mock.callCount();
  assert.ok(afterFirst > 0);
  await app.inject({ url: '/logs', headers: { 'x-request-id': 'logs-2' } });
  // The app's own logger is bound by now: one child per request that logs, for its request id.
  assert.equal(children.mock.callCount(), afterFirst + 1);
  const working = lines.filter((l) => l.msg === 'working').map((l) => ({ reqId: l.reqId, step: l.step }));
  assert.deepEqual(working, [
    { reqId: 'logs-1', step: 1 },
    { reqId: 'logs-2', step: 1 },
  ]);
});
