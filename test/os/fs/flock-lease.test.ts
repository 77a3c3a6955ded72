import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { test } from 'node:test';
import type { ToolDef } from '#src/core/types.js';
import { Workspace } from '#src/os/fs/workspace.js';
import { createEditTool } from '#src/tools/edit.js';
import { createWriteTool } from '#src/tools/write.js';
import { toolContext } from '../../support/tool-context.js';
import { temporaryDirectory } from '../../support/workspace.js';

const text = async (tool: ToolDef, input: Record<string, unknown>): Promise<string> => {
  const result = await tool.execute(input, toolContext());
  const block = result.content[0]!;
  return `${result.isError === true ? 'error: ' : ''}${block.type === 'text' ? block.text : ''}`;
};

// A process that holds a read lease on a file, as any command that owns the file may
// (fcntl F_SETLEASE = 1024, F_RDLCK = 0), and ignores the kernel's SIGIO asking it to let go:
// an open of the file for writing then waits the kernel's lease-break-time (45 s by default).
const HOLD_LEASE = `$| = 1; $SIG{IO} = 'IGNORE'; open(my $f, '<', $ARGV[0]) or die "open: $!"; fcntl($f, 1024, 0) or die "lease: $!"; print "held\\n"; sleep 300;`;

test(
  'a lease a command holds on one file holds up neither its Edit nor any other Write: the lock helper never waits on an open',
  // Well under the kernel's lease-break-time: the helper that waited on the open held every lock for 45 s.
  { timeout: 20_000 },
  async (t) => {
    const root = await temporaryDirectory(t, 'toolport-lease-');
    await writeFile(path.join(root, 'leased.txt'), 'alpha\n');
    const holder = spawn('perl', ['-e', HOLD_LEASE, path.join(root, 'leased.txt')], { stdio: ['ignore', 'pipe', 'pipe'] });
    t.after(() => holder.kill('SIGKILL'));
    let stderr = '';
    holder.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const [line] = (await once(holder.stdout, 'data')) as [Buffer];
    assert.equal(line.toString(), 'held\n', stderr);

    const ws = await Workspace.open(root);
    t.after(() => ws.close());
    const edit = createEditTool(ws);
    const write = createWriteTool(ws);
    // The Edit of the leased file first, so that its lock is asked for before the Write's.
    const [edited, written] = await Promise.all([
      text(edit, { file_path: 'leased.txt', old_string: 'alpha', new_string: 'beta' }),
      text(write, { file_path: 'other/new.txt', content: 'fresh\n' }),
    ]);
    assert.match(written, /^Created "other\/new.txt"/);
    assert.match(edited, /^(Edited|Replaced|Made)|1 replacement/, edited);
    assert.equal(await readFile(path.join(root, 'leased.txt'), 'utf8'), 'beta\n');
  },
);
