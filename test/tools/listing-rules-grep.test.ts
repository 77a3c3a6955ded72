import assert from 'node:assert/strict';
import { link, mkdir, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import type { ToolDef, ToolResult } from '#src/core/types.js';
import { createGrepTool } from '#src/tools/grep/grep.js';
import { withoutHidden } from '#src/tools/grep/listing.js';
import { rgRunner, type GrepConfinement } from '#src/os/sandbox/rg-confined.js';
import { Workspace } from '#src/os/fs/workspace.js';
import { requiredOptions } from '../support/require.js';
import { ruledContext, rules, toolContext } from '../support/tool-context.js';
import { temporaryDirectory } from '../support/workspace.js';

// Under rules for reading, Grep searches through descriptors it holds (grep-pinned.ts), not by rg's
// own walk. These tests hold it to what the walk gives: the same output as a search without rules
// in a workspace where the hidden files (and the files with two names) do not exist at all.

const HIDING = rules({ deny: ['Read(*-secret.txt)', 'Read(secrets/)', 'Read(/top.env)'] });
const HIDING_NOTHING = rules({ deny: ['Read(no-such-file)'] });

const lines = (...texts: string[]): string => `${texts.join('\n')}\n`;
// A file whose first lines match, with binary data after them: rg stops there and says so.
const BINARY_AFTER_MATCH = Buffer.concat([Buffer.from('needle before binary\n'), Buffer.alloc(200_000, 'x'), Buffer.from('\n\0needle after\n')]);

/** The files both workspaces have. */
const SHARED: Record<string, string | Buffer> = {
  'a.txt': lines('one', 'needle a1', 'two', 'three', 'needle a2', 'four'),
  'c.txt': lines('ctx', 'needle c', 'ctx'),
  'dir/d.txt': lines('needle d', 'ctx'),
  'dir/sub/e.ts': lines('needle e'),
  '.hidden/h.txt': lines('needle hidden'),
  '.ignore': lines('ignored.txt'),
  'ignored.txt': lines('needle ignored'),
  'node_modules/m/index.js': lines('needle module'),
  'bin.dat': Buffer.from('\0needle binary\n'),
  'big.txt': BINARY_AFTER_MATCH,
  'we\nird.txt': lines('needle weird'),
  ...Object.fromEntries(Array.from({ length: 7 }, (_, i) => [`many/f${i}.txt`, lines(`needle many ${i}`, 'ctx', `needle again ${i}`)])),
};

/** The files only the workspace searched under rules has: hidden by HIDING, or with two names. */
const HIDDEN: Record<string, string> = {
  'b-secret.txt': lines('needle b secret', 'ctx'),
  'dir/d-secret.txt': lines('needle secret d'),
  'secrets/s.txt': lines('needle secrets'),
  'secrets/deep/t.ts': lines('needle deep'),
  'top.env': lines('needle env'),
  'many/f3-secret.txt': lines('needle many secret'),
  'pair-1.txt': lines('needle pair'),
};

async function tree(root: string, files: Record<string, string | Buffer>): Promise<void> {
  for (const [name, content] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(root, name)), { recursive: true });
    await writeFile(path.join(root, name), content);
  }
  await symlink('a.txt', path.join(root, 'link-to-a.txt'));
}

const base = await temporaryDirectory({ after }, 'toolport-grep-rules-');
const full = path.join(base, 'full');
const pruned = path.join(base, 'pruned');
await tree(full, { ...SHARED, ...HIDDEN });
await link(path.join(full, 'pair-1.txt'), path.join(full, 'pair-2.txt'));
await tree(pruned, SHARED);
const fullWs = await Workspace.open(full);
const prunedWs = await Workspace.open(pruned);
after(async () => {
  await fullWs.close();
  await prunedWs.close();
});
const runner = await rgRunner(fullWs, 'rg', 'on');
const confinements: GrepConfinement[] = ['off', ...(runner.sandbox === undefined ? [] : (['on'] as const))];

const textOf = (result: ToolResult): string => result.content.map((block) => (block.type === 'text' ? block.text : '')).join('\n');

