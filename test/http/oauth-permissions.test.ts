import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { openResourceServer } from '#src/auth/open.js';
import { parseMapping } from '#src/auth/mapping.js';
import { serverPermissions } from '#src/permissions/catalog.js';
import { createToolset } from '#src/assembly/toolset.js';
import { buildApp } from '#src/http/app.js';
import { Workspace } from '#src/os/fs/workspace.js';
import { resourceServerSettings, startTestIssuer, SERVICE_CLIENT, type TestIssuer } from '../support/oidc-provider.js';
import { Cleanups, temporaryDirectory } from '../support/workspace.js';
import { capturedLog } from '../support/log-capture.js';

const PUBLIC_URL = 'http://127.0.0.1:3000';

let idp: TestIssuer;
const cleanups = new Cleanups();
before(async () => {
  idp = await startTestIssuer();
});
after(async () => {
  await idp.close();
  await cleanups.run();
});

test("a token's caller gets the permission rules its mapping entry gives, over the default, with a real token", async (t) => {
  const root = path.join(await temporaryDirectory(cleanups), 'ws');
  await mkdir(path.join(root, 'docs'), { recursive: true });
  await writeFile(path.join(root, '.env'), 'TOKEN=hunter2\n');
  await writeFile(path.join(root, 'docs', 'a.md'), 'a\n');
  const workspace = await Workspace.open(root);
  t.after(() => workspace.close());
  const registry = await createToolset({ workspace: root, tools: ['Read', 'Write', 'Echo'], plugins: [], bashSandbox: false }, root, undefined, workspace);
  const permissions = await serverPermissions({}, registry.list(), []);
  const mapping = parseMapping({ subjects: { [SERVICE_CLIENT.id]: { permissions: { allow: ['Write(docs/**)'], deny: ['Read(.env)'] } } } }, 'oauth.json');
  const oauth = await openResourceServer(resourceServerSettings(idp.issuer, PUBLIC_URL), { mapping, permissions });
  const log = capturedLog();
  const app = await buildApp({ registry, oauth, permissions, logger: log.logger });
  t.after(() => app.close());
  const token = await idp.clientCredentials({ resource: PUBLIC_URL, scope: 'tools:Read tools:Write' });
  const call = (tool: string, input: unknown) =>
    app.inject({
      method: 'POST',
      url: `/tools/${tool}`,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      payload: JSON.stringify(input),
    });

  log.lines.length = 0;
  const env = await call('Read', { file_path: '.env' });
  const refused = log.lines.find((line) => line.msg === 'tool call refused')!;
  assert.deepEqual([refused.key, refused.client, refused.rule], [`sub:${SERVICE_CLIENT.id}`, SERVICE_CLIENT.id, 'Read(.env)']);
  assert.equal(env.statusCode, 403);
  assert.deepEqual(env.json(), {
    content: [{ type: 'text', text: 'Path ".env" is denied by Read(.env).' }],
    isError: true,
    error: { code: 'FORBIDDEN', message: 'Path ".env" is denied by Read(.env).', details: { tool: 'Read', rule: 'Read(.env)' } },
  });
  const outside = await call('Write', { file_path: 'notes.md', content: 'x' });
  assert.equal(outside.statusCode, 403);
  assert.equal((outside.json() as { error: { message: string } }).error.message, 'Path "notes.md" is not allowed by any rule for Write.');
  assert.equal((await call('Write', { file_path: 'docs/b.md', content: 'b\n' })).statusCode, 200);
  assert.equal((await call('Read', { file_path: 'docs/a.md' })).statusCode, 200);
  const ran = log.lines.find((line) => line.msg === 'tool call' && line.tool === 'Read')!;
  assert.deepEqual([ran.key, ran.client], [`sub:${SERVICE_CLIENT.id}`, SERVICE_CLIENT.id]);
  // A tool its scopes do not grant, through /calls: the refusal speaks of the token, not of a key.
  const calls = await app.inject({
    method: 'POST',
    url: '/calls',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    payload: JSON.stringify([{ type: 'tool_use', id: 'toolu_1', name: 'Echo', input: { text: 'x' } }]),
  });
  assert.deepEqual(calls.json(), {
    role: 'user',
    content: [
      {
        type: 'tool_result',
        tool_use_id: 'toolu_1',
        content: [{ type: 'text', text: `The access token of "sub:${SERVICE_CLIENT.id}" may not use tool "Echo"; it may use Read, Write.` }],
        is_error: true,
      },
    ],
  });
  const list = await app.inject({ method: 'GET', url: '/tools', headers: { authorization: `Bearer ${token}` } });
  const write = (list.json() as Array<{ name: string; description: string }>).find((tool) => tool.name === 'Write')!;
  assert.equal(write.description.split('\n').at(-1), 'Allowed for this key: Write(docs/**).');
});
