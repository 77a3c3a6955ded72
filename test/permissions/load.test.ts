import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, it, after } from 'node:test';
import { loadApiKeys, ApiKeysError } from '#src/config/api-keys.js';
import { loadDefaultPermissions, PermissionsFileError } from '#src/permissions/load.js';
import { ruleCatalog, serverRules } from '#src/permissions/catalog.js';
import { defineTool } from '#src/core/define-tool.js';
import { Type } from 'typebox';
import { Cleanups, temporaryDirectory } from '../support/workspace.js';

const tool = (name: string, rules?: { specifier?: 'path' | 'command' }) =>
  defineTool({ name, description: name, inputSchema: Type.Object({}), ...(rules && { rules }), execute: () => ({ content: [] }) });
const TOOLS = [tool('Read', { specifier: 'path' }), tool('Bash', { specifier: 'command' }), tool('Echo')];
const catalog = ruleCatalog(TOOLS, ['github__*']);
const KEY = 'a-long-enough-secret-0123456789';

describe('permission rules in configuration', () => {
  const cleanups = new Cleanups();
  after(() => cleanups.run());

  async function file(name: string, content: unknown): Promise<string> {
    const dir = await temporaryDirectory(cleanups);
    const at = path.join(dir, name);
    await writeFile(at, typeof content === 'string' ? content : JSON.stringify(content));
    return at;
  }

  it('stop start-up for a key whose rule cannot be read, naming the key and the rule', async () => {
    const cases: Array<[unknown, string]> = [
      [{ deny: ['Nope(x)'] }, 'entry 1 ("ci"), "permissions": rule "Nope(x)" names "Nope", which is not a served tool'],
      [{ allow: ['Bash(npm run test:*'] }, 'entry 1 ("ci"), "permissions": rule "Bash(npm run test:*" is not of the form Tool or Tool(specifier)'],
      [{ deny: ['Echo(x)'] }, 'entry 1 ("ci"), "permissions": rule "Echo(x)" gives Echo a specifier, but Echo\'s rules are the tool name alone'],
      [
        { allow: ['Read'], extra: [] },
        'entry 1 ("ci"): "permissions" must be {"allow": [rules], "deny": [rules]}, each rule a string such as "Read(src/**)" or "Bash(npm test)"',
      ],
    ];
    for (const [permissions, problem] of cases) {
      const keys = await file('keys.json', [{ label: 'ci', key: KEY, permissions }]);
      await assert.rejects(
        loadApiKeys({ apiKeys: [], apiKeysFile: keys }, ['Read', 'Bash', 'Echo'], serverRules(undefined, catalog)),
        (err: unknown) => err instanceof ApiKeysError && err.message === `Invalid TOOLPORT_API_KEYS_FILE ${JSON.stringify(keys)}: ${problem}.`,
        JSON.stringify(permissions),
      );
    }
  });

  it("carry a key's rules, including rules for the tools of an upstream that lists them later", async () => {
    const rules = { allow: ['Read(src/**)', 'Bash(git status)', 'github__get_issue'], deny: ['github__*'] };
    const keys = await file('keys.json', [{ label: 'ci', key: KEY, permissions: rules }]);
    const loaded = await loadApiKeys({ apiKeys: [], apiKeysFile: keys }, ['Read', 'Bash', 'Echo', 'github__*'], serverRules(undefined, catalog));
    assert.deepEqual(loaded, [{ label: 'ci', key: KEY, permissions: rules }]);
  });

  it('read the default rules of TOOLPORT_PERMISSIONS, and refuse a bad file naming it and the rule', async () => {
    const good = await file('p.json', { deny: ['Read(.env)'] });
    assert.deepEqual(await loadDefaultPermissions(good, catalog), { deny: ['Read(.env)'] });
    assert.equal(await loadDefaultPermissions(undefined, catalog), undefined);
    const cases: Array<[unknown, string]> = [
      [{ deny: ['Read(../x)'] }, 'rule "Read(../x)" goes up with "..": path rules name paths inside the workspace'],
      [{ deny: 'Read(.env)' }, '/deny must be array; it must be {"allow": [rules], "deny": [rules]}'],
      [{ denied: [] }, 'the file must NOT have additional properties; it must be {"allow": [rules], "deny": [rules]}'],
      ['{"deny": [', 'it is not valid JSON'],
    ];
    for (const [content, problem] of cases) {
      const at = await file('p.json', content);
      await assert.rejects(
        loadDefaultPermissions(at, catalog),
        (err: unknown) => err instanceof PermissionsFileError && err.message.startsWith(`Invalid TOOLPORT_PERMISSIONS ${JSON.stringify(at)}: ${problem}`),
        String(content),
      );
    }
    await assert.rejects(loadDefaultPermissions('/nonexistent/p.json', catalog), {
      message: 'Invalid TOOLPORT_PERMISSIONS "/nonexistent/p.json": no such file.',
    });
  });
});
