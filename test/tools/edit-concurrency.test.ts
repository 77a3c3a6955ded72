import assert from 'node:assert/strict';
import { watch } from 'node:fs';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { setTimeout as delay } from 'node:timers/promises';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import type { ToolDef, ToolResult } from '#src/core/types.js';
import { createEditTool } from '#src/tools/edit.js';
import { createReadTool } from '#src/tools/read.js';
import { contentVersion } from '#src/os/fs/regular-file.js';
import { Workspace } from '#src/os/fs/workspace.js';
import { createWriteTool } from '#src/tools/write.js';
import { toolContext } from '../support/tool-context.js';
import { temporaryDirectory } from '../support/workspace.js';

const base = await temporaryDirectory({ after }, 'toolport-concurrency-');
let root: string;
let Edit: ToolDef;
let Write: ToolDef;
let Read: ToolDef;

const call = async (tool: ToolDef, input: Record<string, unknown>): Promise<ToolResult> => tool.execute(input, toolContext());
const textOf = (result: ToolResult): string => result.content.map((b) => (b.type === 'text' ? b.text : '')).join('\n');
const lines = (n: number, label = 'line'): string => Array.from({ length: n }, (_, i) => `${label} ${i}`).join('\n') + '\n';

before(async () => {
  root = path.join(base, 'ws');
  await mkdir(path.join(root, 'dir'), { recursive: true });
  const ws = await Workspace.open(root);
  Edit = createEditTool(ws);
  Write = createWriteTool(ws);
  Read = createReadTool(ws);
});

test('40 concurrent Edits of different lines of one file all land, through different paths to it', async () => {
  await writeFile(path.join(root, 'dir', 'many.txt'), lines(40));
  const paths = ['dir/many.txt', path.join(root, 'dir', 'many.txt'), 'dir/../dir/many.txt', './dir//many.txt'];
  const results = await Promise.all(
    Array.from({ length: 40 }, (_, i) => call(Edit, { file_path: paths[i % paths.length], old_string: `line ${i}\n`, new_string: `edited ${i}\n` })),
  );
  assert.deepEqual(results.filter((r) => r.isError).map(textOf), []);
  assert.equal(await readFile(path.join(root, 'dir', 'many.txt'), 'utf8'), lines(40, 'edited'));
  assert.deepEqual(
    (await readdir(path.join(root, 'dir'))).filter((n) => n.startsWith('.toolport-')),
    [],
  );
});

test('concurrent Edits of the same text: exactly one succeeds, the others are refused and say why', async () => {
  await writeFile(path.join(root, 'same.txt'), 'value = 1\n');
  const results = await Promise.all(
    Array.from({ length: 20 }, (_, i) => call(Edit, { file_path: 'same.txt', old_string: 'value = 1', new_string: `value = ${i + 2}` })),
  );
  const succeeded = results.filter((r) => !r.isError);
  assert.equal(succeeded.length, 1);
  const winner = /value = (\d+)/.exec(textOf(succeeded[0]!))![1];
  assert.equal(await readFile(path.join(root, 'same.txt'), 'utf8'), `value = ${winner}\n`);
  for (const refused of results.filter((r) => r.isError)) {
    assert.deepEqual(refused, {
      content: [
        {
          type: 'text',
          text: 'old_string was not found in "same.txt". It must match the file exactly, including whitespace and indentation; Read the file and copy the text to replace.',
        },
      ],
      isError: true,
    });
  }
});

test('Edits and Writes of one file are ordered: every Edit that succeeds is in the file unless a later Write replaced it', async () => {
  const file = path.join(root, 'mixed.txt');
  await writeFile(file, lines(20));
  // Each Write puts back the original lines with a stamp; Edits change one line each. Whatever
  // the order, the file ends as the last Write's stamp plus exactly the Edits that ran after it.
  const events: string[] = [];
  await Promise.all(
    Array.from({ length: 30 }, async (_, i) => {
      if (i % 10 === 5) {
        const r = await call(Write, { file_path: 'mixed.txt', content: `${lines(20)}stamp ${i}\n` });
        assert.equal(r.isError, false);
        events.push(`write ${i}`);
      } else {
        const r = await call(Edit, { file_path: 'mixed.txt', old_string: `line ${i % 20}\n`, new_string: `edited ${i % 20}\n` });
        if (!r.isError) events.push(`edit ${i % 20}`);
      }
    }),
  );
  const final = await readFile(file, 'utf8');
  const lastWrite = events.findLastIndex((e) => e.startsWith('write'));
  for (const event of events.slice(lastWrite + 1)) {
    assert.ok(final.includes(`${event.replace('edit', 'edited')}\n`), `${event} reported success after the last Write but is not in the file`);
  }
  assert.ok(final.includes(`stamp ${events[lastWrite]!.split(' ')[1]}\n`), 'the last Write wins');
});

/**
 * Runs `change` on the file, synchronously, as soon as an Edit creates its temporary file beside
 * it. `before()` then says whether the change came before the Edit's rename: the temporary file
 * was still there.
 */
function onTemporaryFile(dir: string, change: () => void): { stop(): void; before(): boolean } {
  let before = false;
  let done = false;
  const watcher = watch(dir, (_event, name) => {
    if (done || !name?.startsWith('.toolport-') || !name.endsWith('.tmp')) return;
    done = true;
    before = existsSync(path.join(dir, name));
    change();
  });
  return { stop: () => watcher.close(), before: () => before };
}

