import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { test } from 'node:test';

const ROOT = path.resolve(import.meta.dirname, '..');

test('examples/embed.ts serves its own tool beside a built-in one', async (t) => {
  const child = spawn(process.execPath, ['--import', 'tsx', 'examples/embed.ts'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, PORT: '0' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  t.after(() => child.kill('SIGKILL'));
  const url = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout }).on('line', (text) => {
      const msg = String((JSON.parse(text) as { msg: unknown }).msg);
      if (msg.startsWith('Server listening at ')) resolve(msg.replace('Server listening at ', ''));
    });
    void exited.then((code) => reject(new Error(`example exited with ${code}`)));
  });
  const tools = (await (await fetch(`${url}/tools`)).json()) as Array<{ name: string }>;
  assert.deepEqual(
    tools.map((tool) => tool.name),
    ['Echo', 'WordCount'],
  );
  const res = await fetch(`${url}/tools/WordCount`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ text: 'one two  three' }),
  });
  assert.deepEqual(await res.json(), { content: [{ type: 'text', text: '3' }], isError: false });
  child.kill('SIGTERM');
  assert.equal(await exited, 0);
});
