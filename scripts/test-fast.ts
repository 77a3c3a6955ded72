/**
 * The inner loop: `npm run test:fast` runs the tests that start no server, upstream or sandbox, in
 * under a minute on two cores; `npm test` stays the whole suite. Left out: test/e2e/ and
 * test/deploy/ (the real server process, the image), and the files below, each of which takes
 * 1.5 s or more of its own or starts a process (a server, Redis, an identity provider, races, the Bash oracle). A file named
 * here that no longer exists fails the run, so the list cannot rot unseen.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import process from 'node:process';

const ROOT = path.resolve(import.meta.dirname, '..');
const LEFT_OUT_FOLDERS = ['test/e2e/', 'test/deploy/'];
export const SLOW_TESTS = [
  'test/assembly/key-workspaces.test.ts',
  'test/auth/keyring.test.ts',
  'test/core/executor.test.ts',
  'test/core/registry-sources.test.ts',
  'test/core/registry.test.ts',
  'test/core/schema-compiler/compiler.test.ts',
  'test/core/schema-compiler/parity.test.ts',
  'test/core/strict-schemas.test.ts',
  'test/core/structured-output.test.ts',
  'test/core/validator.test.ts',
  'test/examples.test.ts',
  'test/http/app.test.ts',
  'test/http/contract.test.ts',
  'test/http/fair-admission.test.ts',
  'test/http/fuzz.test.ts',
  'test/http/guards/auth.test.ts',
  'test/http/guards/connections.test.ts',
  'test/http/guards/cors.test.ts',
  'test/http/guards/local-only.test.ts',
  'test/http/guards/protection.test.ts',
  'test/http/guards/rate-limit-store.test.ts',
  'test/http/input-bounds.test.ts',
  'test/http/metrics.test.ts',
  'test/http/oauth-claims.test.ts',
  'test/http/oauth-flood.test.ts',
  'test/http/oauth-guard.test.ts',
  'test/http/oauth-introspection.test.ts',
  'test/http/oauth-issuers.test.ts',
  'test/http/oauth-permissions.test.ts',
  'test/http/openapi/document.test.ts',
  'test/http/parity.test.ts',
  'test/http/replace-keys.test.ts',
  'test/http/routes/calls.test.ts',
  'test/http/routes/mcp.test.ts',
  'test/http/routes/oauth-metadata.test.ts',
  'test/http/routes/tools.test.ts',
  'test/http/workspace-per-key.test.ts',
  'test/infra/logger.test.ts',
  'test/infra/redis.test.ts',
  'test/main/key-reload.test.ts',
  'test/main/run-cli.test.ts',
  'test/mcp/list-changed-http.test.ts',
  'test/mcp/list-changed-stdio.test.ts',
  'test/os/fs/file-lock.test.ts',
  'test/os/proc/process.test.ts',
  'test/os/proc/reaper.test.ts',
  'test/os/sandbox/bubblewrap.test.ts',
  'test/os/sandbox/isolation.test.ts',
  'test/permissions/bash/oracle.test.ts',
  'test/support/require.test.ts',
  'test/telemetry/call-spans.test.ts',
  'test/telemetry/sdk.test.ts',
  'test/tools/bash-landlock.test.ts',
  'test/tools/bash-limits.test.ts',
  'test/tools/bash.test.ts',
  'test/tools/edit-concurrency.test.ts',
  'test/tools/glob/glob.test.ts',
  'test/tools/grep/grep.test.ts',
  'test/tools/listing-rules-grep.test.ts',
  'test/tools/listing-rules-race.test.ts',
  'test/tools/listing-rules.test.ts',
  'test/tools/race-files.test.ts',
  'test/tools/race-listing.test.ts',
  'test/tools/race-rename.test.ts',
  'test/tools/rules-property.test.ts',
  'test/tools/tasks/background-tasks.test.ts',
  'test/upstreams/bounds.test.ts',
  'test/upstreams/changes.test.ts',
  'test/upstreams/churn.test.ts',
  'test/upstreams/confinement.test.ts',
  'test/upstreams/everything.test.ts',
  'test/upstreams/http/client.test.ts',
  'test/upstreams/http/streamable-http.test.ts',
  'test/upstreams/lifecycle.test.ts',
  'test/upstreams/lock/lock.test.ts',
  'test/upstreams/secrets.test.ts',
  'test/upstreams/served.test.ts',
  'test/upstreams/source.test.ts',
];

const gone = SLOW_TESTS.filter((file) => !existsSync(path.join(ROOT, file)));
if (gone.length > 0) {
  process.stderr.write(`scripts/test-fast.ts names tests that do not exist: ${gone.join(', ')}\n`);
  process.exit(1);
}
const files = readdirSync(path.join(ROOT, 'test'), { recursive: true })
  .map((file) => path.join('test', String(file)))
  .filter((file) => file.endsWith('.test.ts') && !LEFT_OUT_FOLDERS.some((folder) => file.startsWith(folder)) && !SLOW_TESTS.includes(file))
  .sort();
const run = spawnSync(process.execPath, ['--import', 'tsx', '--test', '--test-concurrency=2', '--test-reporter=dot', ...process.argv.slice(2), ...files], {
  cwd: ROOT,
  stdio: 'inherit',
});
process.exit(run.status ?? 1);
