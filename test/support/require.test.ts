import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { pathToFileURL } from 'node:url';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { test } from 'node:test';
import { temporaryDirectory } from './workspace.js';

const REQUIRE = pathToFileURL(path.join(import.meta.dirname, 'require.ts')).href;

/** Runs `body` as a test file of its own, with or without TOOLPORT_TEST_REQUIRE_ALL=1; its exit code and TAP output. */
async function runTestFile(
  t: { after(fn: () => Promise<void> | void): void },
  body: string,
  requireAll: boolean,
): Promise<{ status: number | null; output: string }> {
  const dir = await temporaryDirectory(t, 'toolport-require-');
  const file = path.join(dir, 'needs.test.ts');
  await writeFile(file, `import { test, describe } from 'node:test';\nimport { requireOrSkip, requiredOptions, skipWithout } from '${REQUIRE}';\n${body}\n`);
  // Without NODE_TEST_CONTEXT, which would make the child a part of this run instead of a run of its own.
  const env: NodeJS.ProcessEnv = { ...process.env, TOOLPORT_TEST_REQUIRE_ALL: requireAll ? '1' : '' };
  delete env.NODE_TEST_CONTEXT;
  const child = spawnSync(process.execPath, ['--import', 'tsx', '--test', '--test-reporter=tap', file], {
    env,
    encoding: 'utf8',
    cwd: path.join(import.meta.dirname, '../..'),
  });
  return { status: child.status, output: child.stdout + child.stderr };
}

const MISSING_IN_TEST = `test('needs bwrap', (t) => { if (!requireOrSkip(t, 'bubblewrap', 'bwrap was not found on PATH')) return; throw new Error('ran without bwrap'); });`;
const MISSING_IN_OPTIONS = `describe('needs Redis', requiredOptions('Redis', 'redis-server is not installed'), () => { test('uses Redis', () => { throw new Error('ran without Redis'); }); });`;
const MISSING_CAPABILITY = `test('needs a cgroup', (t) => { if (!skipWithout(t, 'a cgroup per call', 'no cgroup v2 here')) return; throw new Error('ran without a cgroup'); });`;

test('requireOrSkip skips a test whose program is missing, saying why, when TOOLPORT_TEST_REQUIRE_ALL is not set', async (t) => {
  const { status, output } = await runTestFile(t, MISSING_IN_TEST, false);
  assert.equal(status, 0, output);
  assert.match(output, /# SKIP bubblewrap cannot run here: bwrap was not found on PATH/);
});

test('requireOrSkip fails a test whose program is missing when TOOLPORT_TEST_REQUIRE_ALL=1, as in CI', async (t) => {
  const { status, output } = await runTestFile(t, MISSING_IN_TEST, true);
  assert.equal(status, 1, output);
  assert.match(output, /not ok 1 - needs bwrap/);
  assert.match(output, /bubblewrap is required \(TOOLPORT_TEST_REQUIRE_ALL=1\) but cannot run here: bwrap was not found on PATH/);
  assert.doesNotMatch(output, /ran without bwrap/);
});

test('requiredOptions skips a suite whose program is missing locally, and fails its file when TOOLPORT_TEST_REQUIRE_ALL=1', async (t) => {
  const local = await runTestFile(t, MISSING_IN_OPTIONS, false);
  assert.equal(local.status, 0, local.output);
  assert.match(local.output, /# SKIP Redis cannot run here: redis-server is not installed/);
  const ci = await runTestFile(t, MISSING_IN_OPTIONS, true);
  assert.equal(ci.status, 1, ci.output);
  assert.match(ci.output, /Redis is required \(TOOLPORT_TEST_REQUIRE_ALL=1\) but cannot run here: redis-server is not installed/);
  assert.doesNotMatch(ci.output, /ran without Redis/);
});

test('skipWithout skips a test for a missing machine capability also when TOOLPORT_TEST_REQUIRE_ALL=1', async (t) => {
  const { status, output } = await runTestFile(t, MISSING_CAPABILITY, true);
  assert.equal(status, 0, output);
  assert.match(output, /# SKIP a cgroup per call is not available here: no cgroup v2 here/);
});
