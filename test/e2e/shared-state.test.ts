import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { test, type TestContext } from 'node:test';
import { sandboxUnavailableReason } from '#src/os/sandbox/bubblewrap.js';
import { freePort } from '../support/ports.js';
import { REDIS_MISSING, startRedis } from '../support/redis-server.js';
import { kill, startServer } from '../support/server-process.js';
import { requireOrSkip } from '../support/require.js';
import { temporaryDirectory } from '../support/workspace.js';

const SANDBOX_MISSING = await sandboxUnavailableReason('/var/tmp');
const KEYS = { 'team-a': 'team-a-secret-0123456789abcdef', 'team-b': 'team-b-secret-0123456789abcdef' } as const;

/** Two team workspaces (each with its own file) and a keys file naming them, outside /tmp, which the sandbox replaces. */
async function teams(t: TestContext): Promise<{ keysFile: string; dir: (team: keyof typeof KEYS) => string }> {
  const base = await temporaryDirectory(t, 'toolport-e2e-teams-', '/var/tmp');
  const dir = (team: keyof typeof KEYS): string => path.join(base, team);
  for (const team of Object.keys(KEYS) as Array<keyof typeof KEYS>) {
    await mkdir(dir(team));
    await writeFile(path.join(dir(team), 'mine.txt'), `${team} only\n`);
  }
  const keysFile = path.join(base, 'keys.json');
  await writeFile(keysFile, JSON.stringify(Object.entries(KEYS).map(([label, key]) => ({ label, key, workspace: dir(label as keyof typeof KEYS) }))));
  return { keysFile, dir };
}

const read = async (url: string, key: string, filePath: string): Promise<{ status: number; text: string }> => {
  const res = await fetch(`${url}/tools/Read`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ file_path: filePath }),
  });
  const body = (await res.json()) as { content: Array<{ text?: string }> };
  return { status: res.status, text: body.content.map((c) => c.text ?? '').join('\n') };
};

test('the server refuses to start when Redis cannot be reached, naming TOOLPORT_REDIS_URL and hiding its password', async () => {
  const port = await freePort();
  await assert.rejects(startServer({ TOOLPORT_REDIS_URL: `redis://:hunter2-secret@127.0.0.1:${port}/0` }), (err: Error) => {
    assert.match(
      err.message,
      new RegExp(
        `server exited with 1.*toolport: Cannot reach Redis at TOOLPORT_REDIS_URL \\(redis://:\\*\\*\\*@127\\.0\\.0\\.1:${port}/0\\) within 5 s: connect ECONNREFUSED`,
        's',
      ),
    );
    assert.ok(!err.message.includes('hunter2-secret'));
    return true;
  });
});

test('with TOOLPORT_REDIS_URL the server counts in Redis, and closes the connection on SIGTERM', async (t) => {
  if (!requireOrSkip(t, 'Redis', REDIS_MISSING)) return;
  const redis = await startRedis();
  t.after(() => redis.stop());
  const server = await startServer({ TOOLPORT_REDIS_URL: redis.url, TOOLPORT_RATE_LIMIT: '2', TOOLPORT_BASH_SANDBOX: 'false' });
  t.after(() => kill(server));
  await server.logLine((l) => l.msg === 'rate limits are shared through Redis');
  const statuses = [];
  for (let i = 0; i < 3; i++) statuses.push((await fetch(`${server.url}/tools`)).status);
  assert.deepEqual(statuses, [200, 200, 429]);
  server.child.kill('SIGTERM');
  assert.equal(await server.exited, 0);
  assert.ok(!server.lines.some((l) => String(l.msg).startsWith('lost the connection to Redis')));
});

test('keys with workspaces of their own each read only theirs from the real server', async (t) => {
  const { keysFile, dir } = await teams(t);
  // Keys in two workspaces may use Bash only in the sandbox; without it, the server serves no Bash.
  const bash: Record<string, string> =
    SANDBOX_MISSING === undefined ? { TOOLPORT_BASH_SANDBOX: 'true' } : { TOOLPORT_BASH_SANDBOX: 'false', TOOLPORT_TOOLS: 'Read,LS' };
  const server = await startServer({ TOOLPORT_API_KEYS_FILE: keysFile, ...bash });
  t.after(() => kill(server));
  const announced = await server.logLine((l) => l.msg === 'keys with workspaces of their own');
  assert.deepEqual(announced.workspaces, [
    { key: 'team-a', workspace: dir('team-a') },
    { key: 'team-b', workspace: dir('team-b') },
  ]);
  const own = await read(server.url, KEYS['team-a'], 'mine.txt');
  assert.equal(own.status, 200);
  assert.match(own.text, /^ {5}1\tteam-a only\n\(version [0-9a-f]{16}\)$/);
  const across = await read(server.url, KEYS['team-b'], path.join(dir('team-a'), 'mine.txt'));
  assert.equal(across.status, 200);
  assert.ok(!across.text.includes('team-a only'));
  server.child.kill('SIGTERM');
  assert.equal(await server.exited, 0);
});

test('keys in two workspaces with Bash and no sandbox stop start-up, saying why', async (t) => {
  const { keysFile } = await teams(t);
  await assert.rejects(
    startServer({ TOOLPORT_API_KEYS_FILE: keysFile, TOOLPORT_BASH_SANDBOX: 'false' }),
    /server exited with 1.*toolport: Invalid TOOLPORT_API_KEYS_FILE ".*keys\.json": keys have workspaces of their own, but Bash runs without the sandbox \(TOOLPORT_BASH_SANDBOX=false\)/s,
  );
});
