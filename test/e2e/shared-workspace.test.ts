import assert from 'node:assert/strict';
import { watch } from 'node:fs';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { test, type TestContext } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { kill, startServer, type ServerProcess } from '../support/server-process.js';
import { temporaryDirectory } from '../support/workspace.js';

async function server(t: TestContext, env: Record<string, string>): Promise<ServerProcess> {
  const started = await startServer({ TOOLPORT_BASH_SANDBOX: 'false', ...env });
  t.after(() => kill(started));
  return started;
}

async function call(
  server: ServerProcess,
  tool: string,
  input: unknown,
): Promise<{ status: number; body: { content: { text?: string }[]; isError: boolean } }> {
  const response = await fetch(`${server.url}/tools/${tool}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(input),
  });
  return { status: response.status, body: (await response.json()) as { content: { text?: string }[]; isError: boolean } };
}

const lines = (n: number, label: string): string => Array.from({ length: n }, (_, i) => `${label} ${i}`).join('\n') + '\n';
const ownFiles = async (dir: string): Promise<string[]> => (await readdir(dir, { recursive: true })).filter((n) => /\.toolport-[0-9a-f]+\.(tmp|lock)$/.test(n));

test('two server processes sharing one workspace lose no Edit', async (t) => {
  const dir = await temporaryDirectory(t, 'toolport-shared-');
  await writeFile(path.join(dir, 'shared.txt'), lines(40, 'line'));
  const servers = await Promise.all([server(t, { TOOLPORT_WORKSPACE: dir }), server(t, { TOOLPORT_WORKSPACE: dir })]);
  const results = await Promise.all(
    Array.from({ length: 40 }, (_, i) => call(servers[i % 2]!, 'Edit', { file_path: 'shared.txt', old_string: `line ${i}\n`, new_string: `edited ${i}\n` })),
  );
  assert.deepEqual(
    results.filter((r) => r.status !== 200 || r.body.isError).map((r) => r.body.content[0]?.text),
    [],
  );
  assert.equal(await readFile(path.join(dir, 'shared.txt'), 'utf8'), lines(40, 'edited'));
  assert.deepEqual(await ownFiles(dir), []);
});

test('a server killed mid-Write leaves the old or the new file whole, and a restart removes its temporary file', async (t) => {
  const dir = await temporaryDirectory(t, 'toolport-shared-');
  const old = lines(1000, 'old');
  const fresh = 'n'.repeat(48 * 1024 * 1024);
  await writeFile(path.join(dir, 'big.txt'), old);
  const env = { TOOLPORT_WORKSPACE: dir, TOOLPORT_BODY_LIMIT: String(64 * 1024 * 1024) };
  const first = await server(t, env);

  // Kill the server the moment its temporary file appears: between creating it and renaming it.
  let seenTemporary = false;
  const watcher = watch(dir, (_event, name) => {
    if (seenTemporary || !name?.endsWith('.tmp')) return;
    seenTemporary = true;
    kill(first);
  });
  t.after(() => watcher.close());
  await call(first, 'Write', { file_path: 'big.txt', content: fresh }).catch(() => undefined);
  await first.exited;
  watcher.close();
  assert.ok(seenTemporary, 'the Write created a temporary file');
  const after = await readFile(path.join(dir, 'big.txt'), 'utf8');
  assert.ok(after === old || after === fresh, 'the file is the old or the new content, whole');

  await server(t, env);
  const deadline = Date.now() + 10_000;
  while ((await ownFiles(dir)).length > 0 && Date.now() < deadline) await delay(20);
  assert.deepEqual(await ownFiles(dir), []);
  const again = await readFile(path.join(dir, 'big.txt'), 'utf8');
  assert.ok(again === old || again === fresh);
});
