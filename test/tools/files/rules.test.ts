import assert from 'node:assert/strict';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { PermissionDenied } from '#src/core/permissions.js';
import { checkLinkCount, checkPathRules } from '#src/tools/files/rules.js';
import { rules } from '../../support/tool-context.js';
import type { Location } from '#src/os/fs/workspace.js';
import { temporaryWorkspace } from '../../support/workspace.js';

const ws = await temporaryWorkspace({ after });
await mkdir(path.join(ws.root, 'sub'));
const RULES = { permissions: rules({ deny: ['Read(.env)', 'Edit(docs/**)'], allow: ['Write(docs/**)', 'Write(*.md)'] }) };

/** Runs `use` on where `given` leads, then lets it go. */
async function at(given: string, use: (location: Location) => void): Promise<void> {
  const location = await ws.locate(given);
  try {
    use(location);
  } finally {
    await location.close();
  }
}

/** Asserts that `check` throws the rules' refusal with exactly `message`, naming `rule`. */
function refuses(check: () => void, message: string, rule?: string): void {
  assert.throws(check, (err: unknown) => err instanceof PermissionDenied && err.message === message && err.rule === rule);
}

describe('checkPathRules', () => {
  it('refuses by the path the walk resolved, naming the rule, and passes what no rule denies', async () => {
    await at('./sub/../.env', (env) => {
      refuses(() => checkPathRules(RULES, 'Read', 'read', env, './sub/../.env'), 'Path "./sub/../.env" is denied by Read(.env).', 'Read(.env)');
      checkPathRules(RULES, 'Edit', 'edit', env, './sub/../.env');
    });
    await at('docs/a.md', (docs) => {
      refuses(() => checkPathRules(RULES, 'Write', 'write', docs, 'docs/a.md'), 'Path "docs/a.md" is denied by Edit(docs/**).', 'Edit(docs/**)');
      checkPathRules(RULES, 'Read', 'read', docs, 'docs/a.md');
    });
  });

  it('refuses what an allow list does not match, naming the tools whose rules it lacks', async () => {
    await at('src/a.ts', (other) => {
      refuses(() => checkPathRules(RULES, 'Write', 'write', other, 'src/a.ts'), 'Path "src/a.ts" is not allowed by any rule for Write.');
      checkPathRules(RULES, 'Read', 'read', other, 'src/a.ts');
    });
  });

  it('never refuses a directory for want of an allow rule, only by a deny rule', async () => {
    await at('.', (root) => checkPathRules(RULES, 'Write', 'write', root, '.'));
  });

  it('passes everything without rules', async () => {
    await at('.env', (env) => {
      checkPathRules({}, 'Read', 'read', env, '.env');
      checkPathRules({ permissions: undefined }, 'Read', 'read', env, '.env');
    });
  });
});

describe('checkLinkCount', () => {
  it('refuses a file with more than one name under rules for reading, whatever the count type', () => {
    const message =
      'Path "x.txt" has 3 names (hard links); under rules for Read a file with more than one name is refused, since a rule cannot tell which of its names it is reached by.';
    refuses(() => checkLinkCount(RULES, 'Grep', 'x.txt', 3), message);
    refuses(() => checkLinkCount(RULES, 'Read', 'x.txt', 3n), message);
  });

  it('passes a file with one name, and any file without rules for reading', () => {
    checkLinkCount(RULES, 'Read', 'x.txt', 1);
    checkLinkCount(RULES, 'Read', 'x.txt', 1n);
    checkLinkCount({}, 'Read', 'x.txt', 5);
    checkLinkCount({ permissions: rules({ deny: ['Write(x.txt)'] }) }, 'Read', 'x.txt', 5);
  });
});
