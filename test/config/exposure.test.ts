import assert from 'node:assert/strict';
import { test } from 'node:test';
import { assertSafeExposure, UnsafeExposureError } from '#src/config/exposure.js';
import { isLoopback } from '#src/infra/net.js';
import { createToolset } from '#src/assembly/toolset.js';
import type { ToolDef } from '#src/core/types.js';
import { temporaryDirectory } from '../support/workspace.js';

const KEY = [{ label: 'key-1', key: 'a-secret-0123456789abcdef' }];

/** The built-in tools, narrowed as TOOLPORT_TOOLS would narrow them. */
async function builtins(t: { after(fn: () => Promise<void>): void }, tools?: string[]): Promise<ToolDef[]> {
  const workspace = await temporaryDirectory(t, 'toolport-safety-');
  return (await createToolset({ workspace, bashSandbox: false, plugins: [], tools })).list();
}

test('isLoopback takes localhost, 127.0.0.0/8 and ::1 (bare or bracketed)', () => {
  for (const host of ['localhost', 'LOCALHOST', '127.0.0.1', '127.1.2.3', '127.255.255.255', '::1', '[::1]', '0:0:0:0:0:0:0:1', '::ffff:127.0.0.1']) {
    assert.equal(isLoopback(host), true, host);
  }
});

test('isLoopback refuses wildcard, public and private addresses, other names and malformed input', () => {
  for (const host of [
    '0.0.0.0',
    '::',
    '[::]',
    '10.0.0.1',
    '192.168.1.2',
    '128.0.0.1',
    '::2',
    'example.com',
    'localhost.example.com',
    '127.1',
    '[127.0.0.1]',
    '',
    '127.0.0.1:3000',
  ]) {
    assert.equal(isLoopback(host), false, host);
  }
});

test('serving Bash on 0.0.0.0 without keys stops start-up naming the tools, the host and the three ways out', async (t) => {
  const tools = await builtins(t);
  assert.throws(
    () => assertSafeExposure({ host: '0.0.0.0', apiKeys: [], allowUnauthenticated: false }, tools),
    (err: unknown) => {
      assert.ok(err instanceof UnsafeExposureError);
      assert.equal(
        err.message,
        'Refusing to serve Bash, TaskStop, Write, Edit without authentication on 0.0.0.0, which is not a loopback address: ' +
          'these tools are not read-only, and anyone who can reach the port could run them. ' +
          'Either set TOOLPORT_API_KEYS (or TOOLPORT_API_KEYS_FILE) to require an API key, ' +
          'narrow TOOLPORT_TOOLS to read-only tools (here: Echo, TaskOutput, Read, Glob, Grep, LS), ' +
          'or set TOOLPORT_ALLOW_UNAUTHENTICATED=true if only trusted clients can reach this address.',
      );
      return true;
    },
  );
});

test('a plug-in tool without the read-only hint counts as one that changes things', () => {
  const plugin: ToolDef = { name: 'Deploy', description: 'd', inputSchema: { type: 'object' }, execute: () => ({ content: [] }) };
  assert.throws(() => assertSafeExposure({ host: '10.0.0.5', apiKeys: [], allowUnauthenticated: false }, [plugin]), {
    message:
      'Refusing to serve Deploy without authentication on 10.0.0.5, which is not a loopback address: ' +
      'this tool is not read-only, and anyone who can reach the port could run it. ' +
      'Either set TOOLPORT_API_KEYS (or TOOLPORT_API_KEYS_FILE) to require an API key, narrow TOOLPORT_TOOLS to read-only tools, ' +
      'or set TOOLPORT_ALLOW_UNAUTHENTICATED=true if only trusted clients can reach this address.',
  });
});

test('serving Bash on 0.0.0.0 is allowed with API keys', async (t) => {
  assert.deepEqual(assertSafeExposure({ host: '0.0.0.0', apiKeys: KEY, allowUnauthenticated: false }, await builtins(t)), []);
});

test('serving on 0.0.0.0 without keys is allowed when TOOLPORT_TOOLS names only read-only tools', async (t) => {
  const tools = await builtins(t, ['Read', 'Glob', 'Grep', 'LS']);
  assert.deepEqual(assertSafeExposure({ host: '0.0.0.0', apiKeys: [], allowUnauthenticated: false }, tools), []);
});

test('TOOLPORT_ALLOW_UNAUTHENTICATED lets Bash be served on 0.0.0.0 without keys and returns the exposed tools', async (t) => {
  const exposed = assertSafeExposure({ host: '::', apiKeys: [], allowUnauthenticated: true }, await builtins(t));
  assert.deepEqual(exposed, ['Bash', 'TaskStop', 'Write', 'Edit']);
});

test('serving Bash on a loopback address without keys is allowed', async (t) => {
  const tools = await builtins(t);
  for (const host of ['127.0.0.1', 'localhost', '::1']) {
    assert.deepEqual(assertSafeExposure({ host, apiKeys: [], allowUnauthenticated: false }, tools), [], host);
  }
});
