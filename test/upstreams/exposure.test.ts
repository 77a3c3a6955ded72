import assert from 'node:assert/strict';
import { test } from 'node:test';
import { assertSafeExposure } from '#src/config/exposure.js';
import { textResult } from '#src/core/result.js';
import type { ToolDef } from '#src/core/types.js';
import { parseUpstreams } from '#src/upstreams/config.js';
import { upstreamExposure } from '#src/upstreams/exposure.js';

const Reader: ToolDef = {
  name: 'Reader',
  description: '',
  inputSchema: { type: 'object' },
  annotations: { readOnlyHint: true },
  execute: () => textResult(''),
};

test("an upstream's tools never count as read-only: without keys, on a non-loopback address, they are refused", () => {
  const specs = parseUpstreams(JSON.stringify({ mcpServers: { github: { url: 'http://127.0.0.1:9/mcp' } } }), {});
  const tools = [Reader, ...upstreamExposure(specs)];
  assert.throws(() => assertSafeExposure({ host: '0.0.0.0', apiKeys: [], allowUnauthenticated: false }, tools), {
    name: 'UnsafeExposureError',
    message:
      'Refusing to serve github__* without authentication on 0.0.0.0, which is not a loopback address: this tool is not read-only, and anyone who can reach the port could run it. ' +
      'Either set TOOLPORT_API_KEYS (or TOOLPORT_API_KEYS_FILE) to require an API key, narrow TOOLPORT_TOOLS to read-only tools (here: Reader) and serve no upstreams ' +
      "(an upstream's tools never count as read-only, whatever they claim), or set TOOLPORT_ALLOW_UNAUTHENTICATED=true if only trusted clients can reach this address.",
  });
  assert.deepEqual(assertSafeExposure({ host: '127.0.0.1', apiKeys: [], allowUnauthenticated: false }, tools), []);
});
