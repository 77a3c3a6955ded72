import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { createToolset } from '#src/assembly/toolset.js';
import { serverPermissions } from '#src/permissions/catalog.js';
import type { KeySpec } from '#src/auth/keyring.js';
import { buildApp } from '#src/http/app.js';
import { Workspace } from '#src/os/fs/workspace.js';
import { capturedLog } from '../../support/log-capture.js';
import { Cleanups, temporaryDirectory } from '../../support/workspace.js';

const SECRET = 'TOKEN=hunter2-bypass';
const ALLOW_KEY = 'allow-list-0123456789abcdef';
const DENY_KEY = 'deny-only-0123456789abcdef';

// Lines that made bash evaluate a value as code, each of which read .env past the rules.
const EVALUATED = [
  "x='a[$(cat .env >&2)]'; [[ x -eq 0 ]]",
  "x='a[$(cat .env >&2)]'; (( x ))",
  "x='a[$(cat .env >&2)]'; y[x]=1",
  "x='a[$(cat .env >&2)]'; echo $((x))",
  "x='$(cat .env)'; echo ${x@P}",
  "[[ -v 'a[$(cat .env >&2)]' ]]",
  'echo `echo \\`cat .env\\` `',
  'ca\\\nt .env',
  // One of each class the attack pass of issue 30 found, each of which ran past the denylist checker.
  // Quotes inside a parameter expansion: the checker read '...' as literal, bash ran the substitution.
  `echo "\${x:-'$(cat .env >&2)'}"`,
  `git status \${x:-'$(cat .env >&2)'}`,
  // Shell options that change how the rest of the line is read.
  'shopt -u interactive_comments\necho #$(cat .env >&2)',
  // Builtins that evaluate their arguments, and programs that run others, not looked through.
  "compgen -C 'cat .env' x",
  'find . -maxdepth 0 -exec cat .env \\;',
  'echo .env | xargs cat',
  'echo .env | xargs -I{} cat {}',
  'flock .lock cat .env',
];

describe('Bash rules against lines that make bash evaluate code', () => {
  const cleanups = new Cleanups();
  let app: FastifyInstance;
  let workspace: Workspace;

  before(async () => {
    const dir = await temporaryDirectory(cleanups);
    const root = path.join(dir, 'ws');
    await mkdir(root, { recursive: true });
    await writeFile(path.join(root, '.env'), `${SECRET}\n`);
    workspace = await Workspace.open(root);
    const registry = await createToolset({ workspace: root, tools: ['Bash'], plugins: [], bashSandbox: 'auto' }, dir, undefined, workspace);
    const permissions = await serverPermissions({}, registry.list(), []);
    const keys: KeySpec[] = [
      { label: 'allow', key: ALLOW_KEY, permissions: { allow: ['Bash(git status:*)', 'Bash(npm test)', 'Bash(echo:*)'], deny: ['Bash(curl:*)'] } },
      { label: 'deny', key: DENY_KEY, permissions: { deny: ['Bash(curl:*)', 'Bash(cat:*)'] } },
    ];
    app = await buildApp({ registry, apiKeys: keys, permissions, logger: capturedLog().logger });
  });
  after(async () => {
    await app.close();
    await workspace.close();
    await cleanups.run();
  });

  for (const [label, key] of [
    ['an allow list', ALLOW_KEY],
    ['deny rules alone', DENY_KEY],
  ] as const) {
    it(`refuses each line under ${label}, and .env's content never appears`, async () => {
      for (const command of EVALUATED) {
        const res = await app.inject({
          method: 'POST',
          url: '/tools/Bash',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          payload: JSON.stringify({ command }),
        });
        assert.equal(res.statusCode, 403, command);
        assert.equal(res.json().error.code, 'FORBIDDEN', command);
        assert.doesNotMatch(res.body, /hunter2/, command);
      }
    });
  }

  it('still runs an allowed line', async () => {
    const res = await app.inject({
      method: 'POST',
      url: '/tools/Bash',
      headers: { authorization: `Bearer ${ALLOW_KEY}`, 'content-type': 'application/json' },
      payload: JSON.stringify({ command: 'cd . && git status --short 2>/dev/null; echo "$HOME" 42 2>&1' }),
    });
    assert.equal(res.statusCode, 200);
    assert.match(res.body, /42/);
  });
});
