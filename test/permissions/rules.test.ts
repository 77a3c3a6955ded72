import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PermissionDenied, PermissionRuleError, type PermissionRules, type RuleCatalog, type Permissions } from '#src/core/permissions.js';
import { compilePermissions } from '#src/permissions/rules.js';

const SERVED = ['Read', 'Edit', 'Write', 'Grep', 'Glob', 'LS', 'Bash', 'Echo'];

const catalog: RuleCatalog = {
  knows: (tool) => SERVED.includes(tool) || tool.startsWith('github__'),
  knowsGroup: (prefix) => SERVED.some((t) => t.startsWith(prefix)) || 'github__'.startsWith(prefix) || prefix.startsWith('github__'),
  specifierOf: (tool) => (['Read', 'Edit', 'Write'].includes(tool) ? 'path' : tool === 'Bash' ? 'command' : undefined),
  checkCommand: (specifier) => {
    if (specifier.includes('(')) throw new Error('unbalanced parentheses');
  },
};

function rules(...lists: PermissionRules[]): Permissions {
  const compiled = compilePermissions(
    lists.map((r, i) => ({ where: i === 0 ? 'TOOLPORT_PERMISSIONS' : 'key "k"', rules: r })),
    catalog,
  );
  assert.ok(compiled);
  return compiled;
}

function refusal(p: Permissions, tool: string, access: 'read' | 'edit' | 'write', path: string, directory = false): string | undefined {
  return p.pathRefusal(tool, access, path, directory)?.message;
}

