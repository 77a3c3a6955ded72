import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { rm } from 'node:fs/promises';
import { after, before, describe, it } from 'node:test';
import { generateLine, Random } from '../../support/bash-grammar.js';
import { Oracle } from '../../support/bash-oracle.js';
import { requiredOptions } from '../../support/require.js';

// Bounded for CI (about 20 s on two cores); `npm run oracle:bash-rules` runs 100,000 and more.
const LINES = 3_000;
const SEED = 30;

const strace = spawnSync('strace', ['-f', '-qq', '-e', 'trace=execve', '-o', '/dev/null', 'true']);
// Skipped where strace is missing, and a failure instead under TOOLPORT_TEST_REQUIRE_ALL=1 (CI installs it).
const needs = requiredOptions(
  'strace',
  strace.error !== undefined
    ? 'strace is not installed (scripts/install-system-deps.sh installs it)'
    : strace.status !== 0
      ? 'strace cannot trace here'
      : undefined,
);

// Lines after which bash once ran what the rules forbid; each must stay refused, or run only what is allowed.
const FOUND = [
  'bash ./evil.sh "a$"#x',
  'echo ls | bash',
  'echo "${x:-\'$(id)\'}"',
  'shopt -u interactive_comments\necho #$(id)',
  'echo x | xargs id',
  '(env LAN!G=C uname HEAD~1--)',
  'env LANG#=C rm -f gone &>out.txt',
  'env =LANG=C touch pwned',
];

describe('Bash rules judged by bash itself', needs, () => {
  let root: string;
  before(async () => {
    root = await Oracle.scratch();
  });
  after(() => rm(root, { recursive: true, force: true }));

  it('lets bash run nothing the rules forbid, for every line the rules allow of those generated', async () => {
    const oracles = { allow: new Oracle('allow', root), deny: new Oracle('deny', root) };
    const random = new Random(SEED);
    const lines = Array.from({ length: LINES }, () => generateLine(random));
    const bypasses: string[] = [];
    const ran = { allow: 0, deny: 0 };
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < lines.length) {
        const index = next++;
        const line = lines[index] as string;
        for (const key of ['allow', 'deny'] as const) {
          const judgement = await oracles[key].judge(line, index);
          if (judgement.allowed) ran[key]++;
          for (const violation of judgement.violations) bypasses.push(`${key}: ${JSON.stringify(line)}: ${violation}`);
        }
      }
    };
    await Promise.all([worker(), worker(), worker()]);
    assert.deepEqual(bypasses, []);
    // The grammar must reach lines the rules allow under both keys, or the property says nothing.
    assert.ok(ran.allow > LINES / 50, `only ${ran.allow} lines allowed under the allow list`);
    assert.ok(ran.deny > LINES / 50, `only ${ran.deny} lines allowed under deny rules alone`);
  });

  it('keeps every bypass the oracle found closed', async () => {
    for (const key of ['allow', 'deny'] as const) {
      const oracle = new Oracle(key, root);
      for (const [index, line] of FOUND.entries()) assert.deepEqual((await oracle.judge(line, 10_000 + index)).violations, [], `${key}: ${line}`);
    }
  });

  it('sees a program the rules forbid when one runs (the oracle itself works)', async () => {
    // Run directly, past the rules: the oracle must report what it sees.
    const judged = await new Oracle('deny', root).judge('echo hi', 20_000);
    assert.deepEqual(judged, { allowed: true, violations: [] });
    const probe = new Oracle('deny', root) as unknown as { run(line: string, dir: string): Promise<string[]> };
    assert.deepEqual(await probe.run('id >/dev/null; echo x > .env', `${root}/probe`), ['["id"] ran, denied by a rule', '.env, denied by Edit rules, changed']);
  });
});
