import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import { test, type TestContext } from 'node:test';
import { kill, startServer, type ServerProcess } from '../support/server-process.js';

// No single call can exhaust the process: a run of hostile calls, each within the limits a client
// has (1 MiB bodies, 10 MiB files, commands that print without end), against the real server.

/** The peak resident memory (VmHWM) the server may reach over the whole run, start-up included. */
const RSS_BOUND_MIB = 512;
/** How long /healthz may take to answer while a hostile call runs, or after it. */
const HEALTH_DEADLINE_MS = 5_000;
const MAX_OUTPUT_CHARS = 30_000;

interface Answer {
  status: number;
  bytes: number;
  // Whatever the server sent back, as parsed JSON.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body: any;
}

async function server(t: TestContext): Promise<ServerProcess> {
  const started = await startServer({ TOOLPORT_RATE_LIMIT: '0' });
  t.after(() => kill(started));
  return started;
}

/** A field of /proc/<pid>/status, in MiB. */
function memoryMiB(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith(`${field}:`));
  return Math.round(Number(/(\d+) kB/.exec(line ?? '')?.[1]) / 1024);
}

async function call(srv: ServerProcess, tool: string, input: unknown): Promise<Answer> {
  const res = await fetch(`${srv.url}/tools/${tool}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: typeof input === 'string' ? input : JSON.stringify(input),
  });
  const text = await res.text();
  return { status: res.status, bytes: Buffer.byteLength(text), body: JSON.parse(text) };
}

/** The text of a 200 result, after checking that it is one with the expected isError. */
function textOf(answer: Answer, isError = false): string {
  assert.equal(answer.status, 200, JSON.stringify(answer.body).slice(0, 500));
  assert.equal(answer.body.isError, isError, JSON.stringify(answer.body).slice(0, 500));
  return answer.body.content[0].text as string;
}

/** Polls /healthz until it answers 200; fails once the deadline has passed without one. */
async function healthy(srv: ServerProcess): Promise<void> {
  const deadline = Date.now() + HEALTH_DEADLINE_MS;
  let last = 'no answer';
  while (Date.now() < deadline) {
    try {
      const res = await fetch(`${srv.url}/healthz`, { signal: AbortSignal.timeout(Math.max(1, deadline - Date.now())) });
      if (res.status === 200) return;
      last = `status ${res.status}`;
    } catch (err) {
      last = String(err);
    }
    await delay(25);
  }
  assert.fail(`/healthz did not answer 200 within ${HEALTH_DEADLINE_MS} ms (${last})`);
}

/** Runs a hostile call while checking that /healthz answers as it runs, and again once it is done. */
async function hostile<T>(srv: ServerProcess, run: Promise<T>): Promise<T> {
  const [result] = await Promise.all([run, healthy(srv)]);
  await healthy(srv);
  return result;
}

/** A shell command that prints `bytes` bytes of the letter `letter`. */
const letters = (bytes: number, letter: string): string => `head -c ${bytes} /dev/zero | tr '\\0' ${letter}`;

test(`a run of hostile calls leaves the server alive, answering /healthz, with its peak RSS under ${RSS_BOUND_MIB} MiB`, { timeout: 300_000 }, async (t) => {
  const srv = await server(t);
  const rss: string[] = [`start ${memoryMiB(srv.pid, 'VmRSS')} MiB`];
  const step = (name: string): void => {
    rss.push(`${name} ${memoryMiB(srv.pid, 'VmRSS')} MiB`);
  };

  // Schema violations by the hundred thousand, 16 requests at a time, each body just under 1 MiB.
  const manyItems = JSON.stringify({ path: '.', ignore: Array.from({ length: 500_000 }, () => 0) });
  const manyKeys = JSON.stringify(Object.fromEntries(Array.from({ length: 90_000 }, (_, i) => [`k${i}`, 0])));
  const listed = JSON.stringify({ path: '.', ignore: Array.from({ length: 9_000 }, () => 0) });
  for (let round = 0; round < 3; round++) {
    const answers = await hostile(
      srv,
      Promise.all(
        Array.from({ length: 16 }, (_, i) => {
          const [tool, body] = (
            [
              ['LS', manyItems],
              ['Echo', manyKeys],
              ['LS', listed],
            ] as const
          )[i % 3]!;
          return call(srv, tool, body);
        }),
      ),
    );
    for (const answer of answers) {
      assert.equal(answer.status, 400);
      assert.equal(answer.body.error.code, 'INVALID_INPUT');
      assert.ok(answer.bytes < 16 * 1024, `an error body of ${answer.bytes} bytes`);
      assert.ok(answer.body.error.details.violations.length <= 50);
    }
  }
  const [items, keys, counted] = await Promise.all([call(srv, 'LS', manyItems), call(srv, 'Echo', manyKeys), call(srv, 'LS', listed)]);
  assert.deepEqual(items.body.error.details, { violations: [{ path: '$.ignore', message: 'must NOT have more than 100 items' }], complete: false });
  assert.deepEqual(keys.body.error.details, { violations: [{ path: '$.text', message: 'is required' }], complete: false });
  assert.equal(counted.body.error.details.violations.length, 50);
  assert.equal(counted.body.error.details.omitted, 8_951);
  step('violations');

  // Edit's replace_all multiplying a file: 1 MB of "a", each "a" to ten, then each to fifty newlines.
  textOf(await hostile(srv, call(srv, 'Write', { file_path: 'many-a.txt', content: 'a'.repeat(1_000_000) })));
  const tenfold = textOf(await hostile(srv, call(srv, 'Edit', { file_path: 'many-a.txt', old_string: 'a', new_string: 'a'.repeat(10), replace_all: true })));
  assert.match(tenfold, /^Replaced all 1000000 occurrences in "many-a\.txt"\./);
  const refused = textOf(
    await hostile(srv, call(srv, 'Edit', { file_path: 'many-a.txt', old_string: 'a', new_string: '\n'.repeat(50), replace_all: true })),
    true,
  );
  assert.match(refused, /^The edit would make "many-a\.txt" .+, over the 10 MiB Edit writes; nothing was written\./);
  assert.equal(textOf(await call(srv, 'Bash', { command: 'wc -c < many-a.txt && rm many-a.txt' })), '10000000');
  step('edit');

  // Bash printing 200 MB, on one stream and split over both.
  const printed = textOf(await hostile(srv, call(srv, 'Bash', { command: letters(200_000_000, 'a') })));
  assert.ok(printed.length <= MAX_OUTPUT_CHARS && printed.includes('bytes omitted'), printed.slice(0, 200));
  const both = textOf(await hostile(srv, call(srv, 'Bash', { command: `${letters(100_000_000, 'a')}; ${letters(100_000_000, 'b')} >&2` })));
  assert.ok(both.length <= MAX_OUTPUT_CHARS && both.includes('[stderr]'), both.slice(0, 200));
  step('bash');

  // Grep over a file that is one line of 100 MB.
  textOf(await call(srv, 'Bash', { command: `{ ${letters(100_000_000, 'a')}; echo; } > one-line.txt` }));
  const matched = textOf(await hostile(srv, call(srv, 'Grep', { pattern: 'a', path: 'one-line.txt', output_mode: 'content' })));
  assert.ok(matched.startsWith('one-line.txt:1:') && matched.length <= MAX_OUTPUT_CHARS, matched.slice(0, 200));
  assert.equal(textOf(await hostile(srv, call(srv, 'Grep', { pattern: 'a+$' }))), 'Found 1 file\none-line.txt');
  textOf(await call(srv, 'Bash', { command: 'rm one-line.txt' }));
  step('grep');

  // Read at the 10 MiB limit: text of ordinary lines, an image, and one byte over.
  textOf(
    await call(srv, 'Bash', {
      command: `awk 'BEGIN { for (i = 0; i < 131072; i++) printf "%079d\\n", i }' > text.txt && { printf '\\211PNG\\r\\n\\032\\n'; head -c 10485752 /dev/urandom; } > image.png && { cat text.txt; echo; } > over.txt`,
    }),
  );
  assert.match(
    textOf(await hostile(srv, call(srv, 'Read', { file_path: 'text.txt' }))),
    /\(File has 131072 lines; showing lines 1-\d+\. Call Read with offset=\d+ to read on\.\)/,
  );
  const image = await hostile(srv, call(srv, 'Read', { file_path: 'image.png' }));
  assert.equal(image.body.content[0].source.data.length, Math.ceil((10 * 1024 * 1024) / 3) * 4);
  assert.match(textOf(await hostile(srv, call(srv, 'Read', { file_path: 'over.txt' })), true), /over the 10 MiB Read accepts/);
  step('read');

  // Write at the body limit.
  assert.match(
    textOf(await hostile(srv, call(srv, 'Write', { file_path: 'full.txt', content: '\n'.repeat(500_000) }))),
    /^Created "full\.txt" \(500000 bytes, 500000 lines\)/,
  );
  step('write');

  // LS and Glob on a directory of 100,000 files.
  textOf(await call(srv, 'Bash', { command: 'mkdir many && cd many && seq -w 1 100000 | xargs touch' }));
  assert.match(textOf(await hostile(srv, call(srv, 'LS', { path: 'many' }))), /^Directory "many", 100000 entries:\n000001\n/);
  assert.match(textOf(await hostile(srv, call(srv, 'Glob', { pattern: 'many/*' }))), /\(Showing the 100 most recently modified of 100000 matching files\./);
  step('ls, glob');

  // Still alive and serving, and its peak stayed under the bound.
  assert.equal(textOf(await call(srv, 'Echo', { text: 'still here' })), 'still here');
  await healthy(srv);
  const peak = memoryMiB(srv.pid, 'VmHWM');
  t.diagnostic(`RSS after each step: ${rss.join(', ')}; peak (VmHWM) ${peak} MiB`);
  assert.ok(peak < RSS_BOUND_MIB, `peak RSS ${peak} MiB (${rss.join(', ')})`);
});

// Read once split the whole file into an array of lines before it showed 2000 of them: ten
// million empty lines cost about 170 MiB of arrays and a second or two of the event loop.
test('Read of a 10 MiB file of empty lines raises the peak RSS by less than 128 MiB', { timeout: 120_000 }, async (t) => {
  const srv = await server(t);
  textOf(await call(srv, 'Bash', { command: `head -c ${10 * 1024 * 1024} /dev/zero | tr '\\0' '\\n' > newlines.txt` }));
  await healthy(srv);
  const before = memoryMiB(srv.pid, 'VmHWM');
  assert.match(textOf(await hostile(srv, call(srv, 'Read', { file_path: 'newlines.txt' }))), /\(File has 10485760 lines; showing lines 1-2000\./);
  const peak = memoryMiB(srv.pid, 'VmHWM');
  assert.ok(peak - before < 128, `peak RSS rose from ${before} to ${peak} MiB`);
});