describe('permission rules', () => {
  it('stop start-up for rules that cannot be read, naming where they are and the rule', () => {
    const cases: Array<[string, string]> = [
      ['Nope', 'key "k": rule "Nope" names "Nope", which is not a served tool'],
      ['Read(', 'key "k": rule "Read(" is not of the form Tool or Tool(specifier)'],
      ['Read()', 'key "k": rule "Read()" has an empty specifier; write the tool name alone for the whole tool'],
      ['Echo(x)', 'key "k": rule "Echo(x)" gives Echo a specifier, but Echo\'s rules are the tool name alone'],
      ['Gr*(x)', 'key "k": rule "Gr*(x)" names a group of tools (`*`), which takes no specifier'],
      ['zz*', 'key "k": rule "zz*" names no served tool (no tool name starts with "zz")'],
      ['Read(../x)', 'key "k": rule "Read(../x)" goes up with "..": path rules name paths inside the workspace'],
      [
        'Read(//etc/passwd)',
        'key "k": rule "Read(//etc/passwd)" is not relative to the workspace: path rules are relative to the workspace root (write `secrets/**`, `./.env` or `/.env`)',
      ],
      [
        'Read(~/.ssh/**)',
        'key "k": rule "Read(~/.ssh/**)" is not relative to the workspace: path rules are relative to the workspace root (write `secrets/**`, `./.env` or `/.env`)',
      ],
      ['Read(!x)', 'key "k": rule "Read(!x)" starts with "!": a rule cannot un-match a path; list it in the other list instead'],
      ['Read(/)', 'key "k": rule "Read(/)" names the workspace root itself; write `**` for every path'],
      ['Bash(a (b)', 'key "k": rule "Bash(a (b)" has a command toolport cannot read: unbalanced parentheses'],
    ];
    for (const [rule, message] of cases) {
      assert.throws(
        () => compilePermissions([{ where: 'key "k"', rules: { deny: [rule] } }], catalog),
        (err: unknown) => err instanceof PermissionRuleError && err.message === message,
        rule,
      );
    }
  });

  it('are nothing at all when no list has a rule', () => {
    assert.equal(
      compilePermissions(
        [
          { where: 'd', rules: {} },
          { where: 'k', rules: undefined },
        ],
        catalog,
      ),
      undefined,
    );
  });

  it('match paths with gitignore semantics relative to the workspace root', () => {
    const p = rules({ deny: ['Read(.env)', 'Read(secrets/**)', 'Read(/top.txt)', 'Read(build/)', 'Read(*.pem)'] });
    assert.equal(refusal(p, 'Read', 'read', '.env'), 'Path ".env" is denied by Read(.env).');
    assert.equal(refusal(p, 'Read', 'read', 'sub/deeper/.env'), 'Path "sub/deeper/.env" is denied by Read(.env).');
    assert.equal(refusal(p, 'Read', 'read', 'secrets/a/b.txt'), 'Path "secrets/a/b.txt" is denied by Read(secrets/**).');
    assert.equal(refusal(p, 'Read', 'read', 'top.txt'), 'Path "top.txt" is denied by Read(/top.txt).');
    assert.equal(refusal(p, 'Read', 'read', 'sub/top.txt'), undefined);
    assert.equal(refusal(p, 'Read', 'read', 'build/out/x.js'), 'Path "build/out/x.js" is denied by Read(build/).');
    assert.equal(refusal(p, 'LS', 'read', 'build', true), 'Path "build" is denied by Read(build/).');
    assert.equal(refusal(p, 'Read', 'read', 'keys/server.pem'), 'Path "keys/server.pem" is denied by Read(*.pem).');
    // Case matters on a case-sensitive file system: `.ENV` is another file.
    assert.equal(refusal(p, 'Read', 'read', '.ENV'), undefined);
    assert.equal(refusal(p, 'Read', 'read', 'README.md'), undefined);
  });

  it('mean the name written even where gitignore would read a comment or drop trailing spaces', () => {
    const p = rules({ deny: ['Read(#notes)', 'Read(secret )'] });
    assert.equal(refusal(p, 'Read', 'read', '#notes'), 'Path "#notes" is denied by Read(#notes).');
    assert.equal(refusal(p, 'Read', 'read', 'secret '), 'Path "secret " is denied by Read(secret ).');
    assert.equal(refusal(p, 'Read', 'read', 'secret'), undefined);
  });

  it('take ./ and / as anchored at the root', () => {
    const p = rules({ deny: ['Read(./.env)'] });
    assert.equal(refusal(p, 'Read', 'read', '.env'), 'Path ".env" is denied by Read(./.env).');
    assert.equal(refusal(p, 'Read', 'read', 'sub/.env'), undefined);
  });

  it('refuse under an allow list what no allow rule matches, and let deny win', () => {
    const p = rules({ allow: ['Edit(docs/**)', 'Write(docs/**)', 'Read(src/**)', 'Read(docs/**)'], deny: ['Edit(docs/private/**)'] });
    assert.equal(refusal(p, 'Edit', 'edit', 'docs/a.md'), undefined);
    assert.equal(refusal(p, 'Edit', 'edit', 'src/a.ts'), 'Path "src/a.ts" is not allowed by any rule for Edit.');
    assert.equal(refusal(p, 'Write', 'write', 'src/a.ts'), 'Path "src/a.ts" is not allowed by any rule for Edit or Write.');
    assert.equal(refusal(p, 'Edit', 'edit', 'docs/private/x.md'), 'Path "docs/private/x.md" is denied by Edit(docs/private/**).');
    // Edit rules govern Write too, as in Claude Code.
    assert.equal(refusal(p, 'Write', 'write', 'docs/private/x.md'), 'Path "docs/private/x.md" is denied by Edit(docs/private/**).');
    assert.equal(refusal(p, 'Read', 'read', 'README.md'), 'Path "README.md" is not allowed by any rule for Read.');
    // A directory is filtered entry by entry, not refused by an allow list.
    assert.equal(refusal(p, 'LS', 'read', '.', true), undefined);
    assert.equal(p.visible('README.md', false), false);
    assert.equal(p.visible('src/a.ts', false), true);
  });

  it('leave a tool with no rule to the scope, and a bare allow allows every path', () => {
    const p = rules({ allow: ['Read', 'Read(src/**)'] });
    assert.equal(refusal(p, 'Read', 'read', 'anything.txt'), undefined);
    assert.equal(refusal(p, 'Edit', 'edit', 'anything.txt'), undefined);
    assert.equal(p.toolRefusal('Bash'), undefined);
  });

  it('take a bare Read or Edit in deny as every path, for every tool that reads or changes files', () => {
    const p = rules({ deny: ['Read', 'Edit'] });
    assert.equal(refusal(p, 'Grep', 'read', 'src/a.ts'), 'Path "src/a.ts" is denied by Read.');
    assert.equal(refusal(p, 'LS', 'read', '.', true), 'Path "." is denied by Read.');
    assert.equal(refusal(p, 'Write', 'write', 'docs/a.md'), 'Path "docs/a.md" is denied by Edit.');
    assert.equal(p.visible('src/a.ts', false), false);
    assert.equal(p.governs('read'), true);
    assert.equal(p.summary('Glob', 'read'), 'Denied for this key: Read.');
    assert.equal(p.toolRefusal('Read')?.message, 'Tool "Read" is denied by Read.');
  });

  it('deny whole tools by name or group, naming the rule', () => {
    const p = rules({ deny: ['Bash', 'github__*'] });
    const bash = p.toolRefusal('Bash');
    assert.ok(bash instanceof PermissionDenied);
    assert.equal(bash.message, 'Tool "Bash" is denied by Bash.');
    assert.equal(bash.code, 'FORBIDDEN');
    assert.equal(bash.rule, 'Bash');
    assert.deepEqual(bash.details, { tool: 'Bash', rule: 'Bash' });
    assert.equal(p.toolRefusal('github__create_issue')?.message, 'Tool "github__create_issue" is denied by github__*.');
    assert.equal(p.toolRefusal('Echo'), undefined);
  });

  it('let a key narrow the default, never widen it: a call passes every layer', () => {
    const p = rules({ allow: ['Read(src/**)'] }, { allow: ['Read(**)'], deny: ['Read(src/secret.ts)'] });
    assert.equal(refusal(p, 'Read', 'read', 'README.md'), 'Path "README.md" is not allowed by any rule for Read.');
    assert.equal(refusal(p, 'Read', 'read', 'src/secret.ts'), 'Path "src/secret.ts" is denied by Read(src/secret.ts).');
    assert.equal(refusal(p, 'Read', 'read', 'src/ok.ts'), undefined);
  });

  it('give each layer its command rules for Bash', () => {
    const p = rules({ deny: ['Bash(curl:*)'] }, { allow: ['Bash(npm test)', 'Bash(git status:*)'] });
    assert.deepEqual(p.commandRules('Bash'), [
      { allow: undefined, deny: ['curl:*'] },
      { allow: ['npm test', 'git status:*'], deny: [] },
    ]);
    assert.deepEqual(rules({ allow: ['Bash', 'Bash(ls)'] }).commandRules('Bash'), []);
  });

  it('say which rules apply to a tool, for the last line of its description', () => {
    const p = rules({ allow: ['Edit(docs/**)', 'Write(docs/**)'], deny: ['Read(.env)', 'Bash'] });
    assert.equal(p.summary('Write', 'write'), 'Allowed for this key: Edit(docs/**), Write(docs/**).');
    assert.equal(p.summary('Edit', 'edit'), 'Allowed for this key: Edit(docs/**). Denied for this key: Read(.env).');
    assert.equal(p.summary('Grep', 'read'), 'Denied for this key: Read(.env).');
    assert.equal(p.summary('Bash', undefined), 'Denied for this key: Bash.');
    assert.equal(p.summary('Echo', undefined), undefined);
    assert.equal(p.governs('read'), true);
    assert.equal(rules({ deny: ['Bash'] }).governs('read'), false);
  });
});
