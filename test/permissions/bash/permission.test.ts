import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type PermissionRules, type Permissions } from '#src/core/permissions.js';
import { compilePermissions } from '#src/permissions/rules.js';
import { checkBashRules } from '#src/permissions/bash/permission.js';
import { parseCommandPattern } from '#src/permissions/bash/pattern.js';

const catalog = {
  knows: () => true,
  knowsGroup: () => false,
  specifierOf: (tool: string) => (tool === 'Bash' ? ('command' as const) : tool === 'Edit' || tool === 'Read' ? ('path' as const) : undefined),
  checkCommand: (specifier: string) => void parseCommandPattern(specifier),
};

function context(rules: PermissionRules): { permissions: Permissions; caller: string } {
  return { permissions: compilePermissions([{ where: 'key', rules }], catalog) as Permissions, caller: 'key' };
}

async function refusal(rules: PermissionRules, line: string): Promise<string | undefined> {
  try {
    await checkBashRules(context(rules), line);
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}

const BASH = ['Bash(echo:*)', 'Bash(cat:*)', 'Bash(ls:*)'];
const DENY_ENV = { allow: BASH, deny: ['Edit(.env)', 'Edit(secret/**)', 'Read(.env)'] };
const REFUSED = 'The command line is not allowed by any rule for Bash: ';

describe('checkBashRules and the file rules', () => {
  it('refuses a redirection that writes a path an Edit rule denies, however the path is spelled', async () => {
    assert.equal(await refusal(DENY_ENV, 'echo x > .env'), `${REFUSED}Path ".env" is denied by Edit(.env).`);
    assert.equal(await refusal(DENY_ENV, 'echo x >>src/../.env'), `${REFUSED}Path "src/../.env" is denied by Edit(.env).`);
    assert.equal(await refusal(DENY_ENV, 'ls 2>secret/key'), `${REFUSED}Path "secret/key" is denied by Edit(secret/**).`);
    assert.equal(await refusal(DENY_ENV, 'echo x &>./secret/k'), `${REFUSED}Path "./secret/k" is denied by Edit(secret/**).`);
    assert.equal(await refusal(DENY_ENV, 'cat <> .env'), `${REFUSED}Path ".env" is denied by Read(.env).`);
  });

  it('refuses a redirection that reads a path a Read rule denies', async () => {
    assert.equal(await refusal(DENY_ENV, 'cat < .env'), `${REFUSED}Path ".env" is denied by Read(.env).`);
  });

  it('refuses, under file rules, paths it cannot place in the workspace: absolute, outside, or after cd', async () => {
    assert.equal(
      await refusal(DENY_ENV, 'echo x > /tmp/x'),
      `${REFUSED}writing /tmp/x is refused: under rules for Edit a redirection names a path relative to the workspace.`,
    );
    assert.equal(await refusal(DENY_ENV, 'echo x > ../x'), `${REFUSED}writing ../x is refused: it is outside the workspace.`);
    assert.match((await refusal(DENY_ENV, 'cd sub && echo x > out.txt')) ?? '', /writing out\.txt after cd is refused/);
  });

  it('allows redirections to other paths, to descriptors and to /dev/null', async () => {
    for (const line of [
      'echo x > out.txt',
      'ls 2>&1 | cat',
      'echo x >/dev/null 2>/dev/null',
      'cat < x.txt',
      'echo x > out.txt && cd sub',
      "cat <<'EOF' > notes.md\n$(id)\nEOF",
    ]) {
      assert.equal(await refusal(DENY_ENV, line), undefined, line);
    }
  });

  it('applies an Edit allow list to what redirections write', async () => {
    const rules = { allow: [...BASH, 'Edit(docs/**)'] };
    assert.equal(await refusal(rules, 'echo x > docs/a.md'), undefined);
    assert.equal(await refusal(rules, 'echo x > README.md'), `${REFUSED}Path "README.md" is not allowed by any rule for Edit.`);
  });

  it('leaves redirections alone without file rules, and lines alone without Bash rules', async () => {
    assert.equal(await refusal({ allow: BASH }, 'echo x > /tmp/x'), undefined);
    assert.equal(await refusal({ deny: ['Edit(.env)'] }, 'echo x > .env; $(id)'), undefined);
  });
});