test('an Edit racing an outside change applies itself again to the new content; both changes are in the file', async (t) => {
  const dir = path.join(root, 'outside-change');
  const file = path.join(dir, 'f.txt');
  await mkdir(dir);
  let raced = 0;
  for (let round = 0; round < 10; round += 1) {
    await writeFile(file, 'alpha\nbeta\n');
    // Another program appends a line while the Edit runs: between its read and its rename, or after.
    const outside = onTemporaryFile(dir, () => writeFileSync(file, `${readFileSync(file, 'utf8')}gamma ${round}\n`));
    const result = await call(Edit, { file_path: 'outside-change/f.txt', old_string: 'beta', new_string: 'BETA' });
    outside.stop();
    raced += outside.before() ? 1 : 0;
    assert.equal(result.isError, false, textOf(result));
    assert.equal(await readFile(file, 'utf8'), `alpha\nBETA\ngamma ${round}\n`);
  }
  t.diagnostic(`${raced} of 10 outside changes came between the Edit's read and its rename`);
});

test('an Edit racing an outside change that removes its text is refused, and the outside change stays', async () => {
  const dir = path.join(root, 'outside-removal');
  const file = path.join(dir, 'f.txt');
  await mkdir(dir);
  for (let round = 0; round < 10; round += 1) {
    await writeFile(file, 'alpha\nbeta\n');
    const outside = onTemporaryFile(dir, () => writeFileSync(file, readFileSync(file, 'utf8').replace('beta\n', '')));
    const result = await call(Edit, { file_path: 'outside-removal/f.txt', old_string: 'beta', new_string: 'BETA' });
    outside.stop();
    const final = await readFile(file, 'utf8');
    if (outside.before()) {
      assert.equal(result.isError, true, 'an edit whose text was removed before its rename must not report success');
      // The outside change came before the rename: the edit no longer applies.
      assert.match(
        textOf(result),
        /^"outside-removal\/f\.txt" was changed by someone else while this edit ran, and the edit no longer applies to the new content; nothing was written\. old_string was not found/,
      );
      assert.equal(final, 'alpha\n');
    } else {
      // The outside change came after the rename and found nothing to remove: both are in the file.
      assert.equal(final, 'alpha\nBETA\n');
    }
  }
});

test('Edit and Write with expected_version refuse when the file changed since Read, and succeed when it did not', async () => {
  const file = path.join(root, 'versioned.txt');
  await writeFile(file, 'one\n');
  const read = await call(Read, { file_path: 'versioned.txt' });
  const version = contentVersion('one\n');
  assert.deepEqual(read.content.at(-1), { type: 'text', text: `(version ${version})` });

  const edited = await call(Edit, { file_path: 'versioned.txt', old_string: 'one', new_string: 'two', expected_version: version });
  assert.equal(edited.isError, false);
  assert.deepEqual(edited.content.at(-1), { type: 'text', text: `(version ${contentVersion('two\n')})` });

  const stale = `Path "versioned.txt" is not at the expected version: it is at version ${contentVersion('two\n')}. Someone changed it since you read it; nothing was written. Read it again and redo the change on the current content.`;
  assert.deepEqual(await call(Edit, { file_path: 'versioned.txt', old_string: 'two', new_string: 'three', expected_version: version }), {
    content: [{ type: 'text', text: stale }],
    isError: true,
  });
  assert.deepEqual(await call(Write, { file_path: 'versioned.txt', content: 'four\n', expected_version: version }), {
    content: [{ type: 'text', text: stale }],
    isError: true,
  });
  assert.equal(await readFile(file, 'utf8'), 'two\n');

  const written = await call(Write, { file_path: 'versioned.txt', content: 'five\n', expected_version: contentVersion('two\n') });
  assert.equal(written.isError, false);
  assert.equal(await readFile(file, 'utf8'), 'five\n');
  assert.deepEqual(await call(Write, { file_path: 'not-there.txt', content: 'x', expected_version: version }), {
    content: [
      {
        type: 'text',
        text: 'Path "not-there.txt" is not at the expected version: it does not exist. Someone changed it since you read it; nothing was written. Read it again and redo the change on the current content.',
      },
    ],
    isError: true,
  });
});

test("an Edit waits while another process holds the file's lock, and goes on when it lets go", async () => {
  const file = path.join(root, 'locked.txt');
  await writeFile(file, 'before\n');
  // Another server's lock is a flock on the file: flock(1) takes the same.
  const holder = spawn('flock', ['--exclusive', file, 'sh', '-c', 'echo held; exec cat >/dev/null'], { stdio: ['pipe', 'pipe', 'inherit'] });
  holder.stdout.setEncoding('utf8');
  assert.equal(String((await once(holder.stdout, 'data'))[0]).trim(), 'held');
  let settled = false;
  const pending = call(Edit, { file_path: 'locked.txt', old_string: 'before', new_string: 'after' }).finally(() => (settled = true));
  // A bounded look: an Edit that does not wait would have finished within it.
  for (let i = 0; i < 20 && !settled; i += 1) await delay(10);
  assert.equal(settled, false, 'the Edit waits for the holder');
  assert.equal(await readFile(file, 'utf8'), 'before\n');
  const exited = once(holder, 'exit');
  holder.stdin.end();
  await exited;
  assert.equal((await pending).isError, false);
  assert.equal(await readFile(file, 'utf8'), 'after\n');
  assert.deepEqual(
    (await readdir(root)).filter((n) => n.startsWith('.toolport-')),
    [],
  );
});