const INPUTS: Record<string, unknown>[] = [
  { pattern: 'needle' },
  { pattern: 'needle', output_mode: 'count' },
  { pattern: 'needle', output_mode: 'content' },
  { pattern: 'needle', output_mode: 'content', '-C': 1 },
  { pattern: 'needle', output_mode: 'content', '-A': 1 },
  { pattern: 'needle', output_mode: 'content', '-B': 2, '-n': false },
  { pattern: 'needle', output_mode: 'content', '-C': 1, '-A': 0 },
  { pattern: 'needle', output_mode: 'content', '-C': 0 },
  { pattern: 'needle', output_mode: 'content', '-C': 2, '-B': 1 },
  { pattern: 'needle', output_mode: 'content', '-A': 0, '-B': 0 },
  { pattern: 'needle', output_mode: 'content', '-C': 1, head_limit: 9 },
  { pattern: 'needle', head_limit: 3 },
  { pattern: 'needle', output_mode: 'count', head_limit: 2 },
  { pattern: 'NEEDLE', '-i': true, output_mode: 'content' },
  { pattern: 'needle a1\\ntwo', multiline: true, output_mode: 'content' },
  { pattern: 'needle', glob: '*.ts' },
  { pattern: 'needle', glob: '.hidden/*', output_mode: 'content' },
  { pattern: 'needle', type: 'ts', output_mode: 'count' },
  { pattern: 'needle', path: 'dir', output_mode: 'content', '-C': 1 },
  { pattern: 'needle', path: 'many', output_mode: 'content', '-A': 1 },
  { pattern: 'needle', path: 'node_modules' },
  { pattern: 'no match anywhere' },
  { pattern: '(' },
  { pattern: 'needle', type: 'no-such-type' },
  { pattern: 'needle', glob: '{' },
];

describe('Grep under rules for reading', requiredOptions('ripgrep', runner.found ? undefined : 'rg was not found on PATH'), () => {
  for (const confine of confinements) {
    for (const batch of [2, undefined]) {
      it(`shows exactly what a search without rules shows where the hidden files do not exist (confine ${confine}, ${batch ?? 'default'} files per rg)`, async () => {
        const ruled: ToolDef = createGrepTool(fullWs, { confine, ruled: { batch } });
        const plain: ToolDef = createGrepTool(prunedWs, { confine });
        for (const input of INPUTS) {
          const expected = await plain.execute(input, toolContext());
          assert.doesNotMatch(textOf(expected), /secret|env|pair/, 'the pruned workspace holds none of the hidden files');
          assert.deepEqual(await ruled.execute(input, ruledContext(HIDING)), expected, JSON.stringify(input));
        }
      });
    }
  }

  it('shows the binary-file note of a walk, and the files after it, as a search without rules does', async () => {
    const result = await createGrepTool(prunedWs).execute({ pattern: 'needle', output_mode: 'content', glob: '{big,c}.txt' }, toolContext());
    assert.equal(
      textOf(result),
      'big.txt:1:needle before binary\nbig.txt: WARNING: stopped searching binary file after match (found "\\0" byte around offset 200022)\nc.txt:2:needle c',
    );
    const ruled = await createGrepTool(fullWs).execute({ pattern: 'needle', output_mode: 'content', glob: '{big,c}.txt' }, ruledContext(HIDING_NOTHING));
    assert.deepEqual(ruled, result);
  });

  it("leaves out rg's errors about paths the rules hide, however the path reads, and keeps the others", () => {
    const errors = [
      'rg: secrets: Permission denied (os error 13)',
      'rg: dir/x-secret.txt: Input/output error (os error 5)',
      'rg: a: b-secret.txt: line 2: error parsing glob',
      'rg: dir: Permission denied (os error 13)',
      "rg: error parsing glob '{': unclosed alternate group",
      'rg: unrecognized file type: x',
    ];
    assert.equal(withoutHidden(errors.join('\n'), HIDING), errors.slice(3).join('\n'));
    // Under an allow list, a path it does not allow is hidden; an error about no path is not.
    assert.equal(withoutHidden(errors.join('\n'), rules({ allow: ['Read(secrets/**)'] })), errors.slice(4).join('\n'));
  });

  it('leaves out files with more than one name, even under rules that hide nothing else', async () => {
    const grep = createGrepTool(fullWs);
    assert.equal(textOf(await grep.execute({ pattern: 'needle pair' }, toolContext())), 'Found 2 files\npair-1.txt\npair-2.txt');
    assert.equal(textOf(await grep.execute({ pattern: 'needle pair' }, ruledContext(HIDING_NOTHING))), 'No matches found');
  });

  it('stops when the call is aborted', async () => {
    const controller = new AbortController();
    controller.abort(new Error('client went away'));
    const result = await createGrepTool(fullWs).execute({ pattern: 'needle' }, ruledContext(HIDING, controller.signal));
    assert.deepEqual(result, { content: [{ type: 'text', text: 'Grep was aborted: client went away' }], isError: true });
  });

  it('searches at most the files its limit allows, and says so', async () => {
    const grep = createGrepTool(fullWs, { ruled: { maxFiles: 3, batch: 2 } });
    assert.deepEqual(
      textOf(await grep.execute({ pattern: 'needle', path: 'many' }, ruledContext(HIDING))),
      [
        'Found 3 files',
        'many/f0.txt',
        'many/f1.txt',
        'many/f2.txt',
        "(Only the first 3 files were searched: under this key's rules Grep looks at no more per call. Narrow the search with path, glob or type.)",
      ].join('\n'),
    );
  });
});
