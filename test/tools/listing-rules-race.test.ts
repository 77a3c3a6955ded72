import assert from 'node:assert/strict';
import { mkdir, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { PermissionDenied } from '#src/core/permissions.js';
import type { ToolDef, ToolResult } from '#src/core/types.js';
import { createGlobTool } from '#src/tools/glob/glob.js';
import { createGrepTool } from '#src/tools/grep/grep.js';
import { createLsTool } from '#src/tools/ls.js';
import { createReadTool } from '#src/tools/read.js';
import { rgRunner } from '#src/os/sandbox/rg-confined.js';
import { Workspace } from '#src/os/fs/workspace.js';
import { requireOrSkip } from '../support/require.js';
import { startSwapper } from '../support/swapper.js';
import { ruledContext, rules } from '../support/tool-context.js';
import { temporaryDirectory } from '../support/workspace.js';

// The attack: `ws/d` is a real directory and `ws/.swap` a symlink to `secrets`, inside the
// workspace, whose files the rules deny and which holds files of the same names as `d`; another
// process exchanges `d` and `.swap` in a tight loop while clients read, list and search through
// `d`. A tool that checked `d` and then used the name again, or a ripgrep that walks `d` by name,
// would read `secrets`. Every call must see the real `d` or be refused.
const CALLS_PER_CLIENT = 30;
const CLIENTS = 6;
const SECRET = 'SECRET-CONTENT';
const SECRET_NAME = 'SECRET-NAME';
const RULES = rules({ deny: ['Read(secrets/**)'] });

const base = await temporaryDirectory({ after }, 'toolport-rules-race-');
const root = path.join(base, 'ws');
let ws: Workspace;
let calls: [ToolDef, Record<string, unknown>][];

const textOf = (result: ToolResult): string => result.content.map((b) => (b.type === 'text' ? b.text : '[image]')).join('\n');

before(async () => {
  for (const dir of ['d/sub', 'secrets/sub']) await mkdir(path.join(root, dir), { recursive: true });
  await writeFile(path.join(root, 'd', 'a.txt'), 'needle inside\n');
  await writeFile(path.join(root, 'd', 'sub', 'b.txt'), 'needle inside too\n');
  await writeFile(path.join(root, 'secrets', 'a.txt'), `needle ${SECRET}\n`);
  await writeFile(path.join(root, 'secrets', 'sub', 'b.txt'), `needle ${SECRET}\n`);
  await writeFile(path.join(root, 'secrets', `${SECRET_NAME}.txt`), `needle ${SECRET}\n`);
  await symlink('secrets', path.join(root, '.swap'));
  ws = await Workspace.open(root);
  const grep = (await rgRunner(ws, 'rg', 'on')).sandbox === undefined ? [] : [createGrepTool(ws, { confine: 'on' })];
  const greps = [createGrepTool(ws, { confine: 'off' }), ...grep];
  calls = [
    [createReadTool(ws), { file_path: 'd/a.txt' }],
    [createReadTool(ws), { file_path: 'd/sub/b.txt' }],
    [createLsTool(ws), { path: 'd' }],
    [createGlobTool(ws), { pattern: 'd/**' }],
    [createGlobTool(ws), { pattern: '**/*', path: 'd' }],
    ...greps.flatMap((tool): [ToolDef, Record<string, unknown>][] => [
      [tool, { pattern: 'needle', output_mode: 'content' }],
      [tool, { pattern: 'needle', path: 'd', output_mode: 'content' }],
      [tool, { pattern: 'needle', path: 'd/a.txt', output_mode: 'content' }],
      [tool, { pattern: 'needle', path: 'd/sub', output_mode: 'count' }],
    ]),
  ];
});
after(() => ws.close());

test('Read, LS, Glob and Grep never read or name a denied file while a directory on their path is swapped with a symlink to the denied directory', async (t) => {
  const { found } = await rgRunner(ws, 'rg', 'off');
  if (!requireOrSkip(t, 'ripgrep', found ? undefined : 'rg was not found on PATH')) return;
  const leaks: string[] = [];
  let inside = 0;
  let refused = 0;
  const swapper = await startSwapper(path.join(root, 'd'), path.join(root, '.swap'));
  try {
    await Promise.all(
      Array.from({ length: CLIENTS }, async (_, client) => {
        for (let i = 0; i < CALLS_PER_CLIENT; i += 1) {
          const [tool, input] = calls[(client + i) % calls.length]!;
          let text: string;
          try {
            text = textOf(await tool.execute(input, ruledContext(RULES)));
          } catch (err) {
            // The walk went through the symlink: the path it resolved is in secrets/, and the rules refuse it,
            // naming the path as given (never where the link led).
            if (err instanceof PermissionDenied && /^Path "d\/[^"]*" is denied by Read\(secrets\/\*\*\)\.$/.test(err.message)) {
              refused += 1;
              continue;
            }
            text = `threw ${String(err)}`;
            leaks.push(`${tool.name} ${JSON.stringify(input)} ${text}`);
          }
          if (text.includes('needle inside') || text.includes('a.txt')) inside += 1;
          if (text.includes(SECRET) || text.includes(SECRET_NAME) || text.includes(base) || text.includes('/proc/')) {
            leaks.push(`${tool.name} ${JSON.stringify(input)}: ${text}`);
          }
        }
      }),
    );
  } finally {
    await swapper.stop();
  }
  assert.deepEqual(leaks, [], 'no call may return or name what secrets/ holds');
  assert.ok(inside > 0, 'some calls saw the real directory');
  assert.ok(inside + refused > 0);
});
