import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { otlpReceiver, type OtlpReceiver } from '../support/otlp-receiver.js';
import { INTROSPECTION_CLIENT, OPAQUE_CLIENT, startTestIssuer, type TestIssuer } from '../support/oidc-provider.js';
import { freePort } from '../support/ports.js';
import { kill, startServer, type ServerProcess } from '../support/server-process.js';
import { Cleanups } from '../support/workspace.js';

// The identity provider's round trips in a traced request: an opaque token's first use makes
// toolport ask the issuer's introspection endpoint, a client span inside the request's trace.

const cleanups = new Cleanups();
let idp: TestIssuer;
let receiver: OtlpReceiver;
let server: ServerProcess;
let publicUrl: string;

before(async () => {
  idp = await startTestIssuer();
  receiver = await otlpReceiver(cleanups);
  const port = await freePort();
  publicUrl = `http://127.0.0.1:${port}`;
  server = await startServer({
    PORT: String(port),
    TOOLPORT_TOOLS: 'Echo',
    TOOLPORT_OAUTH_ISSUER: idp.issuer,
    TOOLPORT_PUBLIC_URL: publicUrl,
    TOOLPORT_OAUTH_CLIENT_ID: INTROSPECTION_CLIENT.id,
    TOOLPORT_OAUTH_CLIENT_SECRET: INTROSPECTION_CLIENT.secret,
    TOOLPORT_BASH_SANDBOX: 'false',
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_BSP_SCHEDULE_DELAY: '20',
  });
});
after(async () => {
  kill(server);
  await idp.close();
  await cleanups.run();
});

test("an opaque token's introspection is a client span of the request's trace, and no span holds the token", async () => {
  const token = await idp.clientCredentials({ resource: publicUrl, scope: 'tools:Echo', client: OPAQUE_CLIENT });
  const before = idp.introspections;
  const traceId = '5'.repeat(32);
  const response = await fetch(`${publicUrl}/tools/Echo`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', traceparent: `00-${traceId}-${'6'.repeat(16)}-01` },
    body: JSON.stringify({ text: 'with a token' }),
  });
  assert.equal(response.status, 200);
  assert.equal(idp.introspections, before + 1);
  const request = await receiver.span((s) => s.traceId === traceId && s.name === 'POST /tools/:name', 'the request span');
  const introspection = await receiver.span(
    (s) => s.traceId === traceId && s.kind === 3 && String(s.attributes['url.full']).startsWith(idp.issuer),
    'the introspection request',
  );
  assert.equal(introspection.parentSpanId, request.spanId);
  assert.equal(introspection.attributes['http.request.method'], 'POST');
  const call = await receiver.span((s) => s.traceId === traceId && s.name === 'execute_tool Echo', 'the call span');
  assert.equal(typeof call.attributes['toolport.caller'], 'string');
  assert.ok(!JSON.stringify(receiver.spans).includes(token), 'the token is in no span');
});
